"""M3-DuplexBench scores for a run folder: measure every episode, then apply a rule set and aggregate
(docs/benchmarks/m3.md).

    RUN_DIR/measurements.jsonl   one record per episode (metrics/m3/measure.py: raw VAD spans of the model channel,
                                 what each named rule set reads, ASR word counts, the SHIFT response and its
                                 content judgements); a failed episode is a record marked "failed", counted
                                 against the model
    RUN_DIR/health.json          per-episode run-health numbers of the model channel (metrics/health.py)
    RUN_DIR/scores.json          {"benchmark": "m3", "rules": ..., "scores": {"<lang>_<domain>_<condition>":
                                 {"shift_tor", "shift_latency", "pause_tor", "pause_latency", "bc_stop_latency",
                                 "barge_in_stop_latency", "relevance", "consistency", "qa_accuracy"}},
                                 "representative": {"<lang>_<domain>": {...}}, "skipped": ..., ...} under the paper's
                                 rules; `--param rules=authors` (or any rule parameter, metrics/m3/rules.py) writes
                                 scores-NAME=VALUE.json instead (metrics/freshness.py)

VAD: Silero at 16 kHz on the model channel with the parameters the episode recorded (rec.json `params.vad`: the M3
protocol's vad_* fields), else `measure.VAD_M3`; every measurement records the ones used. Skipped episodes
(status "skipped": Full cases of adapters without teacher forcing) are counted with their reason in "skipped" and
never scored; failed ones count against the model. Judge calls are cached on disk (the CLI's judge-cache), so a
rescore resumes; `--reuse` re-applies rules to the stored measurements without VAD, ASR or judge.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import fields
from pathlib import Path
from typing import Any

import numpy as np

from dataset_builder.atomic import round_ms
from dataset_builder.m3.schema import BENCHMARK, CONDITIONS
from dataset_builder.progress import Progress
from metrics import scoring
from metrics.episodes import Failure, RunFolder, skipped_summary
from metrics.health import SoundProfile, episode_stats, text_from, window_sound
from metrics.judges import HeuristicJudge, chat_judge
from metrics.m3 import content as C
from metrics.m3.aggregate import aggregate
from metrics.m3.measure import (
    VAD_M3,
    failed_record,
    gold_problem,
    group_of,
    identity_from_case_id,
    measure_episode,
)
from metrics.m3.rules import RULE_SETS, Rules, rules_from, segment_key, segments, visible
from metrics.m3.rules import EventTimes as Times
from metrics.m3.words import word_count
from metrics.scoring import ASR_PAD_S, LazyASR, asr_audio, lazy_spans, reused_inputs
from metrics.spans import Span, speech_in
from metrics.vad import SileroVAD, VADParams

SR = 24_000
WORDS_MAX_S = 2.0  # word counts are taken of model segments shorter than this overlapping a PAUSE (bc_max_s <= it)
BASE_KEYS = ("adapter", "adapter_info", "asr", "asr_pad_s", "judge", "content_notes", "failed_episodes",
             "failed_uncounted")


def vad_params(recorded: Any) -> VADParams:
    """The VAD the episode recorded (rec.json `params.vad`, the M3 protocol's), else `measure.VAD_M3`."""
    if not isinstance(recorded, dict) or not recorded:
        return VAD_M3
    known = {f.name for f in fields(VADParams)}
    return VADParams(**{k: v for k, v in recorded.items() if k in known})


def _words(m: dict[str, Any], model: np.ndarray, spans: list[Span], asr: LazyASR,
           user_spans: Callable[[], list[Span]]) -> None:
    """Word counts (metrics/m3/words.py) of the short model segments overlapping a PAUSE, under each named rule
    set's segmentation and view (the authors' backchannel filter reads them; rules.py), and the transcripts they
    count, which the export writes. The ASR hears a segment's speech padded into the silence around it, never into
    the model's speech outside the segment or the user's (`asr_audio`)."""
    ev = Times.of(m)
    wanted: dict[str, tuple[int, int]] = {}
    for rules in RULE_SETS.values():
        for seg in visible(segments(m["vad_spans"], rules), ev, rules):
            if seg[1] > ev.s and seg[0] < ev.t and seg[1] - seg[0] < int(WORDS_MAX_S * 1000):
                wanted[segment_key(seg, rules, ev)] = seg
    if not wanted:
        return
    problem = C.language_problem(asr.get(), m["language"])
    if problem:
        m["words_status"] = problem
        return
    transcribe = C.transcriber(asr.get(), m["language"])
    m["words"], m["words_text"] = {}, {}
    for key, (a, b) in sorted(wanted.items()):
        audio = asr_audio(model, SR, spans, (0.0, model.size / SR), user_spans(), lo=a / 1000, hi=b / 1000)
        text = transcribe(audio, SR)
        m["words"][key] = word_count(text, m["language"])
        m["words_text"][key] = text  # the export writes these words as the segment's chunks (export.py)
    m["words_status"] = f"asr:{asr.name}"


def _response(m: dict[str, Any], model: np.ndarray, spans: list[Span], asr: LazyASR, llm: Any,
              heuristic: Any, user_spans: Callable[[], list[Span]], said: Callable[[float, float], str] | None
              ) -> None:
    """A SHIFT's response (model speech from the paper's takeover onset to the window end), its transcript and
    its content judgements (metrics/m3/content.py)."""
    timing = m["timing"]["paper"]
    onset = timing["earliest"][0] if timing["earliest"] else None
    w_end = timing["window"][1]
    heard = [s for s in spans if onset is not None and s.end_s > onset and s.start_s < w_end]
    m["response"] = {"onset_s": onset, "window_end_s": w_end, "text": "", "source": None}
    if not heard:
        m["content"] = C.judge_content(m, "", m["language"], llm, heuristic)
        return
    problem = C.language_problem(asr.get(), m["language"])
    if problem:
        m["response"]["source"] = problem
        m["content"] = {k: {"status": "not computed", "score": None, "reason": problem} for k in C.KEYS
                        if k != "qa_accuracy" or m.get("gold_answer")}
        return
    fences = [*user_spans(), *(s for s in spans if s not in heard)]
    audio = asr_audio(model, SR, heard, (onset, w_end), fences, lo=onset, hi=w_end)
    text = C.transcriber(asr.get(), m["language"])(audio, SR)
    m["response"] |= {"text": text, "source": f"asr:{asr.name}"}
    m["transcript"], m["transcribed_s"] = text, round_ms(speech_in(heard, onset, w_end))  # run health reads these
    if said is not None:  # what the model's own text stream says it answered (run health compares)
        m["model_text"] = said(text_from(spans, onset, timing["window"][0]), w_end)
    m["content"] = C.judge_content(m, text, m["language"], llm, heuristic)


def measure_run(folder: RunFolder, asr: LazyASR, llm: Any, heuristic: Any,
                vad_factory: Callable[[VADParams], Any], progress: bool = False
                ) -> tuple[list[dict[str, Any]], dict[str, dict[str, float]]]:
    """Measurements and health numbers of every usable episode; one that turns out unusable moves to
    `folder.failures` with its reason and the rest go on."""
    measurements: list[dict[str, Any]] = []
    stats: dict[str, dict[str, float]] = {}
    bar = Progress(f"score {folder.run_dir.name}", len(folder.ok), enabled=progress)
    for ep in list(folder.ok):
        bar.advance(note=ep.case_id)
        audio = folder.usable_recording(ep, gold_problem(ep.gold, ep.duration_s))
        if audio is None:
            continue
        vad = vad_factory(vad_params(ep.params.get("vad")))
        model = audio[:, 1]
        spans = vad.spans(model, SR)
        profile = SoundProfile(model, SR)
        stats[ep.case_id] = episode_stats(model, SR, spans, profile)
        m = measure_episode(ep.case_id, ep.gold, ep.duration_s, spans, vad.params.to_dict())
        m["sound"] = window_sound(profile, spans, m["event_start_s"], m["window_end_s"])
        user_spans = lazy_spans(vad, audio[:, 0], SR)  # the ASR's padding stays out of the user's speech
        if m["event_type"] == "PAUSE":
            _words(m, model, spans, asr, user_spans)
        elif m["event_type"] == "SHIFT":
            _response(m, model, spans, asr, llm, heuristic, user_spans, ep.said if ep.model_text else None)
        measurements.append(m)
    return measurements, stats


def _gold_of_case(case: Any) -> dict[str, Any] | None:
    """The gold of a dataset case (an M3Case) on its clip clock: enough to count a failed episode."""
    event, condition = getattr(case, "event", None), getattr(case, "condition", None)
    if event is None or condition is None:
        return None
    s = event.event_start_s
    context = [[u.speaker, u.text, u.start_s, u.end_s] for u in event.utterances if u.start_s < s]
    return {"event_id": event.event_id, "dialogue_id": event.dialogue_id, "event_type": event.event_type,
            "language": event.language, "domain": event.domain, "condition": condition, "event_start_s": s,
            "event_end_s": event.event_end_s, "gold_answer": event.gold_answer, "context": context}


def windows_of_failure(f: Failure, cases: dict[str, Any]) -> tuple[list[dict[str, Any]], str] | None:
    """The one scored episode of a failure, marked failed, and where its gold came from (rec.json, else the
    run's dataset); None when neither has it."""
    gold = f.episode.gold if f.episode is not None and isinstance(f.episode.gold, dict) else {}
    if all(k in gold for k in ("event_type", "language", "domain", "condition")):
        return [failed_record(f.case_id, gold, f.reason) | {"gold_answer": gold.get("gold_answer", "")}], "rec.json"
    found = _gold_of_case(cases[f.case_id]) if f.case_id in cases else None
    if found is None:
        return None
    return [failed_record(f.case_id, found, f.reason) | {"gold_answer": found["gold_answer"]}], "dataset"


def skipped_block(folder: RunFolder) -> dict[str, Any]:
    """Skipped episodes, never scored (metrics/episodes.py), with how many fall in each group."""
    groups: Counter[str] = Counter()
    for f in folder.skipped:
        gold = f.episode.gold if f.episode is not None and isinstance(f.episode.gold, dict) else {}
        ident = ({k: gold[k] for k in ("language", "domain", "condition")}
                 if all(k in gold for k in ("language", "domain", "condition")) else identity_from_case_id(f.case_id))
        groups[group_of(ident) if ident else "unknown"] += 1
    return skipped_summary(folder) | {"by_group": dict(sorted(groups.items()))}


def _content_notes(measurements: list[dict[str, Any]]) -> list[str]:
    """One line per distinct reason a content score or word count was not computed."""
    notes: Counter[str] = Counter()
    for m in measurements:
        for j in (m.get("content") or {}).values():
            if j.get("status") == "not computed":
                notes[f"{m['language']}: {j['reason']}"] += 1
        if str(m.get("words_status", "")).startswith("not"):
            notes[f"{m['language']}: PAUSE word counts {m['words_status']} (authors' backchannel filter not "
                  "applied)"] += 1
    return [f"{note} [{n}]" for note, n in sorted(notes.items())]


def score_run(run_dir: Path, *, asr: Any = None, judge: Any = None, overrides: dict[str, Any] | None = None,
              reuse_measurements: bool = False, progress: bool = False,
              vad_factory: Callable[[VADParams], Any] = SileroVAD) -> dict[str, Any]:
    """Score a run folder; with `reuse_measurements`, only re-apply rules to measurements.jsonl.

    `overrides`: `rules` ("paper", the default, or "authors") and any rule parameter of `metrics.m3.rules.Rules`;
    scores under them go to their own file, named in the result's "scores_file". `judge`: relevance and
    consistency need a served LLM judge; QA accuracy falls back to the heuristic judge (labelled so).
    """
    run_dir = Path(run_dir)
    folder = scoring.scored_folder(run_dir, BENCHMARK, reuse_measurements)
    rules, applied = rules_from(overrides)
    if reuse_measurements:
        base, measurements, stats = reused_inputs(run_dir, BASE_KEYS)
    else:
        lazy, llm = LazyASR(asr), chat_judge(judge)
        heuristic = judge if judge is not None and getattr(judge, "heuristic", False) else HeuristicJudge()
        base, measurements, stats = scoring.measure_and_store(
            run_dir, folder, lambda: measure_run(folder, lazy, llm, heuristic, vad_factory, progress=progress),
            windows_of_failure)
        base |= {"asr": lazy.described(), "asr_pad_s": ASR_PAD_S,
                 "judge": {"name": llm.name if llm else heuristic.name, "heuristic": llm is None,
                           "llm": llm is not None,
                           "content": ("relevance, consistency and QA accuracy by " + llm.name) if llm else
                           (f"QA accuracy by {heuristic.name} (heuristic); relevance and consistency "
                            f"{C.NOT_COMPUTED}")},
                 "content_notes": _content_notes(measurements)}

    def result_for(r: Rules, over: dict[str, Any]) -> dict[str, Any]:
        return {
            **scoring.scores_head(BENCHMARK, base),
            "rules": r.to_dict(),
            "thresholds": {"rules": r.name},
            **scoring.scores_file(run_dir, over),
            "conditions": list(CONDITIONS),
            **scoring.failure_counts(folder, base),
            "skipped": skipped_block(folder),
            "content_notes": base["content_notes"],
            **scoring.health_block(folder, base, measurements, stats, with_skipped=True),
            **aggregate(measurements, r),
            **scoring.digests_block(folder, base),
        }

    return scoring.write_scores(run_dir, result_for, rules, applied, RULE_SETS["paper"], fresh=not reuse_measurements)
