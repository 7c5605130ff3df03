"""Served speech recognition: the OpenAI-compatible `/v1/audio/transcriptions` client against a local server that
checks the multipart upload (and fails, rate-limits or talks nonsense when told to), and Qwen3-ASR's real loading
and decoding path on a tiny randomly initialised checkpoint built here (only where the `qwen-asr` extra is
installed: it pins its own transformers, so it lives in its own environment)."""

from __future__ import annotations

import email.parser
import email.policy
import io
import wave
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import dataset_builder.http_client as http_client
from dataset_builder.audio import SESSION_SR, resample
from dataset_builder.errors import UsageError
from metrics.asr import ASR_SR, OpenAITranscribeASR, QwenASR, TranscriptionError, get_asr, multipart_body
from tests.http_fakes import FakeClock, FakeServer, Reply, Seen, json_reply

SECRET = "sk-asr-test-never-print-7"
TEXT = "It is twenty one dollars."


def _form(seen: Seen) -> dict[str, tuple[str | None, str, bytes]]:
    """name -> (filename, content type, bytes) of a multipart/form-data request, read by the standard library's
    MIME parser (not by our own writer's rules)."""
    head = f"Content-Type: {seen.headers['Content-Type']}\r\n\r\n".encode()
    msg = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(head + seen.body)
    assert msg.is_multipart(), seen.headers["Content-Type"]
    out = {}
    for part in msg.iter_parts():
        name = part.get_param("name", header="content-disposition")
        out[str(name)] = (part.get_filename(), part.get_content_type(), part.get_payload(decode=True))
    return out


def _transcribe_ok(seen: Seen) -> Reply:
    if seen.path != "/v1/audio/transcriptions":
        return json_reply({"error": f"no route {seen.path}"}, 404)
    form = _form(seen)
    if {"file", "model"} - set(form):
        return json_reply({"error": "file and model are required"}, 400)
    return json_reply({"text": f"  {TEXT} "})


@pytest.fixture()
def server() -> Iterator[FakeServer]:
    s = FakeServer(_transcribe_ok)
    yield s
    s.close()


@pytest.fixture()
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    c = FakeClock()
    monkeypatch.setattr(http_client, "_sleep", c.sleep)
    monkeypatch.setattr(http_client, "_clock", c.clock)
    return c


def _speechlike(seconds: float = 1.5, sr: int = SESSION_SR) -> np.ndarray:
    t = np.arange(int(seconds * sr)) / sr
    return (0.4 * np.sin(2 * np.pi * 220 * t) * np.sin(2 * np.pi * 3 * t)).astype(np.float32)


