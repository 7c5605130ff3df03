"""DSB-IFEval scores for a run folder: measure every case, then verdicts, IAS, PAS (docs/benchmarks/ifeval.md,
docs/adding-a-benchmark.md).

    RUN_DIR/measurements.jsonl   one record per case (metrics/ifeval/measure.py; thresholds not applied; the judge's
                                 PAS/conflict judgement stored in it); a failed episode is a record marked "failed",
                                 counted as a failure
    RUN_DIR/health.json          per-episode run-health numbers of the model channel (metrics/health.py)
    RUN_DIR/scores.json          {"benchmark": "ifeval", "scores": {"ias"}, "by_level", "by_action", "by_role",
                                 "entailment_gap", "redundancy_gain", "role_tax", "matched_audio", "pas",
                                 "conflict_profile", "safety_override", ...}; `--param` overrides write
                                 scores-NAME=VALUE.json instead (metrics/freshness.py)

VAD: Silero at 16 kHz on both channels with the parameters the episode recorded (DSB-IFEval App. E.2, the
protocol's defaults: min speech 90 ms, min silence 90 ms, Silero's default 30 ms speech padding, spans merged within
0.3 s); scores.json's "vad" says which. READBACK reads the model's own text output when the adapter
gives one (capability "text_output" or any text in the record), else the ASR of its speech from w0 on; the
measurement records which.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields
from pathlib import Path
from typing import Any

from dataset_builder.benchmark_params import IFEvalProtocol
from dataset_builder.episode import Episode
from dataset_builder.ifeval.schema import BENCHMARK, ROLE_OVERRIDES, VERIFIER_DEFAULTS
from dataset_builder.progress import Progress
from metrics import scoring
from metrics.episodes import Failure, RunFolder
from metrics.health import SoundProfile, episode_stats, window_sound
from metrics.ifeval.aggregate import aggregate
from metrics.ifeval.judge import NOT_COMPUTED, judge_case, llm_judge
from metrics.ifeval.judge import aggregate_judge as judge_blocks
from metrics.ifeval.measure import ANCHOR, failed_record, gold_problem, measure_case
from metrics.ifeval.verdicts import THRESHOLD_LIMITS, Thresholds, checked_thresholds
from metrics.scoring import ASR_PAD_S, LazyASR, asr_audio, reused_inputs
from metrics.vad import VAD_PRESETS, SileroVAD, VADParams

SR = 24_000


def vad_params(recorded: Any) -> VADParams:
    """The VAD the episode recorded (its scheduler ran it), else the benchmark's preset (docs/benchmarks/ifeval.md)."""
    if not isinstance(recorded, dict) or not recorded:
        return VAD_PRESETS[BENCHMARK]
    known = {f.name for f in fields(VADParams)}
    # A record from before the span rules were recorded is scored under the paper's (App. E.2: the library's own).
    return VADParams(**({"rules": VAD_PRESETS[BENCHMARK].rules} | {k: v for k, v in recorded.items() if k in known}))


def t2_of(ep: Episode) -> tuple[float, float] | None:
    ev = ep.event(ANCHOR)
    return None if ev is None else (ev.start_s, ev.end_s)


def has_text_output(ep: Episode) -> bool:
    return "text_output" in (ep.adapter.get("capabilities") or []) or bool(ep.model_text)


def model_text(ep: Episode, from_s: float = 0.0) -> str:
    """The model's own text output from `from_s` on (`Episode.said`)."""
    return ep.said(from_s)


def measure_run(folder: RunFolder, asr: LazyASR, judge: Any, vad_factory: Callable[[VADParams], Any],
                progress: bool = False) -> tuple[list[dict[str, Any]], dict[str, dict[str, float]]]:
    """Measurements (and judgements) and health numbers of every usable episode; one that turns out unusable
    moves to `folder.failures` with its reason and the rest go on."""
    measurements: list[dict[str, Any]] = []
    stats: dict[str, dict[str, float]] = {}
    bar = Progress(f"score {folder.run_dir.name}", len(folder.ok), enabled=progress)
    for ep in list(folder.ok):
        bar.advance(note=ep.case_id)
        t2 = t2_of(ep)
        audio = folder.usable_recording(ep, gold_problem(ep.gold, t2))
        if audio is None:
            continue
        assert t2 is not None
        vad = vad_factory(vad_params(ep.params.get("vad")))
        model, user = audio[:, 1], audio[:, 0]
        model_spans, user_spans = vad.spans(model, SR), vad.spans(user, SR)
        profile = SoundProfile(model, SR)
        stats[ep.case_id] = episode_stats(model, SR, model_spans, profile)
        gold = ep.gold
        w0 = t2[0] + float(gold["window_rel_s"][0])
        readback = None
        transcript_extra: dict[str, Any] = {}
        if gold["expected_action"] == "READBACK":
            if has_text_output(ep):
                readback = ("model_text", model_text(ep, w0))
            else:
                heard = [s for s in model_spans if s.end_s > w0]
                text = asr.get().transcribe(asr_audio(model, SR, heard, (w0, ep.duration_s), user_spans, lo=w0), SR
                                            ) if heard else ""
                readback = ("asr", text)
                transcript_extra = {"transcript": text, "transcribed_s": round(sum(
                    s.end_s - max(s.start_s, w0) for s in heard), 3)}
        m = measure_case(ep.case_id, gold, t2, ep.duration_s, model_spans, user_spans, readback)
        m |= transcript_extra | {"vad": vad.params.to_dict(), "sound": window_sound(profile, model_spans,
                                                                                     *m["window"])}
        if judge is not None:
            if has_text_output(ep):
                transcript, source = model_text(ep), "model_text"
            else:
                transcript = asr.get().transcribe(asr_audio(model, SR, model_spans, (0.0, ep.duration_s), user_spans),
                                                  SR) if model_spans else ""
                source = "asr"
            m["judge"] = judge_case(judge, gold, transcript, source)
        measurements.append(m)
    return measurements, stats


