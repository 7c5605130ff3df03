"""Duplex-MPE scores for a run folder: measure every episode, then aggregate verdicts.

    RUN_DIR/measurements.jsonl   one record per scored window (thresholds not applied); the windows of a failed
                                 episode are records marked "failed", counted against the model
    RUN_DIR/health.json          per-episode run-health numbers of the model channel (metrics/health.py)
    RUN_DIR/scores.json          {"benchmark": "mpe", "adapter": ..., "scores": {...}, "by_condition": ...}
                                 under the thresholds the run was recorded with; `--param` overrides write
                                 scores-NAME=VALUE.json instead (metrics/freshness.py)

One bad episode (a truncated rec.json, a missing or mislabelled WAV) becomes one failed episode with its reason
(metrics/episodes.py); a failed episode counts as a failure in every window it would have entered, found from
its rec.json gold or, failing that, from the run's dataset; one whose windows cannot be found is named in a
health line, never dropped silently.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any

from dataset_builder.benchmark_params import MPEProtocol
from dataset_builder.episode import Episode
from dataset_builder.http_client import served_concurrency
from dataset_builder.progress import Progress
from metrics import scoring
from metrics.episodes import Failure, RecordingError, RunFolder, read_recording
from metrics.health import SoundProfile, episode_stats, window_sound
from metrics.mpe.aggregate import aggregate
from metrics.mpe.measure import failed_windows, measure_episode, sound_window
from metrics.mpe.verdicts import (
    METRICS,
    RECORDED,
    THRESHOLD_LIMITS,
    WINDOW_METRICS,
    Thresholds,
    chosen_thresholds,
    recorded_of,
    supported_basis,
)
from metrics.scoring import ASR_PAD_S, asr_audio, reused_inputs
from metrics.spans import Span

BENCHMARK = "mpe"
SR = 24_000


def vad_from_params(params: dict[str, Any]) -> Any:
    """The batch VAD with the parameters the episode was recorded under."""
    from metrics.vad import SileroVAD, VADParams

    known = {f.name for f in fields(VADParams)}
    return SileroVAD(VADParams(**{k: v for k, v in params.items() if k in known}))


def gold_problem(ep: Episode) -> str | None:
    """What the measurement needs from rec.json's gold and does not find, or None."""
    gold = ep.gold if isinstance(ep.gold, dict) else {}
    missing = [k for k in ("labels", "question", "gold_answer") if k not in gold]
    if missing:
        return f"{ep.case_id}.rec.json: gold lacks {missing}"
    if not isinstance(gold["labels"], dict):
        return f"{ep.case_id}.rec.json: gold labels are not a turn_id -> label mapping"
    return None


def measure_run(folder: RunFolder, asr: Any, judge: Any, vad_factory: Any, progress: bool = False
                ) -> tuple[list[dict[str, Any]], dict[str, dict[str, float]]]:
    """Measurements and health numbers of every usable episode; one that turns out unusable moves to
    `folder.failures` with its reason and the rest go on. With a served ASR or judge, as many episodes as the
    client keeps requests in flight are measured at once (threads); results are taken in episode order, so they
    do not depend on how many ran together."""
    measurements: list[dict[str, Any]] = []
    stats: dict[str, dict[str, float]] = {}
    bar = Progress(f"score {folder.run_dir.name}", len(folder.ok), enabled=progress)

    def measure_one(ep: Episode) -> tuple[list[dict[str, Any]], dict[str, float]] | str:
        """The episode's measurements and health numbers, or why it cannot be measured."""
        problem = gold_problem(ep)
        if problem:
            return problem
        try:
            audio = read_recording(folder.run_dir, ep)
        except RecordingError as err:
            return str(err)
        model = audio[:, 1]
        spans = vad_factory(ep.params.get("vad", {})).spans(model, SR)
        profile = SoundProfile(model, SR)
        # The ASR's padding stays out of the user's speech: the clips as played (rec.json's timeline, exact and
        # free; a VAD pass over the user channel, mostly speech, would cost more than the model channel's).
        user_clips = [Span(e.start_s, e.end_s) for e in ep.timeline]

        def transcribe(sp: list[Span], window: tuple[float, float]) -> str:
            fences = [s for s in spans if s not in sp] + user_clips
            return asr.transcribe(asr_audio(model, SR, sp, window, fences), SR)

        ms = [m | {"model_spans_n": len(spans), "sound": window_sound(profile, spans, *sound_window(m))}
                | recorded_field(ep) for m in measure_episode(ep, spans, transcribe, judge)]
        return ms, episode_stats(model, SR, spans, profile)

    episodes = list(folder.ok)
    pool = ThreadPoolExecutor(served_concurrency(asr, judge), thread_name_prefix="score")
    try:
        for ep, got in zip(episodes, pool.map(measure_one, episodes), strict=True):
            if isinstance(got, str):
                folder.fail(ep, got)
            else:
                measurements += got[0]
                stats[ep.case_id] = got[1]
            bar.advance(note=ep.case_id)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)  # an error stops the queued episodes, not only this loop
    return measurements, stats


def recorded_field(ep: Episode | None) -> dict[str, Any]:
    """{RECORDED: the thresholds the episode was recorded with} for its window measurements, so that the stored
    measurements alone reproduce scores.json (the `evaluate` modules read it); {} for an episode with no protocol."""
    protocol = ep.params.get("protocol") if ep is not None else None
    return {RECORDED: recorded_of(protocol)} if isinstance(protocol, dict) else {}


