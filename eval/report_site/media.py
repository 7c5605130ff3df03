"""What an episode page plays and draws: the 2-channel recording as Ogg Opus the browser plays from disk, and
both channels' envelopes for the timeline figure (drawn by assets/report.js: a figure costs ~2 KB of page
instead of a ~55 KB PNG, and shows the playhead).

Recordings are keyed by the SHA-256 of their bytes: identical recordings (a silent model on the same user audio,
an agent that acts the same at every instruction level) share one file, and a file already encoded from the same
bytes at the same bitrate is reused by the next report (`media/index.json`). Encoding is the slow part, so the
distinct recordings are encoded in a small process pool. The encoder is libopus through PyAV (which
faster-whisper already needs): measured on 7 minutes of demo recordings at 12 kbps, 0.55 s of CPU per minute of
audio against 2.1 s through libsndfile's Opus writer, at the same complexity (10, the best) and size; it now
encodes at complexity 2 (OPUS_COMPLEXITY).
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import av
import numpy as np
import soundfile as sf
import soxr

from dataset_builder.atomic import atomic_write_text
from dataset_builder.progress import Progress

MAX_COLUMNS = 1000  # envelope values per channel and episode: about one per pixel of a wide figure
MIN_HOP_S = 0.02
DEFAULT_KBPS = 12.0  # stereo Opus: both voices intelligible; ~80 KB a minute (docs/report.md: the report's size)
# Played back at 16 kHz (wideband speech, what ASR models hear): on 4 demo episodes at 12 kbps, 80 KB per minute
# against 93 KB at 24 kHz, and less CPU.
AUDIO_SR = 16_000
# libopus complexity (0-10): encoding is most of a cold report's CPU. On a 73 s demo episode at 12 kbps, 2 costs
# 0.43 s of CPU against 0.99 s at 10, with the same log-spectral distance to the 16 kHz source on both channels
# (37.2/46.9 dB against 37.1/46.9); 0 costs 0.18 s but is 4 dB further (docs/report.md: speed).
OPUS_COMPLEXITY = 2
# One envelope value per character: 6 bits, sqrt-companded so quiet speech still shows (report.js squares it).
ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
_LETTERS = np.frombuffer(ALPHABET.encode("ascii"), np.uint8)


def write_opus(path: str | Path, x: np.ndarray, sr: int, kbps: float) -> None:
    """Ogg Opus of `x` (samples x channels, float32, at `sr` Hz: 8, 12, 16, 24 or 48 kHz) at about `kbps`."""
    layout = {1: "mono", 2: "stereo"}.get(x.shape[1])
    if layout is None:
        raise ValueError(f"Opus here takes 1 or 2 channels, got {x.shape[1]}")
    with av.open(str(path), "w", format="ogg") as container:
        stream = container.add_stream("libopus", rate=sr, layout=layout)
        stream.bit_rate = int(kbps * 1000)
        stream.codec_context.options = {"compression_level": str(OPUS_COMPLEXITY), "application": "voip"}
        frame = av.AudioFrame.from_ndarray(np.ascontiguousarray(x.T, np.float32), format="fltp", layout=layout)
        frame.sample_rate = sr
        for packet in [*stream.encode(frame), *stream.encode(None)]:
            container.mux(packet)


def envelope(x: np.ndarray, sr: int) -> tuple[list[str], float]:
    """Per channel, the peak |x| of each hop as one ALPHABET character (sqrt scale, 63 = full scale); the hop.
    The peak is max(max, -min) of each hop, reduced channel by channel over contiguous memory (40 times faster
    than over the interleaved samples)."""
    x = x.reshape(len(x), -1)
    hop_s = max(MIN_HOP_S, len(x) / sr / MAX_COLUMNS)
    hop = max(1, int(round(hop_s * sr)))
    full = len(x) // hop * hop
    out = []
    for c in range(x.shape[1]):
        ch = np.ascontiguousarray(x[:, c])
        body = ch[:full].reshape(-1, hop)
        peaks = np.maximum(body.max(axis=1), -body.min(axis=1)) if full else np.zeros(0, ch.dtype)
        if full < len(ch):  # the last, partial hop
            peaks = np.append(peaks, max(ch[full:].max(), -ch[full:].min()))
        q = np.clip(np.round(np.sqrt(np.minimum(peaks, 1.0)) * 63), 0, 63).astype(np.intp)
        out.append(_LETTERS[q].tobytes().decode("ascii"))
    return out, hop / sr


def digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()[:24]


def _process(job: tuple[str, str | None, float]) -> dict[str, Any]:
    """Read one recording: its envelope, and its Opus file when asked for. Errors come back as text."""
    wav, audio_out, kbps = job
    try:
        x, sr = sf.read(wav, dtype="float32", always_2d=True)
    except (OSError, RuntimeError, ValueError) as err:
        return {"error": f"{Path(wav).name}: {err}"}
    if not len(x):
        return {"error": f"{Path(wav).name} holds no samples"}
    env, hop_s = envelope(x, sr)
    out: dict[str, Any] = {"env": env, "hop_s": round(hop_s, 6), "seconds": round(len(x) / sr, 3),
                           "channels": x.shape[1]}
    if audio_out:
        tmp = f"{audio_out}.{os.getpid()}.tmp"  # two workers may encode the same recording at once
        try:
            Path(audio_out).parent.mkdir(parents=True, exist_ok=True)
            y = soxr.resample(x, sr, AUDIO_SR) if sr > AUDIO_SR else x
            write_opus(tmp, y, min(sr, AUDIO_SR), kbps)
            os.replace(tmp, audio_out)
            out |= {"audio": Path(audio_out).name, "audio_bytes": os.path.getsize(audio_out), "kbps": kbps}
        except (OSError, RuntimeError, ValueError, TypeError, av.FFmpegError) as err:  # no libopus, a full disk
            Path(tmp).unlink(missing_ok=True)
            out["audio_error"] = f"not encoded ({err})"
    return out


class Media:
    """`media/`: one Opus file per distinct recording and `index.json` (what each was made from)."""

    def __init__(self, folder: Path, kbps: float) -> None:
        self.folder = folder
        self.kbps = kbps
        self.used: set[str] = set()
        try:
            self.index: dict[str, Any] = json.loads((folder / "index.json").read_text())
        except (OSError, json.JSONDecodeError):
            self.index = {}

    def _reusable(self, key: str, want_audio: bool) -> bool:
        e = self.index.get(key)
        if not e or "env" not in e:
            return False
        if not want_audio:
            return True
        return e.get("kbps") == self.kbps and bool(e.get("audio")) and (self.folder / e["audio"]).exists()

    def make(self, wavs: dict[Any, tuple[Path, bool]], workers: int | None = None, progress: bool = False
             ) -> dict[Any, dict[str, Any]]:
        """For each item (a wav, and whether it gets audio): its media entry ("env", "hop_s", "seconds", "audio"
        file name under media/, or "error" / "audio_error")."""
        keys: dict[Any, str] = {}
        out: dict[Any, dict[str, Any]] = {}
        todo: dict[str, tuple[str, str | None, float]] = {}
        for item, (wav, want_audio) in wavs.items():
            try:
                key = digest(wav)
            except OSError as err:
                out[item] = {"error": f"{wav.name}: {err}"}
                continue
            keys[item] = key
            self.used.add(key)
            if not self._reusable(key, want_audio) and (key not in todo or (want_audio and not todo[key][1])):
                todo[key] = (str(wav), str(self.folder / f"{key}.ogg") if want_audio else None, self.kbps)
        workers = workers or min(2, os.cpu_count() or 1)
        jobs = list(todo.items())
        bar = Progress("report audio", len(jobs), enabled=progress and bool(jobs))
        results = []
        args = [j for _, j in jobs]
        # spawn: a worker must not inherit a forked copy of the caller's torch/ONNX thread pools
        with (ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"))
              if workers > 1 and len(jobs) > 1 else nullcontext()) as pool:
            for res in pool.map(_process, args, chunksize=2) if pool else map(_process, args):
                results.append(res)
                bar.advance()
        for (key, _), res in zip(jobs, results, strict=True):
            if "error" in res:
                out.update({item: res for item, k in keys.items() if k == key})
            else:
                self.index[key] = res
        for item, key in keys.items():
            if item not in out:
                entry = dict(self.index[key])
                if not wavs[item][1]:
                    entry.pop("audio", None)
                out[item] = entry
        return out

    @staticmethod
    def merge(folder: Path, entries: dict[str, dict[str, Any]]) -> None:
        """Add entries made elsewhere (`site.encode_run_media` in a worker) to `folder`'s index. One writer at a
        time: the caller merges the workers' results in turn."""
        store = Media(folder, DEFAULT_KBPS)
        store.index.update(entries)
        folder.mkdir(parents=True, exist_ok=True)
        atomic_write_text(folder / "index.json", json.dumps(store.index))

    def save(self) -> None:
        """Keep the index entries and files of the recordings this report uses; remove the rest."""
        self.index = {k: v for k, v in self.index.items() if k in self.used}
        files = {v["audio"] for v in self.index.values() if v.get("audio")}
        if self.folder.exists():
            for p in self.folder.glob("*.ogg"):
                if p.name not in files:
                    p.unlink()
        self.folder.mkdir(parents=True, exist_ok=True)
        atomic_write_text(self.folder / "index.json", json.dumps(self.index))
