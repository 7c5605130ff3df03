"""Hand-built M3-DuplexBench episodes for scoring tests: rec.json gold written here (DESIGN.md "rec.json gold"),
exact event times, chosen model channels.

A folder written here looks like one `duplex-eval run` wrote for an m3 config: `{case_id}.wav` (ch0 user, ch1
model, 24 kHz) beside `{case_id}.rec.json`. `PlantedVAD` reads speech spans back exactly from a model channel made
of constant-level bursts placed on whole milliseconds (`bursts`), so a scorer's timing can be checked to the
millisecond through the whole file path; the real Silero VAD is used with real speech elsewhere.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from dataset_builder.audio import SESSION_SR, write_wav
from dataset_builder.episode import Episode, TimelineEvent
from dataset_builder.m3.dialogues import Dialogue, DialogueUtterance
from metrics.spans import Span
from metrics.vad import VADParams

WINDOW_S = 10.0


def case_id(event_type: str, n: int, lang: str = "en", domain: str = "task", condition: str = "user",
            dialogue: int = 1) -> str:
    return f"{lang}-{domain}-d{dialogue:03d}-e{n:02d}-{condition}"


def gold(event_type: str, *, s: float, t: float, b: float | None = None, lang: str = "en", domain: str = "task",
         condition: str = "user", event_n: int = 1, dialogue: int = 1, context: list[list[Any]] | None = None,
         question: str = "", gold_answer: str = "", gold_aliases: tuple[str, ...] = (),
         lead_silence_s: float = 0.0) -> dict[str, Any]:
    """A rec.json gold on the stream clock: b defaults to s - 3 s for SHIFT / PAUSE and to s for BC / BARGE_IN."""
    if b is None:
        b = s if event_type in ("BC", "BARGE_IN") else max(0.0, s - 3.0)
    dialogue_id = f"{lang}-{domain}-d{dialogue:03d}"
    return {"event_id": f"{dialogue_id}-e{event_n:02d}", "dialogue_id": dialogue_id, "event_type": event_type,
            "language": lang, "domain": domain, "condition": condition, "context_start_s": 0.0,
            "prompt_start_s": b, "event_start_s": s, "event_end_s": t, "window_end_s": round(s + WINDOW_S, 3),
            "forced_end_s": s if condition == "full" else 0.0, "lead_silence_s": lead_silence_s,
            "question": question or ("What year did it open?" if event_type == "SHIFT" else ""),
            "reply": "It opened in 1905." if event_type == "SHIFT" else "", "gold_answer": gold_answer,
            "gold_aliases": list(gold_aliases), "context_dependent": False,
            "context": context if context is not None else [["user", "Tell me about the old bridge.", max(0.0, b), s]]}


def episode(cid: str, g: dict[str, Any], duration_s: float, *, status: str = "ok", failure: str | None = None,
            capabilities: tuple[str, ...] = ()) -> Episode:
    return Episode(case_id=cid, benchmark="m3", condition=g["condition"], pair_id=g["event_id"], status=status,
                   adapter={"name": "handmade", "capabilities": list(capabilities)}, params={}, seed=0,
                   timeline=[TimelineEvent("P", "PRE", g["prompt_start_s"], g["event_start_s"])],
                   duration_s=duration_s, gold=g, failure=failure)


def write(out: Path, cid: str, g: dict[str, Any], model: np.ndarray, *, user: np.ndarray | None = None,
          status: str = "ok", failure: str | None = None) -> Episode:
    out.mkdir(parents=True, exist_ok=True)
    duration = model.size / SESSION_SR
    ep = episode(cid, g, round(duration, 3), status=status, failure=failure)
    if status == "ok":
        user = np.zeros_like(model) if user is None else user
        write_wav(out / f"{cid}.wav", np.stack([user, model], axis=1))
    ep.save(out / f"{cid}.rec.json")
    return ep


def silence(seconds: float) -> np.ndarray:
    return np.zeros(int(round(seconds * SESSION_SR)), np.float32)


def bursts(duration_s: float, spans: list[tuple[float, float]], level: float = 0.25) -> np.ndarray:
    """A channel with a square wave of `level` inside each span (whole milliseconds) and digital silence elsewhere
    (a square wave, not a held value, so run health does not call it a stuck output)."""
    x = silence(duration_s)
    sign = np.where(np.arange(x.size) % 2 == 0, level, -level).astype(np.float32)
    for a, b in spans:
        lo, hi = int(round(a * 1000)) * 24, int(round(b * 1000)) * 24
        x[lo:hi] = sign[lo:hi]
    return x


def place(x: np.ndarray, audio: np.ndarray, at_s: float, until_s: float | None = None) -> np.ndarray:
    a = int(round(at_s * SESSION_SR))
    clip = audio if until_s is None else audio[: max(0, int(round((until_s - at_s) * SESSION_SR)))]
    x[a:a + clip.size] += clip[: x.size - a]
    return x


@dataclass
class PlantedVAD:
    """Spans = the runs of non-zero samples, to the millisecond (for channels made by `bursts`)."""

    params: VADParams = VADParams()

    def spans(self, x: np.ndarray, sr: int) -> list[Span]:
        on = np.concatenate([[False], np.abs(np.asarray(x)) > 0, [False]])
        edges = np.flatnonzero(on[1:] != on[:-1])
        return [Span(round(a / sr, 3), round(b / sr, 3)) for a, b in zip(edges[0::2], edges[1::2], strict=True)]


def planted(params: VADParams) -> PlantedVAD:
    return PlantedVAD(params)


def task_dialogue(language: str, lines: list[tuple[str, str, str]], fact: str) -> Dialogue:
    """A hand-written M3 task dialogue of `(speaker, text, gold answer)` lines, for the dialogue checks' known
    answers: every line a TURN taking the floor, a system line with a gold answer answering `fact`."""
    did = f"{language}-task-d000"
    utts = tuple(DialogueUtterance(f"{did}-u{i:02d}", who, "turn", text, "first" if i == 0 else "shift",
                                   topic="t", fact=fact if gold else "", gold_answer=gold)
                 for i, (who, text, gold) in enumerate(lines))
    return Dialogue(did, language, "task", 0, 1, ("t",), utts)
