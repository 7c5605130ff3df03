"""Score a run folder with its own benchmark's scorer: the benchmark is the one the run recorded
(docs/adding-a-benchmark.md).

Also the scaffolding every benchmark's `score_run` shares, defined once: the ASR loaded only when a case needs
one (`LazyASR`), the model audio of chosen spans (`spans_audio`), what the ASR hears of them (`asr_audio`: padded
by `asr_spans`), and storing or re-reading the measurements and health numbers a scores file is computed from
(`store_measurements`, `reused_inputs`), and the tail of every `score_run`: the folder to score
(`scored_folder`), a fresh measurement (`measure_and_store`), the blocks every scores file holds in the same
order (`scores_head`, `scores_file`, `failure_counts`, `health_block`, `digests_block`) and writing it
(`write_scores`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from hashlib import sha256
from pathlib import Path
from typing import Any

import numpy as np

from dataset_builder.atomic import atomic_write_json, atomic_write_text
from dataset_builder.benchmarks import Benchmark, get_benchmark
from dataset_builder.errors import UsageError
from metrics.episodes import (
    RUN_INFO,
    Failure,
    RunFolder,
    account_failures,
    accounting_flags,
    load_run_folder,
    read_run_info,
)
from metrics.freshness import HEALTH, MEASUREMENTS, invalidate, load_reusable, provenance, scores_path
from metrics.spans import Span, merge_spans

# Seconds of the model channel the ASR also hears on each side of a VAD span. A VAD span starts at the first
# 32 ms chunk it is sure of, often a few tens of ms after the voice does: whisper given "mm-hmm" without its onset
# hears "remember", and a silent window fails on a word nobody said. Recorded with every scores file.
ASR_PAD_S = 0.3


def run_benchmark(run_dir: Path) -> Benchmark:
    """The benchmark a run folder belongs to: from run.json, else from its first readable rec.json."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise UsageError(f"run folder {run_dir} does not exist")
    info = read_run_info(run_dir, strict="was this folder written by `run`?")
    if info is not None:
        try:
            return get_benchmark(info["benchmark"])
        except KeyError as err:
            raise UsageError(f"{run_dir / RUN_INFO} is not a run record ({err}); was this folder written by `run`?"
                             ) from None
    for rec in sorted(run_dir.glob("*.rec.json")):
        try:
            return get_benchmark(json.loads(rec.read_text())["benchmark"])
        except (json.JSONDecodeError, KeyError):
            continue
    raise UsageError(f"{run_dir}: no run.json and no readable *.rec.json episodes to score")


def score_run_dir(run_dir: Path, **kwargs: Any) -> dict[str, Any]:
    """Dispatch to `metrics/<bench>/score.py:score_run` of the run's benchmark."""
    return run_benchmark(run_dir).function("score")(Path(run_dir), **kwargs)


def result_tables(results: dict[str, dict[str, Any]]) -> list[tuple[str, str]]:
    """The text tables of results of one benchmark, side by side."""
    names = {r["benchmark"] for r in results.values()}
    if len(names) != 1:
        raise UsageError(f"cannot put runs of different benchmarks side by side: {sorted(names)}")
    return get_benchmark(names.pop()).function("tables")(results)


class LazyASR:
    """The ASR, built only when a case needs one (most cases are scored on timing alone); `used` says whether
    one was, so a result can say "(not needed)"."""

    def __init__(self, asr: Any) -> None:
        self._asr = asr
        self.used = False

    def get(self) -> Any:
        if self._asr is None:
            from metrics.asr import scoring_asr

            self._asr = scoring_asr()
        self.used = True
        return self._asr

    @property
    def name(self) -> str:
        if self._asr is None:
            from metrics.asr import SCORING_ASR

            return SCORING_ASR
        return str(self._asr.name)

    def described(self) -> str:
        return self.name if self.used else f"{self.name} (not needed)"


def lazy_spans(vad: Any, x: np.ndarray, sr: int) -> Callable[[], list[Span]]:
    """`vad.spans(x, sr)`, found on the first call only (most episodes need no transcription, so no second VAD)."""
    found: list[list[Span]] = []

    def get() -> list[Span]:
        if not found:
            found.append(vad.spans(x, sr))
        return found[0]

    return get