def _gold_of_case(case: Any) -> dict[str, Any] | None:
    """The gold fields of a dataset case (an IFEvalItem, or anything with the IFEvalCase fields)."""
    c = getattr(case, "case", case)
    if not hasattr(c, "expected_action"):
        return None
    return {k: getattr(c, k, None) for k in ("conversation_id", "role", "probe", "instance", "level",
                                             "expected_action", "base_action", "event", "resolution_target",
                                             "matched_audio", "matched_group", "verifier")}


def windows_of_failure(f: Failure, cases: dict[str, Any]) -> tuple[list[dict[str, Any]], str] | None:
    """The one scored case of a failed episode, marked failed, and where its gold came from: rec.json, else the
    run's dataset; None when neither has it."""
    gold = f.episode.gold if f.episode is not None and isinstance(f.episode.gold, dict) else {}
    if all(k in gold for k in ("expected_action", "level", "role")):
        return [failed_record(f.case_id, gold, f.reason)], "rec.json"
    found = _gold_of_case(cases[f.case_id]) if f.case_id in cases else None
    if found is None:
        return None
    return [failed_record(f.case_id, found, f.reason)], "dataset"


def _protocol(folder: RunFolder) -> dict[str, Any]:
    for ep in [*folder.ok, *(f.episode for f in folder.failures)]:
        if ep is not None and isinstance(ep.params.get("protocol"), dict):
            return dict(ep.params["protocol"])
    return {}


def check_overrides(overrides: dict[str, Any] | None, folder: RunFolder) -> Thresholds:
    """Run-wide threshold replacements, or UsageError naming the parameter (a protocol parameter shaped the
    recording and is fixed at run time)."""
    recorded = _protocol(folder)
    fixed = {f.name for f in fields(IFEvalProtocol)} | set(recorded)
    return checked_thresholds(overrides or {}, recorded, fixed - set(THRESHOLD_LIMITS))


def score_run(run_dir: Path, *, asr: Any = None, judge: Any = None, overrides: dict[str, Any] | None = None,
              reuse_measurements: bool = False, progress: bool = False,
              vad_factory: Callable[[VADParams], Any] = SileroVAD) -> dict[str, Any]:
    """Score a run folder; with `reuse_measurements`, only re-apply thresholds to measurements.jsonl.

    `overrides` (threshold name -> number, see THRESHOLD_LIMITS) replace a threshold for every case of its action;
    scores under them go to their own file, named in the result's "scores_file". `judge`: PAS and the conflict
    label need a served LLM judge (`metrics.judges.OpenAIJudge`); any other judge leaves them not computed.
    """
    run_dir = Path(run_dir)
    folder = scoring.scored_folder(run_dir, BENCHMARK, reuse_measurements)
    th = check_overrides(overrides, folder)
    applied = th.applied()
    if reuse_measurements:
        base, measurements, stats = reused_inputs(run_dir, ("adapter", "adapter_info", "asr", "asr_pad_s", "judge",
                                                            "failed_episodes", "failed_uncounted"))
    else:
        lazy = LazyASR(asr)
        pas_judge = llm_judge(judge)
        base, measurements, stats = scoring.measure_and_store(
            run_dir, folder, lambda: measure_run(folder, lazy, pas_judge, vad_factory, progress=progress),
            windows_of_failure)
        base |= {"asr": lazy.described(), "asr_pad_s": ASR_PAD_S,
                 "judge": {"name": str(getattr(judge, "name", "none")) + ("" if pas_judge else "; PAS " + NOT_COMPUTED),
                           "heuristic": bool(getattr(judge, "heuristic", True)), "pas": pas_judge is not None}}
    judge_name = base["judge"]["name"] if base["judge"].get("pas") else None

    def result_for(t: Thresholds, over: dict[str, float]) -> dict[str, Any]:
        return {
            **scoring.scores_head(BENCHMARK, base),
            "thresholds": t.to_dict(),
            "verifier_defaults": {"defaults": VERIFIER_DEFAULTS, "role_overrides": ROLE_OVERRIDES},
            **scoring.scores_file(run_dir, over),
            **scoring.failure_counts(folder, base),
            **scoring.health_block(folder, base, measurements, stats),
            **aggregate(measurements, t),
            **judge_blocks(measurements, judge_name),
            **scoring.digests_block(folder, base),
        }

    return scoring.write_scores(run_dir, result_for, th, applied, Thresholds(), fresh=not reuse_measurements)
