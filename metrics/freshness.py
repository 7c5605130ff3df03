"""Scores that say what they describe, and refuse to pass for current when they are not (docs/scoring.md).

A run folder holds, after `score`:

    measurements.jsonl                 continuous measurements of every window (failed ones marked)
    health.json                        per-episode run-health numbers (metrics/health.py)
    scores.json                        scores under the thresholds the run was recorded with
    scores-NAME=VALUE[,...].json       scores under `--param` overrides, one file per set (never scores.json)

Every scores file records the thresholds, the case ids it scored, the dataset's size and fingerprint (from
run.json) and digests of the episodes, the measurements and the health numbers it was computed from.
`staleness` compares them with the folder as it is now (an extended or re-run episode, a rebuilt dataset, a
rewritten measurements file); `--reuse` and `report` refuse stale inputs with the fix. A full rescore removes
every old output before it starts, so a crash halfway can never leave old numbers looking current.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dataset_builder.errors import UsageError
from metrics.episodes import RunFolder, coverage, folder_digest, read_run_info
from metrics.feasibility import run_feasibility

SCORES = "scores.json"
MEASUREMENTS = "measurements.jsonl"
HEALTH = "health.json"
FORMAT = 2  # scores files that record their inputs (format 1: older, no digests)


def _tag_value(v: Any) -> str:
    """A value as it appears in a scores file name: a number as %g, a flag as true/false, a name as itself."""
    if isinstance(v, bool):
        return "true" if v else "false"
    return f"{float(v):g}" if isinstance(v, int | float) else str(v)


def scores_path(run_dir: Path, overrides: Mapping[str, Any]) -> Path:
    """scores.json for the recorded thresholds, else scores-NAME=VALUE[,...].json (names sorted); a value may be a
    number, a flag or a name (M3's `rules=authors`)."""
    if not overrides:
        return Path(run_dir) / SCORES
    tag = ",".join(f"{k}={_tag_value(v)}" for k, v in sorted(overrides.items()))
    return Path(run_dir) / f"scores-{tag}.json"


def score_outputs(run_dir: Path) -> list[Path]:
    run_dir = Path(run_dir)
    return sorted({*run_dir.glob("scores*.json"), run_dir / MEASUREMENTS, run_dir / HEALTH})


def invalidate(run_dir: Path) -> list[str]:
    """Remove every scoring output of the folder (before a rescore measures anything); returns their names."""
    removed = []
    for p in score_outputs(run_dir):
        if p.exists():
            p.unlink()
            removed.append(p.name)
    return removed


def file_digest(path: Path) -> str | None:
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return None


def provenance(folder: RunFolder) -> dict[str, Any]:
    """What a scores file records about its inputs (besides the measurement and health digests)."""
    info = folder.info or {}
    identity = info.get("identity") or {}
    stepped = [*folder.ok, *(f.episode for f in folder.failures if f.episode is not None)]
    return {"format": FORMAT, "case_ids": list(folder.case_ids), "episodes_digest": folder.digest,
            "dataset": identity.get("dataset"), "config": info.get("config"),
            "dataset_fingerprint": info.get("dataset_fingerprint"), "n_dataset_cases": info.get("n_dataset_cases"),
            "coverage": coverage(folder.n_episodes, info.get("n_dataset_cases"), info.get("selections")),
            # How fast the agent stepped on the hardware the run used (docs/scale.md): every benchmark's scores say it.
            "feasibility": run_feasibility(stepped), "vad": recorded_vad(stepped)}


def recorded_vad(episodes: list[Any]) -> dict[str, Any] | list[dict[str, Any]] | None:
    """The VAD settings the episodes recorded (rec.json `params.vad`, what the scheduler ran and the scorer
    re-runs): one dict when all agree, else each distinct one; None when none recorded any."""
    seen: list[dict[str, Any]] = []
    for ep in episodes:
        vad = ep.params.get("vad")
        if isinstance(vad, dict) and vad not in seen:
            seen.append(dict(vad))
    return None if not seen else seen[0] if len(seen) == 1 else seen


def staleness(run_dir: Path, scores: Mapping[str, Any]) -> list[str]:
    """Why `scores` no longer describe the folder as it is now (empty when they do)."""
    run_dir = Path(run_dir)
    if scores.get("format", 1) < FORMAT or "episodes_digest" not in scores:
        return ["these scores were written by an older version that did not record which episodes they cover"]
    problems = []
    digest, case_ids = folder_digest(run_dir)
    if digest != scores["episodes_digest"]:
        scored, now = set(scores.get("case_ids", [])), set(case_ids)
        new, gone = sorted(now - scored), sorted(scored - now)
        if new:
            problems.append(f"{len(new)} episode(s) have no scores (the run was extended after scoring: "
                            f"{', '.join(new[:3])}{' ...' if len(new) > 3 else ''})")
        if gone:
            problems.append(f"{len(gone)} scored episode(s) are gone from the folder ({', '.join(gone[:3])}"
                            f"{' ...' if len(gone) > 3 else ''})")
        if not new and not gone:
            problems.append("episodes were re-run or rewritten after scoring")
    fingerprint = (read_run_info(run_dir) or {}).get("dataset_fingerprint")
    if scores.get("dataset_fingerprint") and fingerprint and fingerprint != scores["dataset_fingerprint"]:
        problems.append(f"run.json now names another dataset state (fingerprint {fingerprint[:12]}, scored "
                        f"{str(scores['dataset_fingerprint'])[:12]})")
    for name, key in ((MEASUREMENTS, "measurements_digest"), (HEALTH, "health_digest")):
        if key in scores and file_digest(run_dir / name) != scores[key]:
            problems.append(f"{name} is missing or changed since these scores were computed")
    return problems


def stale_error(run_dir: Path, scores_file: Path, problems: list[str], what: str) -> UsageError:
    return UsageError(f"{scores_file} does not match its run folder ({'; '.join(problems)}): {what}; "
                      f"run `duplex-eval score {run_dir}` to score it again")


def refuse_if_stale(run_dir: Path, scores_file: Path, scores: Mapping[str, Any], what: str) -> None:
    problems = staleness(run_dir, scores)
    if problems:
        raise stale_error(run_dir, scores_file, problems, what)


def load_json(path: Path, what: str) -> dict[str, Any]:
    try:
        data = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise UsageError(f"{path} missing: run `duplex-eval score {Path(path).parent}` first") from None
    except (OSError, json.JSONDecodeError) as err:
        raise UsageError(f"{path} is not readable JSON ({err}): run `duplex-eval score {Path(path).parent}` "
                         f"again to rewrite the {what}") from None
    if not isinstance(data, dict):
        raise UsageError(f"{path} is not a {what}: run `duplex-eval score {Path(path).parent}` again")
    return data


def load_reusable(run_dir: Path) -> tuple[dict[str, Any], list[dict[str, Any]], dict[str, Any]]:
    """(scores.json, measurements, health.json) for `--reuse`, or UsageError when any is missing or stale."""
    run_dir = Path(run_dir)
    mpath = run_dir / MEASUREMENTS
    if not mpath.exists():
        raise UsageError(f"--reuse: {mpath} is missing (never scored, or a rescore did not finish): run "
                         f"`duplex-eval score {run_dir}` without --reuse first")
    meta = load_json(run_dir / SCORES, "scores file")
    refuse_if_stale(run_dir, run_dir / SCORES, meta, "--reuse would re-apply thresholds to old measurements")
    try:
        measurements = [json.loads(line) for line in mpath.read_text().splitlines() if line.strip()]
    except json.JSONDecodeError as err:  # digest matched, so only a hand edit of both could get here
        raise UsageError(f"--reuse: {mpath} is not JSON lines ({err}); score without --reuse") from None
    health = load_json(run_dir / HEALTH, "health record") if (run_dir / HEALTH).exists() else {}
    return meta, measurements, health