def windows_of_failure(f: Failure, cases: dict[str, Any]) -> tuple[list[dict[str, Any]], str] | None:
    """The failed windows of a failed case and where its labels came from: rec.json's gold, else the dataset's
    case; None when neither has them."""
    ep = f.episode
    labels = ep.gold.get("labels") if ep is not None and isinstance(ep.gold, dict) else None
    if isinstance(labels, dict) and labels:
        windows = failed_windows(f.case_id, ep.pair_id, ep.condition, labels, f.reason)
        return [w | recorded_field(ep) for w in windows], "rec.json"
    case = cases.get(f.case_id)
    if case is None:
        return None
    script = case.script
    labels = {t.turn_id: t.label for t in script.turns}
    windows = failed_windows(f.case_id, script.pair_id, script.condition, labels, f.reason)
    return [w | recorded_field(ep) for w in windows], "dataset"


def _protocols(folder: RunFolder) -> list[dict[str, Any]]:
    eps = [*folder.ok, *(f.episode for f in folder.failures)]
    return [dict(ep.params["protocol"]) for ep in eps if ep is not None and isinstance(ep.params.get("protocol"), dict)]


def recorded_protocol(folder: RunFolder) -> dict[str, Any]:
    """The protocol the run was recorded with (from its first usable episode, else any that has one)."""
    protocols = _protocols(folder)
    return protocols[0] if protocols else {}


def supported_limits(folder: RunFolder, th_recorded: Thresholds) -> dict[str, Any]:
    """The recorded values overrides are checked against (`verdicts.supported_basis`), with the run-time
    parameters the error message may name."""
    return recorded_protocol(folder) | supported_basis(th_recorded, _protocols(folder))


def failed_window_counts(measurements: list[dict[str, Any]]) -> dict[str, int]:
    counts = dict.fromkeys(METRICS, 0)
    for m in measurements:
        if m.get("failed"):
            for metric in WINDOW_METRICS[m["kind"]]:
                counts[metric] += 1
    return counts


def unparseable_verdicts(measurements: list[dict[str, Any]]) -> dict[str, int]:
    """Windows whose judge gave no verdict (a served judge's reply without one; the heuristic's empty transcript),
    per kind. They count as a wrong answer or a broken silence (docs/benchmarks/mpe.md); this says how many did."""
    return {"answer": sum(1 for m in measurements if m.get("answer_verdict") == "unparseable"),
            "ack": sum(1 for m in measurements if m.get("ack_verdict") == "unparseable")}


def score_run(run_dir: Path, *, asr: Any = None, judge: Any = None, overrides: dict[str, Any] | None = None,
              reuse_measurements: bool = False, progress: bool = False) -> dict[str, Any]:
    """Score a run folder; with `reuse_measurements`, only re-apply thresholds to measurements.jsonl.

    `overrides` (threshold name -> number) are checked against THRESHOLD_LIMITS and the recorded protocol
    (UsageError otherwise); scores under them go to their own file, named in the result's "scores_file".
    """
    run_dir = Path(run_dir)
    folder = scoring.scored_folder(run_dir, BENCHMARK, reuse_measurements)
    recorded = recorded_protocol(folder)
    th_recorded = Thresholds.from_params(recorded)
    fixed = [f.name for f in fields(MPEProtocol) if f.name not in THRESHOLD_LIMITS]
    th, applied = chosen_thresholds(th_recorded, overrides or {}, supported_limits(folder, th_recorded), fixed)
    if reuse_measurements:
        base, measurements, stats = reused_inputs(run_dir, ("adapter", "adapter_info", "asr", "asr_runtime",
                                                            "asr_pad_s", "judge", "failed_episodes",
                                                            "failed_uncounted"))
    else:
        from metrics.asr import scoring_asr
        from metrics.judges import get_judge

        asr = asr or scoring_asr()
        judge = judge or get_judge("heuristic")
        base, measurements, stats = scoring.measure_and_store(
            run_dir, folder, lambda: measure_run(folder, asr, judge, vad_from_params, progress=progress),
            windows_of_failure)
        # The native settings whisper ran with (dataset_builder.numerics): its verdicts can move with them.
        runtime = getattr(asr, "runtime", None)
        base |= {"asr": asr.name, "asr_runtime": runtime() if callable(runtime) else None, "asr_pad_s": ASR_PAD_S,
                 "judge": {"name": judge.name, "heuristic": bool(judge.heuristic)}}

    def result_for(t: Thresholds, over: dict[str, float]) -> dict[str, Any]:
        return {
            **scoring.scores_head(BENCHMARK, base, asr_runtime=True),
            "thresholds": asdict(t),
            "recorded_thresholds": asdict(th_recorded),
            **scoring.scores_file(run_dir, over),
            **scoring.failure_counts(folder, base),
            "failed_windows": failed_window_counts(measurements),
            "unparseable_verdicts": unparseable_verdicts(measurements),
            **scoring.health_block(folder, base, measurements, stats),
            **aggregate(measurements, t),
            **scoring.digests_block(folder, base),
        }

    return scoring.write_scores(run_dir, result_for, th, applied, th_recorded, fresh=not reuse_measurements)
