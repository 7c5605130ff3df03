"""TTS layer: real piper and espeak-ng, a real local HTTP server, and the on-disk cache."""

from __future__ import annotations

import json
import re
import shutil
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dataset_builder.audio import SESSION_SR, wav_bytes
from dataset_builder.errors import UsageError
from dataset_builder.tts.base import TTSBackend, get_tts, tts_names
from dataset_builder.tts.cache import CachedTTS
from dataset_builder.tts.espeak_backend import EspeakTTS
from dataset_builder.tts.http_backend import HttpTTS, HttpTTSError, speech_url
from dataset_builder.tts.piper_backend import HUMAN_VOICES, RETIRED_VOICES, WARPED_VOICES, PiperTTS
from dataset_builder.tts.timbre import reshape_timbre, shift_pitch_and_formants
from dataset_builder.tts.voices import assign_voices, trim_silence

TEXT = "Could you book a table for four people tonight?"


def median_f0(audio: np.ndarray, sr: int, fmin: float = 50.0, fmax: float = 400.0) -> float:
    """Median pitch over voiced frames, from the autocorrelation peak of 60 ms frames.

    The autocorrelation is divided by its overlap length: otherwise long lags (deep voices) are penalised and
    the estimate is pulled up for them.
    """
    frame, hop = int(0.06 * sr), int(0.01 * sr)
    lag_min, lag_max = int(sr / fmax), int(sr / fmin)
    overlap = frame - np.arange(frame)
    threshold = 0.1 * np.max(np.abs(audio))
    f0s = []
    for start in range(0, audio.size - frame, hop):
        x = audio[start : start + frame].astype(np.float64)
        if np.max(np.abs(x)) < threshold:
            continue
        x = x - x.mean()
        ac = np.correlate(x, x, mode="full")[frame - 1 :]
        if ac[0] <= 0:
            continue
        ac = ac / ac[0] * frame / overlap
        lag = lag_min + int(np.argmax(ac[lag_min:lag_max]))
        if ac[lag] > 0.5:  # clearly periodic only
            f0s.append(sr / lag)
    assert len(f0s) > 20, "too few voiced frames to estimate pitch"
    return float(np.median(f0s))


# ---------------------------------------------------------------- piper


@pytest.fixture(scope="module")
def piper() -> PiperTTS:
    return PiperTTS()


@pytest.fixture(scope="module")
def bank_audio(piper: PiperTTS) -> dict[str, np.ndarray]:
    return {v: piper.synthesize(TEXT, v) for v in [*piper.voices(), piper.assistant_voice]}


def test_registry_entries_resolve() -> None:
    assert {"piper", "espeak", "http"} <= set(tts_names())
    for name, kwargs in [("piper", {}), ("espeak", {}), ("http", {"base_url": "http://127.0.0.1:9"})]:
        backend = get_tts(name, **kwargs)
        assert isinstance(backend, TTSBackend)
        assert backend.assistant_voice not in backend.voices()


def test_piper_format_and_duration(piper: PiperTTS, bank_audio: dict[str, np.ndarray]) -> None:
    assert piper.name.startswith("piper:en_US-joe-medium+lex=")
    assert len(piper.voices()) >= 5 and piper.assistant_voice not in piper.voices()
    for voice, audio in bank_audio.items():
        assert audio.dtype == np.float32 and audio.ndim == 1, voice
        assert 1.5 < audio.size / SESSION_SR < 5.0, voice  # nine words
        assert np.max(np.abs(audio)) == pytest.approx(10 ** (-3 / 20), rel=1e-3)
        # Edges were trimmed to ~50 ms of near-silence.
        edge = int(0.06 * SESSION_SR)
        assert np.max(np.abs(audio[:edge])) > 0.005 and np.max(np.abs(audio[-edge:])) > 0.0005, voice


def test_piper_is_deterministic(piper: PiperTTS, bank_audio: dict[str, np.ndarray]) -> None:
    voice = piper.voices()[0]
    again = piper.synthesize(TEXT, voice)
    fresh = PiperTTS().synthesize(TEXT, voice)
    assert again.tobytes() == bank_audio[voice].tobytes() == fresh.tobytes()


def test_piper_voice_bank_pitches_are_distinct(bank_audio: dict[str, np.ndarray]) -> None:
    humans = [v for v in bank_audio if v in HUMAN_VOICES]
    f0 = {v: median_f0(bank_audio[v], SESSION_SR) for v in humans}
    ordered = sorted(f0.values())
    ratios = [b / a for a, b in zip(ordered, ordered[1:], strict=False)]
    assert min(ratios) > 1.08, f0
    # Pitch follows the bank's factor ordering (ids encode the factor).
    by_factor = sorted(humans, key=lambda v: int(re.search(r"-p(\d{3})", v).group(1)))  # type: ignore[union-attr]
    assert [f0[v] for v in by_factor] == ordered