def spans_audio(x: np.ndarray, sr: int, spans: Sequence[Span], lo: float = 0.0, hi: float = float("inf")
                ) -> np.ndarray:
    """The samples of `x` inside `spans`, each cut to [lo, hi), joined in time order (empty when none)."""
    parts = [x[int(max(s.start_s, lo) * sr):int(min(s.end_s, hi) * sr)] for s in sorted(spans, key=lambda s: s.start_s)
             if min(s.end_s, hi) > max(s.start_s, lo)]
    return np.concatenate(parts).astype(np.float32) if parts else np.zeros(0, np.float32)


def asr_spans(chosen: Sequence[Span], window: tuple[float, float], fences: Sequence[Span] = (),
              pad_s: float = ASR_PAD_S) -> list[Span]:
    """`chosen` (VAD spans of the model channel) widened by `pad_s` on each side for the ASR, and merged where they
    meet. A pad stays inside `window` (a span already reaching past it keeps its own extent) and stops at every
    `fence`: the other channel's speech (whatever of it leaks into the model channel is not the model's words)
    and the model's own speech that was not chosen."""
    lo, hi = window
    out = []
    for s in sorted(chosen, key=lambda s: s.start_s):
        a = min(s.start_s, max(s.start_s - pad_s, lo))
        b = max(s.end_s, min(s.end_s + pad_s, hi))
        for f in fences:
            if f.start_s < s.start_s and f.end_s > a:
                a = min(f.end_s, s.start_s)
            if f.end_s > s.end_s and f.start_s < b:
                b = max(f.start_s, s.end_s)
        out.append(Span(a, b))
    return merge_spans(out, 0.0)


def asr_audio(x: np.ndarray, sr: int, chosen: Sequence[Span], window: tuple[float, float],
              fences: Sequence[Span] = (), lo: float = 0.0, hi: float = float("inf"), pad_s: float = ASR_PAD_S
              ) -> np.ndarray:
    """What the ASR hears of the model speech `chosen`, each span cut to [lo, hi) first: the cut spans padded by
    `asr_spans` (the parts cut off are fences too), joined in time order."""
    cut = [Span(max(s.start_s, lo), min(s.end_s, hi)) for s in chosen if min(s.end_s, hi) > max(s.start_s, lo)]
    rest = [Span(s.start_s, lo) for s in chosen if s.start_s < lo] + [Span(hi, s.end_s) for s in chosen if s.end_s > hi]
    return spans_audio(x, sr, asr_spans(cut, window, [*fences, *rest], pad_s))


def store_measurements(run_dir: Path, folder: RunFolder, measurements: list[dict[str, Any]],
                       stats: dict[str, dict[str, float]]) -> dict[str, str]:
    """Write measurements.jsonl and health.json (before any score is computed from them); their digests."""
    mtext = "".join(json.dumps(m) + "\n" for m in measurements)
    htext = json.dumps({"episodes_digest": folder.digest, "episodes": stats}, indent=1)
    atomic_write_text(Path(run_dir) / MEASUREMENTS, mtext)
    atomic_write_text(Path(run_dir) / HEALTH, htext)
    return {"measurements_digest": sha256(mtext.encode()).hexdigest(),
            "health_digest": sha256(htext.encode()).hexdigest()}


def reused_inputs(run_dir: Path, keys: Sequence[str]
                       ) -> tuple[dict[str, Any], list[dict[str, Any]], dict[str, dict[str, float]]]:
    """For `--reuse`: (the recorded scores' `keys` with both digests, the stored measurements, the per-episode
    health numbers); UsageError when any is missing or stale (metrics/freshness.py)."""
    meta, measurements, health = load_reusable(run_dir)
    base = {k: meta[k] for k in (*keys, "measurements_digest", "health_digest") if k in meta}
    return base, measurements, health.get("episodes", {})


# --- the tail every benchmark's score_run shares ----------------------------------------------------------------

Measured = tuple[list[dict[str, Any]], dict[str, dict[str, float]]]  # (measurements, per-episode health numbers)
FailedWindows = Callable[[Failure, dict[str, Any]], tuple[list[dict[str, Any]], str] | None]