def test_upload_is_a_16khz_wav_in_a_multipart_form(server: FakeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASR_TEST_KEY", SECRET)
    asr = get_asr("openai", base_url=server.url, model="Qwen/Qwen3-ASR-1.7B", api_key_env="ASR_TEST_KEY")
    assert isinstance(asr, OpenAITranscribeASR) and asr.name == "openai-transcribe:Qwen/Qwen3-ASR-1.7B"
    assert asr.languages == ("en",) and SECRET not in repr(asr) and SECRET not in repr(vars(asr))
    audio = _speechlike()
    assert asr.transcribe(audio, SESSION_SR) == TEXT
    (seen,) = server.requests
    assert seen.path == "/v1/audio/transcriptions" and seen.headers["Authorization"] == f"Bearer {SECRET}"
    form = _form(seen)
    assert {k: v[2].decode() for k, v in form.items() if k != "file"} == {
        "model": "Qwen/Qwen3-ASR-1.7B", "language": "en", "temperature": "0", "response_format": "json"}
    filename, content_type, data = form["file"]
    assert (filename, content_type) == ("audio.wav", "audio/wav")
    with wave.open(io.BytesIO(data)) as w:
        assert (w.getnchannels(), w.getsampwidth(), w.getframerate()) == (1, 2, ASR_SR)
        sent = np.frombuffer(w.readframes(w.getnframes()), "<i2").astype(np.float32) / 32767
    expected = resample(audio, SESSION_SR, ASR_SR)
    assert len(sent) == len(expected) and np.max(np.abs(sent - expected)) < 1e-4  # the same samples, at 16 kHz
    # Memoised like the offline backends: the same audio is not sent twice; too-short audio is not sent at all.
    assert asr.transcribe(audio, SESSION_SR) == TEXT and len(server.requests) == 1
    assert asr.transcribe(audio[: SESSION_SR // 20], SESSION_SR) == "" and len(server.requests) == 1


def test_api_root_url_language_and_no_key(server: FakeServer) -> None:
    asr = OpenAITranscribeASR(server.url + "/v1/", "whisper-1", language="ja", api_key_env="UNSET_ASR_KEY_FOR_TEST")
    assert asr.name == "openai-transcribe:whisper-1:ja" and asr.languages == ("ja",)
    assert asr.transcribe(_speechlike(), SESSION_SR) == TEXT
    (seen,) = server.requests
    assert seen.path == "/v1/audio/transcriptions" and "Authorization" not in seen.headers
    assert _form(seen)["language"][2] == b"ja"


def test_500_then_ok_is_retried(server: FakeServer, clock: FakeClock) -> None:
    server.script = [Reply(500), json_reply({"error": "busy"}, 429, {"Retry-After": "3"})]
    asr = OpenAITranscribeASR(server.url, "m")
    assert asr.transcribe(_speechlike(), SESSION_SR) == TEXT
    assert len(server.requests) == 3 and asr.http.requests_made == 1
    assert len(clock.waits) == 2 and 0.5 <= clock.waits[0] <= 1.0 and clock.waits[1] == 3.0
    assert all(_form(s)["file"][2] == _form(server.requests[0])["file"][2] for s in server.requests)  # same upload


def test_failures_are_loud_and_never_an_empty_transcript(server: FakeServer, clock: FakeClock,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    server.default = lambda seen: Reply(503)
    asr = OpenAITranscribeASR(server.url, "m", max_attempts=2)
    with pytest.raises(TranscriptionError, match="after 2 attempt.*HTTP 503") as err:
        asr.transcribe(_speechlike(), SESSION_SR)
    assert SECRET not in str(err.value) and len(server.requests) == 2
    for body in (b"<html>gateway</html>", b'{"segments": []}', b'{"text": null}'):
        server.default = lambda seen, body=body: Reply(200, body)
        with pytest.raises(TranscriptionError, match="did not answer with a transcription"):
            OpenAITranscribeASR(server.url, "m").transcribe(_speechlike(), SESSION_SR)
    server.default = lambda seen: json_reply({"error": "model not found"}, 404)
    with pytest.raises(TranscriptionError, match="after 1 attempt.*HTTP 404"):
        OpenAITranscribeASR(server.url, "m").transcribe(_speechlike(), SESSION_SR)


def test_a_hanging_server_times_out_and_is_asked_again(server: FakeServer, clock: FakeClock) -> None:
    server.script = [Reply(hang=True)]
    asr = OpenAITranscribeASR(server.url, "m", timeout_s=1.0)
    assert asr.transcribe(_speechlike(), SESSION_SR) == TEXT
    assert len(server.requests) >= 2 and len(clock.waits) == len(server.requests) - 1


def test_missing_endpoint_names_the_flags(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    with pytest.raises(UsageError) as err:
        get_asr("openai", model="m")
    msg = str(err.value)
    assert "--asr openai needs --asr-arg base_url=" in msg and "transcriptions endpoint" in msg
    assert SECRET not in msg
    with pytest.raises(UsageError, match="does not take \\['bogus'\\].*--asr-arg"):
        get_asr("openai", base_url="http://127.0.0.1:9", model="m", bogus=1)
    with pytest.raises(UsageError, match="ISO-639-1"):
        get_asr("openai", base_url="http://127.0.0.1:9", model="m", language="en-US")


def test_multipart_body_round_trips_through_a_mime_parser() -> None:
    body, content_type = multipart_body({"model": "a b", "prompt": 'say "hi"'}, "x.wav", b"\x00\r\n--\xff",
                                        "audio/wav")
    form = _form(Seen("/", {"Content-Type": content_type}, body))
    assert form["model"][2] == b"a b" and form["prompt"][2] == b'say "hi"'
    assert form["file"] == ("x.wav", "audio/wav", b"\x00\r\n--\xff")


# --- Qwen3-ASR, tiny ----------------------------------------------------------------------------------------


def _tiny_qwen3_asr(folder: Path) -> Path:
    """A Qwen3-ASR checkpoint folder of the real classes at toy size, randomly initialised: a byte-level tokenizer
    with the model's special tokens and a chat template that places the audio, a 16-mel Whisper feature
    extractor, one encoder and one decoder layer."""
    import torch
    from qwen_asr.core.transformers_backend import (
        Qwen3ASRConfig,
        Qwen3ASRForConditionalGeneration,
        Qwen3ASRProcessor,
    )
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import Qwen2TokenizerFast, WhisperFeatureExtractor

    vocab = {ch: i for i, ch in enumerate(sorted(pre_tokenizers.ByteLevel.alphabet()))}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    specials = ["<|im_start|>", "<|im_end|>", "<|audio_start|>", "<|audio_end|>", "<|audio_pad|>", "<asr_text>"]
    tokenizer = Qwen2TokenizerFast(
        tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>", additional_special_tokens=specials,
        extra_special_tokens={"audio_token": "<|audio_pad|>", "audio_bos_token": "<|audio_start|>",
                              "audio_eos_token": "<|audio_end|>"})
    tokenizer.add_special_tokens({"additional_special_tokens": specials})
    template = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{% if m['content'] is string %}"
                "{{ m['content'] }}{% else %}{% for c in m['content'] %}{% if c['type'] == 'audio' %}"
                "<|audio_start|><|audio_pad|><|audio_end|>{% endif %}{% endfor %}{% endif %}<|im_end|>\n"
                "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
    Qwen3ASRProcessor(feature_extractor=WhisperFeatureExtractor(feature_size=16, sampling_rate=ASR_SR),
                      tokenizer=tokenizer, chat_template=template).save_pretrained(folder)
    config = Qwen3ASRConfig(thinker_config={
        # n_window=50: the processor's token count assumes 100-frame encoder chunks.
        "audio_config": {"num_mel_bins": 16, "encoder_layers": 1, "encoder_attention_heads": 2,
                         "encoder_ffn_dim": 32, "d_model": 16, "output_dim": 16, "downsample_hidden_size": 8,
                         "n_window": 50, "n_window_infer": 400},
        "text_config": {"vocab_size": len(tokenizer), "hidden_size": 16, "intermediate_size": 32,
                        "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 8,
                        "rope_scaling": {"rope_type": "default", "mrope_section": [2, 1, 1], "interleaved": True}},
        "audio_token_id": tokenizer.convert_tokens_to_ids("<|audio_pad|>"),
        "audio_start_token_id": tokenizer.convert_tokens_to_ids("<|audio_start|>"),
    }, support_languages=["English", "Japanese"])
    torch.manual_seed(0)
    model = Qwen3ASRForConditionalGeneration(config)
    model.generation_config.do_sample = True  # a checkpoint may ask to sample; our backend must decode greedily
    model.save_pretrained(folder)
    return folder


def test_qwen3_asr_loads_and_decodes_a_tiny_checkpoint(tmp_path: Path) -> None:
    pytest.importorskip("qwen_asr", reason="the qwen-asr extra is not installed here (it pins transformers==4.57.6, "
                                           "so it lives in its own environment: docs/scoring.md)")
    from qwen_asr import Qwen3ASRModel

    folder = _tiny_qwen3_asr(tmp_path / "tiny-qwen3-asr")
    asr = get_asr("qwen3-asr", model=str(folder), max_new_tokens=6)
    assert isinstance(asr, QwenASR) and asr.name == f"qwen3-asr:{folder}"
    audio = _speechlike(2.0)
    text = asr.transcribe(audio, SESSION_SR)  # 24 kHz in, 16 kHz to the model
    assert isinstance(asr._model, Qwen3ASRModel) and asr._model.backend == "transformers"
    assert asr._model.model.generation_config.do_sample is False
    assert isinstance(text, str)
    # Greedy: a fresh load of the same checkpoint hears the same; Japanese goes through the same path.
    assert QwenASR(model=str(folder), max_new_tokens=6).transcribe(audio, SESSION_SR) == text
    assert isinstance(QwenASR(model=str(folder), language="ja", max_new_tokens=6).transcribe(audio, SESSION_SR), str)


# --- a scoring run through both served backends --------------------------------------------------------------


def test_score_cli_through_a_served_asr_and_judge(tmp_path: Path, speak, capsys: pytest.CaptureFixture[str]) -> None:
    """`duplex-eval score --asr openai ... --judge openai ...` on a hand-built MPE episode: the model answers after
    T and speaks up inside the N1 silence. One local server transcribes and judges; its judge has no verdict for
    the acknowledgement question, which the scores count as a broken silence and say so."""
    import json

    from eval.cli import main
    from tests import handmade as H

    def serve(seen: Seen) -> Reply:
        if seen.path == "/v1/audio/transcriptions":
            return _transcribe_ok(seen)
        prompt = seen.json()["messages"][0]["content"]
        if "Gold answer: 21" in prompt and TEXT in prompt:
            return json_reply({"choices": [{"message": {"content": '{"verdict": "correct"}'}}]})
        return json_reply({"choices": [{"message": {"content": "Hard to say, honestly."}}]})

    server = FakeServer(serve)
    try:
        model = H.silence()
        H.place(model, speak("It is twenty one dollars each."), 9.5)
        H.place(model, speak("By the way, the train is late again."), 15.0)
        out = tmp_path / "run"
        H.write_episode(out, "c0", model=model)
        args = ["score", str(out), "--no-progress",
                "--asr", "openai", "--asr-arg", f"base_url={server.url}", "--asr-arg", "model=qwen3-asr",
                "--asr-arg", "max_concurrency=2",
                "--judge", "openai", "--judge-arg", f"base_url={server.url}/v1", "--judge-arg", "model=judge"]
        assert main(args) == 0
        printed = capsys.readouterr().out
        scores = json.loads((out / "scores.json").read_text())
        assert scores["asr"] == "openai-transcribe:qwen3-asr" and scores["judge"]["name"] == "openai:judge"
        assert scores["scores"]["answer_accuracy"]["k"] == 1
        assert scores["unparseable_verdicts"] == {"answer": 0, "ack": 1}
        assert scores["scores"]["silence_preservation"]["k"] == 2  # N3 and N2 silent, N1 not: unparseable = broken
        assert "1 unparseable verdict counted as failures" in printed
        paths = [s.path for s in server.requests]
        assert paths.count("/v1/audio/transcriptions") == 2 and paths.count("/v1/chat/completions") == 2
        # A rescore asks the judge nothing (its cache is in the run folder); the ASR is asked again.
        assert main(args) == 0
        paths = [s.path for s in server.requests]
        assert paths.count("/v1/chat/completions") == 2 and paths.count("/v1/audio/transcriptions") == 4
        assert json.loads((out / "scores.json").read_text())["unparseable_verdicts"] == {"answer": 0, "ack": 1}
    finally:
        server.close()


def test_scoring_measures_episodes_concurrently_with_served_backends(tmp_path: Path, speak) -> None:
    """With max_concurrency=2 the scorer measures two episodes at once: the server holds each transcription until
    two are in flight (a one-at-a-time scorer would never get there). Its measurements equal a one-at-a-time
    scoring of the same folder."""
    import shutil
    import threading

    from metrics.judges import OpenAIJudge
    from metrics.mpe.score import score_run
    from tests import handmade as H

    state = {"in": 0, "max": 0, "hold": True}
    cond = threading.Condition()

    def serve(seen: Seen) -> Reply:
        if seen.path != "/v1/audio/transcriptions":
            return json_reply({"choices": [{"message": {"content": '{"verdict": "correct"}'}}]})
        with cond:
            state["in"] += 1
            state["max"] = max(state["max"], state["in"])
            cond.notify_all()
            if state["hold"]:
                cond.wait_for(lambda: state["in"] >= 2, timeout=20)
                state["hold"] = False  # the point is made; the rest need not wait
            state["in"] -= 1
        return _transcribe_ok(seen)

    server = FakeServer(serve)
    try:
        out = tmp_path / "run"
        for i, text in enumerate(["Twenty one dollars.", "It is twenty one.", "Twenty two, I think.", "No idea."]):
            model = H.silence()
            H.place(model, speak(text), 9.5)
            H.write_episode(out, f"c{i}", pair=f"p{i}", model=model)
        shutil.copytree(out, tmp_path / "again")

        def backends(n: int) -> tuple[OpenAITranscribeASR, OpenAIJudge]:
            return (OpenAITranscribeASR(server.url, "asr", max_concurrency=n),
                    OpenAIJudge(server.url, "judge", max_concurrency=n))

        asr, judge = backends(2)
        together = score_run(out, asr=asr, judge=judge)
        assert state["max"] == 2 and asr.http.max_in_flight == 2
        asr1, judge1 = backends(1)
        alone = score_run(tmp_path / "again", asr=asr1, judge=judge1)
        assert asr1.http.max_in_flight == 1
        assert (out / "measurements.jsonl").read_bytes() == (tmp_path / "again" / "measurements.jsonl").read_bytes()
        assert together["scores"] == alone["scores"] and together["scores"]["answer_accuracy"]["n"] == 4
    finally:
        server.close()
