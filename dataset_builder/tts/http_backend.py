"""TTS through any server speaking the OpenAI `/v1/audio/speech` shape (served Qwen3-TTS, CosyVoice, OpenAI).

Stdlib urllib only. The constructor does no network I/O: a server is contacted on the first `synthesize`.

No pronunciation lexicon (`lexicon.json`) and no slower variant: the OpenAI speech API takes plain text and no
phonemes or rate, so "Aria" is said however the server says it, and the build's speech gate can only report a
turn it cannot hear right, not re-speak it.
"""

from __future__ import annotations

import json
import logging
import os
import time
import urllib.error
import urllib.request
from urllib.parse import urlsplit, urlunsplit

import numpy as np

from dataset_builder.audio import SESSION_SR, read_wav, resample
from dataset_builder.errors import UsageError
from dataset_builder.tts.spoken import SPOKEN_FORM_VERSION, spoken_form
from dataset_builder.tts.voices import peak_normalize, trim_silence

_LOG = logging.getLogger(__name__)

OPENAI_HUMAN_VOICES = ["alloy", "echo", "fable", "onyx", "nova", "shimmer"]
OPENAI_ASSISTANT_VOICE = "sage"


def speech_url(base_url: str) -> str:
    """`<base>/v1/audio/speech`, without doubling a `/v1` the base URL already ends in."""
    base = base_url.rstrip("/")
    if not base.endswith("/v1"):
        base += "/v1"
    return base + "/audio/speech"


def _redacted(url: str) -> str:
    # Keeps user:password@ that someone put in a URL out of names, logs and errors.
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = host + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


class HttpTTSError(RuntimeError):
    pass


class HttpTTS:
    """Remote TTS; WAV responses are downmixed, resampled to 24 kHz, edge-trimmed and peak-normalised.

    With custom `voices` and no `assistant_voice`, the last voice of the list is reserved for the assistant.
    Retries 5xx answers and connection errors `max_retries` times with exponential backoff.
    """

    def __init__(
        self,
        base_url: str | None = None,
        model: str = "tts-1",
        voices: list[str] | None = None,
        assistant_voice: str | None = None,
        api_key_env: str = "OPENAI_API_KEY",
        timeout_s: float = 60.0,
        max_retries: int = 3,
        backoff_s: float = 0.5,
    ) -> None:
        if not base_url:
            raise UsageError("--tts http needs --tts-arg base_url=http://HOST:PORT (a server speaking the OpenAI "
                             "/v1/audio/speech API; optional: --tts-arg model=NAME, default tts-1); an API key, "
                             f"if the server needs one, is read from the {api_key_env} environment variable")
        if urlsplit(base_url).scheme not in ("http", "https"):
            raise UsageError("--tts http: --tts-arg base_url must start with http:// or https://, "
                             "e.g. base_url=http://127.0.0.1:8000")
        if isinstance(voices, str):  # --tts-arg voices=a,b,c
            voices = [v.strip() for v in voices.split(",") if v.strip()]
        self.url = speech_url(base_url)
        self.model = model
        self.api_key_env = api_key_env
        self.timeout_s = float(timeout_s)
        self.max_retries = int(max_retries)
        self.backoff_s = float(backoff_s)
        if voices is None:
            human = list(OPENAI_HUMAN_VOICES)
            assistant = assistant_voice or OPENAI_ASSISTANT_VOICE
        elif assistant_voice is None:
            if len(voices) < 2:
                raise UsageError("--tts http: --tts-arg voices needs >= 2 voices (the last is reserved for the "
                                 "assistant), or pass --tts-arg assistant_voice=NAME too")
            human, assistant = list(voices[:-1]), voices[-1]
        else:
            human, assistant = list(voices), assistant_voice
        if assistant in human:
            raise UsageError(f"--tts http: assistant voice {assistant!r} must not be one of the human voices {human}")
        self._voices = human
        self.assistant_voice = assistant
        self.name = f"http:{model}@{_redacted(self.url)}+said={SPOKEN_FORM_VERSION}"

    def voices(self) -> list[str]:
        return list(self._voices)

    def _request(self, text: str, voice: str) -> urllib.request.Request:
        body = {"model": self.model, "input": text, "voice": voice, "response_format": "wav"}
        headers = {"Content-Type": "application/json", "Accept": "audio/wav"}
        key = os.environ.get(self.api_key_env) if self.api_key_env else None
        if key:
            headers["Authorization"] = f"Bearer {key}"
        return urllib.request.Request(
            self.url, data=json.dumps(body).encode("utf-8"), headers=headers, method="POST"
        )

    def _fetch(self, text: str, voice: str) -> bytes:
        shown = _redacted(self.url)
        for attempt in range(self.max_retries + 1):
            last = attempt == self.max_retries
            try:
                with urllib.request.urlopen(self._request(text, voice), timeout=self.timeout_s) as resp:
                    return resp.read()
            except urllib.error.HTTPError as exc:
                detail = exc.read()[:300].decode("utf-8", "replace")
                if exc.code < 500 or last:
                    raise HttpTTSError(
                        f"TTS request to {shown} failed: HTTP {exc.code} {exc.reason} "
                        f"(voice {voice!r}): {detail}"
                    ) from exc
                reason = f"HTTP {exc.code}"
            except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
                if last:
                    raise HttpTTSError(
                        f"TTS request to {shown} failed after {attempt + 1} attempts: {exc}"
                    ) from exc
                reason = str(exc)
            delay = self.backoff_s * 2**attempt
            _LOG.warning("TTS to %s failed (%s); retry %d in %.1fs", shown, reason, attempt + 1, delay)
            time.sleep(delay)
        raise AssertionError("unreachable")

    def synthesize(self, text: str, voice: str) -> np.ndarray:
        data = self._fetch(spoken_form(text), voice)
        try:
            audio, sr = read_wav(data)
        except Exception as exc:
            raise HttpTTSError(
                f"TTS response from {_redacted(self.url)} is not a readable WAV ({len(data)} bytes)"
            ) from exc
        if audio.ndim == 2:
            audio = audio.mean(axis=1)
        # Same edge and level conventions as the offline backends, so backends mix at comparable levels.
        audio = resample(audio.astype(np.float32), sr, SESSION_SR)
        return peak_normalize(trim_silence(audio, SESSION_SR))
