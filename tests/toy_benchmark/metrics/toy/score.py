"""Toy scores for a run folder: did the model start speaking within the window after the question?

    RUN_DIR/measurements.jsonl   one record per case: its window, the model's speech in it, its first onset
    RUN_DIR/health.json          per-episode run-health numbers of the model channel (metrics/health.py)
    RUN_DIR/scores.json          {"benchmark": "toy", "scores": {"answered": {value, n, k, ci}}, ...}
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dataset_builder.atomic import atomic_write_json
from dataset_builder.errors import UsageError
from metrics.episodes import (
    Failure,
    RecordingError,
    RunFolder,
    account_failures,
    accounting_flags,
    load_run_folder,
    read_recording,
)
from metrics.freshness import invalidate, provenance, scores_path
from metrics.health import SoundProfile, episode_stats, run_health, window_sound, with_flags
from metrics.scoring import reused_inputs, store_measurements
from metrics.stats import summarise
from metrics.vad import SileroVAD, VADParams

BENCHMARK = "toy"
ANCHOR = "q"  # the question's turn id in the plan
SR = 24_000


def answered(m: dict[str, Any]) -> bool:
    """The verdict: model speech begins inside the window (a failed episode's window never passes)."""
    return not m.get("failed") and m.get("onset_s") is not None


def measure(ep: Any, audio: Any) -> tuple[dict[str, Any], dict[str, float]]:
    vad_params = VADParams.from_dict({k: v for k, v in ep.params["vad"].items() if k != "preset"})
    model = audio[:, 1]
    spans = SileroVAD(vad_params).spans(model, SR)
    q = ep.event(ANCHOR)
    a = q.end_s
    b = a + float(ep.params["protocol"]["answer_window_s"])
    inside = [[round(max(s.start_s, a), 3), round(min(s.end_s, b), 3)] for s in spans if s.end_s > a and s.start_s < b]
    onset = next((s.start_s for s in spans if a <= s.start_s < b), None)
    profile = SoundProfile(model, SR)
    m = {"case_id": ep.case_id, "label": "answer", "condition": ep.condition, "window": [round(a, 3), round(b, 3)],
         "spans": inside, "onset_s": None if onset is None else round(onset, 3),
         "speech_s": round(sum(y - x for x, y in inside), 3), "sound": window_sound(profile, spans, a, b)}
    return m, episode_stats(model, SR, spans, profile)


def failed_windows(f: Failure, cases: dict[str, Any]) -> tuple[list[dict[str, Any]], str]:
    """A failed case has one window, whatever its gold: it counts as one failure."""
    return [{"case_id": f.case_id, "label": "answer", "failed": True, "reason": f.reason, "window": None}], "rec.json"


def score_run(run_dir: Path, *, asr: Any = None, judge: Any = None, overrides: dict[str, Any] | None = None,
              reuse_measurements: bool = False, progress: bool = False) -> dict[str, Any]:
    """Score a run folder (no ASR or judge needed: the verdict is timing alone); the toy has no thresholds to
    override, since its window length is a protocol parameter that shaped the recording."""
    if overrides:
        raise UsageError(f"--param {sorted(overrides)}: the toy benchmark has no thresholds to override")
    run_dir = Path(run_dir)
    folder: RunFolder = load_run_folder(run_dir, BENCHMARK, check_audio=not reuse_measurements)
    if not folder.case_ids:
        raise FileNotFoundError(f"{run_dir}: no *.rec.json episodes to score")
    if reuse_measurements:
        base, measurements, stats = reused_inputs(run_dir, ("adapter", "adapter_info", "failed_episodes",
                                                            "failed_uncounted"))
    else:
        invalidate(run_dir)
        measurements, stats = [], {}
        for ep in list(folder.ok):
            try:
                audio = read_recording(run_dir, ep)
            except RecordingError as err:
                folder.fail(ep, str(err))
                continue
            measurements.append((got := measure(ep, audio))[0])
            stats[ep.case_id] = got[1]
        records, entries, uncounted = account_failures(folder, failed_windows)
        measurements += records
        adapter = folder.adapter()
        base = {"adapter": adapter.get("name"), "adapter_info": adapter, "failed_episodes": entries,
                "failed_uncounted": uncounted, **store_measurements(run_dir, folder, measurements, stats)}
    path = scores_path(run_dir, {})
    n_dataset = (folder.info or {}).get("n_dataset_cases")
    result = {
        "benchmark": BENCHMARK, "adapter": base["adapter"], "adapter_info": base["adapter_info"],
        "asr": "none (not needed)", "judge": {"name": "none", "heuristic": True},
        "thresholds": {}, "overrides": {}, "scores_file": str(path),
        "n_episodes": folder.n_episodes, "n_failed": len(base["failed_episodes"]),
        "failed_episodes": base["failed_episodes"], "failed_uncounted": base["failed_uncounted"],
        "health": with_flags(run_health(stats, measurements),
                             accounting_flags(base["failed_uncounted"], folder.n_episodes, n_dataset,
                                              folder.skipped)),
        "scores": {"answered": summarise(answered(m) for m in measurements)},
        **provenance(folder),
        "measurements_digest": base["measurements_digest"], "health_digest": base["health_digest"],
    }
    atomic_write_json(path, result)
    return result