def test_assistant_voice_is_apart_from_every_human_voice(piper: PiperTTS, bank_audio: dict[str, np.ndarray]) -> None:
    # By construction: at least 8 % apart in pitch or in formants (the unshifted voice has neither moved).
    for v, bank in HUMAN_VOICES.items():
        assert max(abs(bank.pitch - 1), abs((bank.formant or bank.pitch) - 1)) >= 0.08, v
    # Measured: the nearest human voice in pitch (the lowest) has a brighter spectrum, the others a higher pitch.
    asst = bank_audio[piper.assistant_voice]
    low = min(HUMAN_VOICES, key=lambda v: HUMAN_VOICES[v].pitch)
    assert spectral_centroid(bank_audio[low], SESSION_SR) > 1.05 * spectral_centroid(asst, SESSION_SR)
    for v in HUMAN_VOICES:
        if v != low:
            assert median_f0(bank_audio[v], SESSION_SR) > 1.08 * median_f0(asst, SESSION_SR), v


def spectral_centroid(audio: np.ndarray, sr: int) -> float:
    spec = np.abs(np.fft.rfft(audio.astype(np.float64)))
    freqs = np.fft.rfftfreq(audio.size, 1 / sr)
    return float((spec * freqs).sum() / spec.sum())


def test_formants_move_apart_from_pitch(piper: PiperTTS, bank_audio: dict[str, np.ndarray]) -> None:
    # The bank's highest voice against a plain resample by its pitch factor: same pitch, lower formants.
    voice = "piper-joe-psola-p180-f117"
    bank = HUMAN_VOICES[voice]
    assert bank.formant_ratio < 1
    plain = reshape_timbre(bank_audio[voice], SESSION_SR, 1 / bank.formant_ratio)  # formants back up to 1.8
    assert median_f0(plain, SESSION_SR) == pytest.approx(median_f0(bank_audio[voice], SESSION_SR), rel=0.03)
    assert spectral_centroid(plain, SESSION_SR) > 1.1 * spectral_centroid(bank_audio[voice], SESSION_SR)


def test_reshape_timbre_keeps_pitch_moves_envelope_and_is_exact_at_identity() -> None:
    sr = SESSION_SR
    t = np.arange(sr) / sr
    # A 120 Hz buzz through one resonance at 700 Hz: harmonics weighted by distance from the formant.
    x = sum(np.exp(-(((k * 120) - 700) / 300) ** 2) * np.sin(2 * np.pi * k * 120 * t) for k in range(1, 40))
    x = (0.5 * x / np.max(np.abs(x))).astype(np.float32)
    assert reshape_timbre(x, sr).tobytes() == x.tobytes()
    up = reshape_timbre(x, sr, 1.3)
    assert up.tobytes() == reshape_timbre(x, sr, 1.3).tobytes()  # deterministic
    assert median_f0(up, sr) == pytest.approx(median_f0(x, sr), rel=0.02)
    assert spectral_centroid(up, sr) > 1.15 * spectral_centroid(x, sr)
    assert spectral_centroid(reshape_timbre(x, sr, 1.0, tilt_db_per_octave=3.0), sr) > spectral_centroid(x, sr)
    with pytest.raises(ValueError, match="formant_ratio"):
        reshape_timbre(x, sr, 0.0)


