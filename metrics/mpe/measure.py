"""Continuous measurements for every scored window of one Duplex-MPE episode.

Nothing here applies a threshold: a measurement keeps onset latencies, active flags, speech seconds,
transcripts and judge labels, so `verdicts.py` can re-decide under other thresholds without VAD or ASR.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from dataset_builder.atomic import round_ms
from dataset_builder.episode import Episode
from dataset_builder.schema import SILENT_LABELS
from metrics.health import text_from
from metrics.scoring import spans_audio
from metrics.spans import Span, active_at, onsets_in, speech_in


class Transcriber(Protocol):
    def __call__(self, spans: list[Span], window: tuple[float, float]) -> str:
        """The text of the model speech in `spans`, heard as scored window `window` (the ASR's padding stays in it)."""
        ...


class AnswerJudge(Protocol):
    def judge_answer(self, question: str, gold: str, aliases: list[str], response: str) -> Any: ...

    def classify_ack(self, transcript: str) -> Any: ...


def _spans_json(spans: list[Span]) -> list[list[float]]:
    return [[round_ms(s.start_s), round_ms(s.end_s)] for s in spans]


def _seconds(spans: list[Span]) -> float:
    return round_ms(sum(s.duration_s for s in spans))


def overlapping(spans: list[Span], a: float, b: float) -> list[Span]:
    return [s for s in spans if s.start_s < b and s.end_s > a]


def window_kind(label: str, next_label: str | None) -> str | None:
    """The scored window a turn opens, or None: every T ("T"), every N1/N2/N3 turn ("silence"), every N4Q whose
    next turn is its N4R ("N4"). One rule for measured episodes and for the windows of failed ones."""
    if label == "T":
        return "T"
    if label in SILENT_LABELS:
        return "silence"
    if label == "N4Q" and next_label == "N4R":
        return "N4"
    return None


def measure_episode(ep: Episode, spans: list[Span], transcribe: Transcriber, judge: AnswerJudge
                    ) -> list[dict[str, Any]]:
    """One record per scored window: every T, every N1/N2/N3 turn, every N4Q/N4R event."""
    events = [e for e in ep.timeline if e.turn_id != "preamble"]
    labels: dict[str, str] = ep.gold["labels"]
    base = {"case_id": ep.case_id, "pair_id": ep.pair_id, "condition": ep.condition}
    records: list[dict[str, Any]] = []
    for i, ev in enumerate(events):
        label = labels.get(ev.turn_id, ev.label)
        next_start = events[i + 1].start_s if i + 1 < len(events) else ep.duration_s
        kind = window_kind(label, labels.get(events[i + 1].turn_id) if i + 1 < len(events) else None)
        if kind == "T":
            active = active_at(spans, ev.end_s)
            later = [s for s in onsets_in(spans, ev.end_s, next_start) if s is not active]
            response = overlapping(spans, ev.end_s, next_start)
            transcript = transcribe(response, (ev.end_s, next_start)) if response else ""
            verdict = judge.judge_answer(ep.gold["question"], ep.gold["gold_answer"],
                                         list(ep.gold.get("gold_aliases", [])), transcript)
            rec = base | {
                "kind": "T", "label": "T", "turn_id": ev.turn_id, "t_end_s": ev.end_s,
                "next_start_s": next_start, "active_at_end": active is not None,
                "onset_latency_s": round_ms(later[0].start_s - ev.end_s) if later else None,
                "response_spans": _spans_json(response), "transcript": transcript,
                "transcribed_s": _seconds(response), "answer_verdict": verdict.label if response else None,
            }
            if response and ep.model_text:  # what the model's text stream says it answered (run health compares)
                said = ep.said(text_from(spans, response[0].start_s, ev.start_s), next_start)
                rec |= {"model_text": said, "text_verdict": judge.judge_answer(
                    ep.gold["question"], ep.gold["gold_answer"], list(ep.gold.get("gold_aliases", [])), said).label}
            records.append(rec)
        elif kind == "silence":
            inside = overlapping(spans, ev.start_s, next_start)
            speech = speech_in(spans, ev.start_s, next_start)
            transcript = transcribe(inside, (ev.start_s, next_start)) if inside else ""
            records.append(base | {
                "kind": "silence", "label": label, "turn_id": ev.turn_id, "window": [ev.start_s, next_start],
                "speech_s": round_ms(speech), "spans": _spans_json(inside), "transcript": transcript,
                "transcribed_s": _seconds(inside),
                "ack_verdict": judge.classify_ack(transcript).label if inside else None,
            })
        elif kind == "N4":
            r = events[i + 1]
            active = active_at(spans, r.start_s)
            new = [s for s in onsets_in(spans, r.start_s, r.end_s) if s is not active]
            spoken = overlapping(spans, ev.end_s, r.end_s)  # its answer, and whatever it went on saying into R
            records.append(base | {
                "kind": "N4", "label": "N4", "turn_id": ev.turn_id, "q_end_s": ev.end_s,
                "r_start_s": r.start_s, "r_end_s": r.end_s,
                "window_speech_s": round_ms(speech_in(spans, ev.end_s, r.start_s)),
                "active_at_r_start": active is not None,
                "stop_latency_s": round_ms(active.end_s - r.start_s) if active else None,
                "new_onsets_in_r": len(new),
                "transcript": transcribe(spoken, (ev.end_s, r.end_s)) if spoken else "",
                "transcribed_s": _seconds(spoken),
            })
    return records


def sound_window(m: dict[str, Any]) -> tuple[float, float]:
    """The stretch of the recording a window's verdicts look at: T end -> next turn, an N1-N3 turn -> next
    turn, N4Q end -> N4R end (run health measures the sound there)."""
    if m["kind"] == "T":
        return m["t_end_s"], m["next_start_s"]
    if m["kind"] == "silence":
        return m["window"][0], m["window"][1]
    return m["q_end_s"], m["r_end_s"]


def failed_windows(case_id: str, pair_id: str, condition: str, labels: dict[str, str], reason: str
                   ) -> list[dict[str, Any]]:
    """The windows a failed episode would have entered, from its gold labels (turn id -> label, in order),
    each marked failed: every T, every N1/N2/N3 turn, every N4Q followed by N4R. `verdicts.outcomes` counts each
    as a failure in every metric of its window."""
    base = {"case_id": case_id, "pair_id": pair_id, "condition": condition, "failed": True, "reason": reason}
    order = list(labels.items())
    out: list[dict[str, Any]] = []
    for i, (turn_id, label) in enumerate(order):
        kind = window_kind(label, order[i + 1][1] if i + 1 < len(order) else None)
        if kind is not None:
            out.append(base | {"kind": kind, "label": label if kind == "silence" else kind, "turn_id": turn_id})
    return out


def span_audio(audio: np.ndarray, sr: int, spans: list[Span]) -> np.ndarray:
    """The model speech of these spans joined end to end, unpadded (the ASR hears `metrics.scoring.asr_audio`)."""
    return spans_audio(audio, sr, spans)