def scored_folder(run_dir: Path, benchmark: str, reuse_measurements: bool) -> RunFolder:
    """The run folder's episodes (their recordings checked unless only thresholds are re-applied);
    FileNotFoundError when it has none."""
    folder = load_run_folder(run_dir, benchmark, check_audio=not reuse_measurements)
    if not folder.case_ids:
        raise FileNotFoundError(f"{run_dir}: no *.rec.json episodes to score")
    return folder


def measure_and_store(run_dir: Path, folder: RunFolder, measure: Callable[[], Measured],
                      windows_of_failure: FailedWindows) -> tuple[dict[str, Any], list[dict[str, Any]],
                                                                  dict[str, dict[str, float]]]:
    """A fresh measurement: the old scores removed first, every usable episode measured (`measure`), each failed
    episode's windows added as failed records (`account_failures`), and the measurements and health numbers
    stored. Returns the scores' base (adapter, failures, digests), the measurements and the health numbers."""
    invalidate(run_dir)  # old scores must not outlive a rescore that stops halfway
    measurements, stats = measure()
    failed_records, failed_entries, uncounted = account_failures(folder, windows_of_failure)
    measurements += failed_records
    digests = store_measurements(run_dir, folder, measurements, stats)
    adapter = folder.adapter()
    base = {"adapter": adapter.get("name"), "adapter_info": adapter, "failed_episodes": failed_entries,
            "failed_uncounted": uncounted, **digests}
    return base, measurements, stats


def scores_head(benchmark: str, base: dict[str, Any], *, asr_runtime: bool = False) -> dict[str, Any]:
    """What was scored and by what: the benchmark, the adapter, the ASR (with its native settings where the
    benchmark records them) and the judge."""
    head = {"benchmark": benchmark, "adapter": base["adapter"], "adapter_info": base["adapter_info"],
            "asr": base["asr"]}
    if asr_runtime:
        head["asr_runtime"] = base.get("asr_runtime")
    head["asr_pad_s"] = base.get("asr_pad_s")  # None: measured before spans were padded for the ASR
    head["judge"] = base["judge"]
    return head


def scores_file(run_dir: Path, over: dict[str, Any]) -> dict[str, Any]:
    """The overrides the scores are under and the file they go to (metrics/freshness.py)."""
    return {"overrides": over, "scores_file": str(scores_path(run_dir, over))}


def failure_counts(folder: RunFolder, base: dict[str, Any]) -> dict[str, Any]:
    return {"n_episodes": folder.n_episodes, "n_failed": len(base["failed_episodes"]),
            "failed_episodes": base["failed_episodes"], "failed_uncounted": base["failed_uncounted"]}


def health_block(folder: RunFolder, base: dict[str, Any], measurements: list[dict[str, Any]],
                 stats: dict[str, dict[str, float]], *, with_skipped: bool = False) -> dict[str, Any]:
    """Run health (metrics/health.py) with the lines on what the scores cover (`accounting_flags`; the skipped
    episodes' lines where the benchmark skips any)."""
    from metrics.health import run_health, with_flags

    n_dataset = (folder.info or {}).get("n_dataset_cases")
    flags = accounting_flags(base["failed_uncounted"], folder.n_episodes, n_dataset,
                             folder.skipped if with_skipped else None)
    return {"health": with_flags(run_health(stats, measurements), flags)}


def digests_block(folder: RunFolder, base: dict[str, Any]) -> dict[str, Any]:
    """What the scores were computed from (metrics/freshness.py), for the staleness check."""
    return {**provenance(folder), "measurements_digest": base["measurements_digest"],
            "health_digest": base["health_digest"]}


def write_scores(run_dir: Path, result_for: Callable[[Any, dict[str, Any]], dict[str, Any]], chosen: Any,
                 applied: dict[str, Any], recorded: Any, fresh: bool) -> dict[str, Any]:
    """Write the scores under `chosen` (with `applied` overrides) to their file and return them. A fresh
    measurement under overrides also refreshes the recorded settings' scores.json, which --reuse builds on."""
    if fresh and applied:
        atomic_write_json(scores_path(run_dir, {}), result_for(recorded, {}))
    result = result_for(chosen, applied)
    atomic_write_json(Path(result["scores_file"]), result)
    return result