def test_shift_pitch_and_formants_moves_each_apart_and_keeps_the_length() -> None:
    sr = 22_050
    t = np.arange(sr) / sr
    x = sum(np.exp(-(((k * 110) - 700) / 300) ** 2) * np.sin(2 * np.pi * k * 110 * t) for k in range(1, 40))
    x = (0.5 * x / np.max(np.abs(x))).astype(np.float32)
    assert shift_pitch_and_formants(x, sr, 1.0, 1.0).tobytes() == x.tobytes()
    high = shift_pitch_and_formants(x, sr, 1.6, 1.0)
    assert high.size == x.size and high.dtype == np.float32
    assert high.tobytes() == shift_pitch_and_formants(x, sr, 1.6, 1.0).tobytes()  # deterministic
    # fmin above half the buzz: a periodic buzz's autocorrelation peaks as high at twice the period.
    assert median_f0(high, sr, fmin=100) == pytest.approx(1.6 * median_f0(x, sr, fmin=100), rel=0.03)
    bright = shift_pitch_and_formants(x, sr, 1.0, 1.3)
    assert median_f0(bright, sr, fmin=100) == pytest.approx(median_f0(x, sr, fmin=100), rel=0.03)
    assert spectral_centroid(bright, sr) > 1.15 * spectral_centroid(x, sr)
    # Silence and a clip shorter than Praat's analysis window come back at their own length.
    assert not shift_pitch_and_formants(np.zeros(sr // 2, np.float32), sr, 1.5, 1.1).any()
    assert shift_pitch_and_formants(x[: sr // 50], sr, 1.5, 1.1).size == sr // 50
    with pytest.raises(ValueError, match="ratios"):
        shift_pitch_and_formants(x, sr, 0.0, 1.0)


def test_retired_voices_still_render_but_are_not_handed_out(piper: PiperTTS) -> None:
    # Older scripts name the earlier banks' voices; they keep their meaning under their ids.
    assert not set(RETIRED_VOICES) & set(piper.voices())
    assert piper.synthesize("Hello there.", "piper-joe-p079").size > 0
    warped = next(iter(WARPED_VOICES))
    assert piper.synthesize("Hello there.", warped).size > 0


def test_piper_length_scale_changes_name_and_duration(piper: PiperTTS) -> None:
    slow = PiperTTS(length_scale=1.6)
    assert slow.name != piper.name
    assert piper.slowed(1.6).name == slow.name and EspeakTTS().slowed(1.6).name != EspeakTTS().name
    voice = next(iter(HUMAN_VOICES))
    assert slow.synthesize(TEXT, voice).size > 1.15 * piper.synthesize(TEXT, voice).size
    with pytest.raises(KeyError, match="unknown piper voice"):
        piper.synthesize(TEXT, "nobody")


# ---------------------------------------------------------------- espeak


@pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="espeak-ng absent: apt-get install espeak-ng")
def test_espeak_backend() -> None:
    tts = EspeakTTS()
    assert len(set(tts.voices())) >= 8 and tts.assistant_voice not in tts.voices()
    a = tts.synthesize("-Hello there, how are you?", tts.voices()[0])
    b = tts.synthesize("-Hello there, how are you?", tts.voices()[0])
    assert a.dtype == np.float32 and a.ndim == 1 and 0.8 < a.size / SESSION_SR < 4.0
    assert a.tobytes() == b.tobytes()
    assert tts.synthesize("Hello there, how are you?", tts.voices()[1]).tobytes() != a.tobytes()


def test_espeak_missing_binary_is_a_clear_error() -> None:
    with pytest.raises(RuntimeError, match="apt-get install espeak-ng"):
        EspeakTTS(binary="espeak-ng-does-not-exist").synthesize("hi", "en-us")


# ---------------------------------------------------------------- http


class _Server:
    """A local OpenAI-shaped speech endpoint: answers with the queued statuses, then with 200 + a WAV."""

    def __init__(self, statuses: list[int]) -> None:
        self.statuses = list(statuses)
        self.requests: list[dict[str, Any]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append({"path": self.path, "headers": dict(self.headers), "json": body})
                status = server.statuses.pop(0) if server.statuses else 200
                if status != 200:
                    payload = b"nope"
                    self.send_response(status)
                else:
                    # 16 kHz stereo sine, 0.1 s per character: the length proves the text arrived.
                    t = np.arange(int(0.1 * len(body["input"]) * 16_000)) / 16_000
                    tone = 0.5 * np.sin(2 * np.pi * 220 * t)
                    payload = wav_bytes(np.stack([tone, tone], axis=1), 16_000)
                    self.send_response(200)
                    self.send_header("Content-Type", "audio/wav")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server_factory() -> Iterator[Any]:
    servers: list[_Server] = []

    def make(statuses: list[int] | None = None) -> _Server:
        servers.append(_Server(statuses or []))
        return servers[-1]

    yield make
    for s in servers:
        s.close()


def test_speech_url() -> None:
    assert speech_url("http://h:1") == "http://h:1/v1/audio/speech"
    assert speech_url("http://h:1/v1/") == "http://h:1/v1/audio/speech"
    assert speech_url("http://h:1/api/v1") == "http://h:1/api/v1/audio/speech"


def test_http_request_and_decoding(server_factory: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEST_TTS_KEY", "sk-secret")
    srv = server_factory()
    tts = HttpTTS(
        srv.base_url + "/v1",
        model="qwen3-tts",
        voices=["a", "b"],
        assistant_voice="c",
        api_key_env="TEST_TTS_KEY",
    )
    assert srv.requests == []  # lazy: no I/O in the constructor
    assert tts.voices() == ["a", "b"] and tts.assistant_voice == "c"
    assert "secret" not in tts.name
    audio = tts.synthesize("hello world", "b")
    assert audio.dtype == np.float32 and audio.ndim == 1
    assert audio.size == pytest.approx(1.1 * SESSION_SR, abs=5)
    (req,) = srv.requests
    assert req["path"] == "/v1/audio/speech"
    expected = {"model": "qwen3-tts", "input": "hello world", "voice": "b", "response_format": "wav"}
    assert req["json"] == expected
    assert req["headers"]["Authorization"] == "Bearer sk-secret"
    assert req["headers"]["Content-Type"] == "application/json"


def test_http_without_key_sends_no_auth(server_factory: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    srv = server_factory()
    HttpTTS(srv.base_url).synthesize("hi", "alloy")
    assert "Authorization" not in srv.requests[0]["headers"]


def test_http_retries_5xx(server_factory: Any) -> None:
    srv = server_factory([500, 503])
    tts = HttpTTS(srv.base_url, backoff_s=0.01)
    assert tts.synthesize("hi", "alloy").size > 0
    assert len(srv.requests) == 3


def test_http_gives_up_after_bounded_retries(server_factory: Any) -> None:
    srv = server_factory([500] * 10)
    with pytest.raises(HttpTTSError, match="HTTP 500"):
        HttpTTS(srv.base_url, max_retries=2, backoff_s=0.01).synthesize("hi", "alloy")
    assert len(srv.requests) == 3


def test_http_404_names_url_and_status(server_factory: Any) -> None:
    srv = server_factory([404])
    with pytest.raises(HttpTTSError) as err:
        HttpTTS(srv.base_url, backoff_s=0.01).synthesize("hi", "alloy")
    assert f"{srv.base_url}/v1/audio/speech" in str(err.value) and "404" in str(err.value)
    assert len(srv.requests) == 1  # a 4xx is not retried


def test_http_connection_error_is_clear() -> None:
    with pytest.raises(HttpTTSError, match="127.0.0.1:9"):
        HttpTTS("http://127.0.0.1:9", max_retries=1, backoff_s=0.01, timeout_s=2).synthesize("hi", "alloy")


def test_http_assistant_voice_reserved() -> None:
    tts = HttpTTS("http://x", voices=["a", "b", "c"])
    assert tts.voices() == ["a", "b"] and tts.assistant_voice == "c"
    with pytest.raises(UsageError, match="must not be one of"):
        HttpTTS("http://x", voices=["a", "b"], assistant_voice="a")


# ---------------------------------------------------------------- voices and cache


def test_assign_voices_is_deterministic_and_distinct() -> None:
    voices = [f"v{i}" for i in range(6)]
    speakers = ["A", "B", "C", "D"]
    m = assign_voices(speakers, voices, seed=3)
    assert m == assign_voices(speakers, voices, seed=3)
    assert set(m) == set(speakers) and len(set(m.values())) == 4
    assert any(assign_voices(speakers, voices, seed=s) != m for s in range(10))
    many = assign_voices([f"s{i}" for i in range(8)], voices[:3], seed=0)
    assert sorted(list(many.values())[:3]) == voices[:3]
    # Pinned: a change in the mapping changes every build's audio, so it must be deliberate.
    assert assign_voices(["A", "B"], ["x", "y", "z"], seed=0) == {"A": "z", "B": "y"}


def test_trim_silence_keeps_50ms() -> None:
    audio = np.concatenate([np.zeros(24_000), np.ones(2_400) * 0.5, np.zeros(24_000)]).astype(np.float32)
    assert trim_silence(audio, 24_000).size == 2_400 + 2 * 1_200


class _CountingTTS:
    name = "counting:v1"
    assistant_voice = "z"

    def __init__(self) -> None:
        self.calls = 0

    def voices(self) -> list[str]:
        return ["x", "y"]

    def synthesize(self, text: str, voice: str) -> np.ndarray:
        self.calls += 1
        rng = np.random.default_rng(len(text))
        return rng.standard_normal(1000).astype(np.float32) * 0.1


def test_cached_tts_round_trip(tmp_path: Path) -> None:
    inner = _CountingTTS()
    cached = CachedTTS(inner, tmp_path)
    assert isinstance(cached, TTSBackend)
    assert cached.name == inner.name and cached.voices() == ["x", "y"] and cached.assistant_voice == "z"
    first = cached.synthesize("hello", "x")
    assert cached.synthesize("hello", "x").tobytes() == first.tobytes()
    assert inner.calls == 1  # memo
    assert len(list(tmp_path.rglob("*.npy"))) == 1

    other_inner = _CountingTTS()
    reread = CachedTTS(other_inner, tmp_path).synthesize("hello", "x")
    assert other_inner.calls == 0 and reread.dtype == np.float32
    assert reread.tobytes() == first.tobytes() == inner.synthesize("hello", "x").tobytes()
    CachedTTS(other_inner, tmp_path).synthesize("hello", "y")
    assert other_inner.calls == 1


def test_cached_piper_is_lossless(tmp_path: Path, piper: PiperTTS, bank_audio: dict[str, np.ndarray]) -> None:
    voice = piper.voices()[0]
    assert CachedTTS(piper, tmp_path).synthesize(TEXT, voice).tobytes() == bank_audio[voice].tobytes()
    assert CachedTTS(piper, tmp_path).synthesize(TEXT, voice).tobytes() == bank_audio[voice].tobytes()
