"""Hand-built Duplex-MPE episodes for scoring tests: exact timelines, chosen model channels, planted faults.

A folder written here looks like one `duplex-eval run` wrote: `{case_id}.wav` (ch0 user, ch1 model, 24 kHz
PCM16) beside `{case_id}.rec.json`, and optionally a `run.json` naming a dataset.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from dataset_builder.audio import SESSION_SR, write_wav
from dataset_builder.benchmark_params import MPEProtocol
from dataset_builder.episode import Episode, TimelineEvent

# N3, T, N1, N4Q -> N4R, N2: one window of every kind; the N1 window [12, 24) is long enough to hide 8 s of tone.
LABELS = {"t00": "N3", "t01": "T", "t02": "N1", "t03": "N4Q", "t04": "N4R", "t05": "N2"}
TIMES = {"preamble": (0.0, 3.0), "t00": (4.0, 6.0), "t01": (7.0, 9.0), "t02": (12.0, 14.0),
         "t03": (24.0, 26.0), "t04": (29.0, 31.0), "t05": (34.0, 36.0)}
DURATION = 40.0
GOLD = {"question": "How much does each person owe?", "gold_answer": "21", "gold_aliases": ["21 dollars"],
        "task_type": "split_bill", "t_position": "early", "labels": LABELS}
# Windows per episode: 1 T, 3 silence (N3, N1, N2), 1 N4.
N_T, N_SILENCE, N_N4 = 1, 3, 1


class NoASR:
    """For recordings without model speech: nothing may need transcribing."""

    name = "none"

    def transcribe(self, audio: Any, sr: int) -> str:
        raise AssertionError("no model speech was expected")


class DeafASR:
    """An ASR that hears no words in anything (a wrong language model, a broken decoder)."""

    name = "deaf"

    def transcribe(self, audio: Any, sr: int) -> str:
        return ""


def silence(seconds: float = DURATION) -> np.ndarray:
    return np.zeros(int(round(seconds * SESSION_SR)), np.float32)


def place(model: np.ndarray, audio: np.ndarray, start_s: float) -> np.ndarray:
    a = int(start_s * SESSION_SR)
    model[a:a + len(audio)] += audio[: len(model) - a]
    return model


def tone(seconds: float, freq: float = 440.0, amp: float = 0.3) -> np.ndarray:
    t = np.arange(int(seconds * SESSION_SR)) / SESSION_SR
    return (amp * np.sin(2 * np.pi * freq * t)).astype(np.float32)


def episode(case_id: str, pair: str = "p0", cond: str = "explicit", *, status: str = "ok",
            failure: str | None = None, gold: dict[str, Any] | None = None, protocol: MPEProtocol | None = None,
            duration_s: float = DURATION) -> Episode:
    return Episode(
        case_id=case_id, benchmark="mpe", condition=cond, pair_id=pair, status=status, failure=failure,
        adapter={"name": "handmade"},
        params={"protocol": (protocol or MPEProtocol()).to_dict(), "vad": {"min_speech_ms": 250, "merge_gap_ms": 300}},
        seed=0, timeline=[TimelineEvent(k, LABELS.get(k, "PRE"), a, b) for k, (a, b) in TIMES.items()],
        duration_s=duration_s, gold=GOLD if gold is None else gold)


def write_episode(out: Path, case_id: str, pair: str = "p0", cond: str = "explicit", *,
                  model: np.ndarray | None = None, **kwargs: Any) -> Episode:
    """A 2-channel recording (silent user channel; the scorer takes the user's speech from the timeline) and its
    rec.json."""
    out.mkdir(parents=True, exist_ok=True)
    ep = episode(case_id, pair, cond, **kwargs)
    model = silence(ep.duration_s) if model is None else model
    write_wav(out / f"{case_id}.wav", np.stack([np.zeros_like(model), model], axis=1))
    ep.save(out / f"{case_id}.rec.json")
    return ep


def write_run_json(out: Path, dataset: Path | str, n_cases: int, fingerprint: str = "f" * 64) -> None:
    (out / "run.json").write_text(json.dumps({
        "identity": {"dataset": str(dataset), "config": "mpe", "adapter": "handmade", "adapter_args": {},
                     "params": [], "seed": 0},
        "benchmark": "mpe", "config": "mpe", "dataset_fingerprint": fingerprint, "n_dataset_cases": n_cases}))


def kn(block: dict[str, Any]) -> tuple[int, int]:
    return block["k"], block["n"]
