"""Everything the report shows, read once from the run folders: each run's scores (refused when stale), its
measurements, health numbers and episodes, and per episode the scored windows with their verdicts.

A window's verdict comes from the benchmark's own `windows` function (the registry's plot windows,
docs/adding-a-benchmark.md), called on that one measurement, so the report never re-implements a scoring rule:
"pass"/"fail" under the thresholds or rules the scores were computed with, "failed" for a window of a failed episode (it
counts as a failure), "not scored" where the rules drop it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dataset_builder.benchmarks import Benchmark, get_benchmark
from metrics.freshness import HEALTH, MEASUREMENTS, SCORES, load_json, stale_error, staleness

FACETS = ("condition", "level", "role", "language", "domain")  # what a window's group is, where recorded
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def slug(text: str) -> str:
    return _UNSAFE.sub("_", text).strip("._") or "x"


@dataclass
class WindowRow:
    label: str
    start_s: float | None
    end_s: float | None
    verdict: str  # pass / fail / failed / not scored
    talked: bool  # the model spoke inside the window
    speech_s: float | None
    transcript: str
    group: str  # condition / level, role / language, domain, condition
    detail: str = ""
    # Each metric the window counts toward, with its own verdict (the benchmark's `window_detail` returning a
    # dict): a Duplex-MPE N4 window of a silent model fails window_response and passes answering_window_yield,
    # which one verdict for the row would hide. Empty: the row's verdict is the window's only one.
    outcomes: dict[str, bool] = field(default_factory=dict)

    @property
    def verdicts(self) -> list[str]:
        """The verdicts the window has: one per metric where it has several, else its one verdict."""
        if not self.outcomes:
            return [self.verdict]
        return sorted({"pass" if ok else "fail" for ok in self.outcomes.values()})


@dataclass
class EpisodeView:
    case_id: str
    slug: str
    status: str  # ok / failed / skipped / unusable / unreadable
    reason: str
    rec: dict[str, Any] | None
    wav: Path
    windows: list[WindowRow] = field(default_factory=list)
    counted: str = ""  # how a failed episode counts ("counted as failed in 5 windows")
    health: dict[str, Any] | None = None  # health.json numbers of its model channel
    model_spans: list[list[float]] = field(default_factory=list)  # the model speech the scorer saw, merged


@dataclass
class RunView:
    dir: Path
    name: str  # "adapter (folder)" as the text tables call it, " STALE" appended when shown stale
    slug: str
    result: dict[str, Any]
    bench: Benchmark
    episodes: list[EpisodeView] = field(default_factory=list)

    @property
    def stale(self) -> list[str]:
        return list(self.result.get("_stale", []))

    def first_rec(self) -> dict[str, Any]:
        return next((e.rec for e in self.episodes if e.rec), {})


def load_scores(run_dir: Path, allow_stale: bool = False) -> dict[str, Any]:
    """A run's scores.json, checked against its folder: refused (UsageError with the fix) when it no longer
    describes the episodes, measurements or dataset there, or kept with "_stale" reasons when `allow_stale`."""
    scores_path = run_dir / SCORES
    res = load_json(scores_path, "scores file")
    problems = staleness(run_dir, res)
    if problems and not allow_stale:
        raise stale_error(run_dir, scores_path, problems, "the report would show old scores beside these episodes")
    res["_stale"] = problems
    return res


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _transcript(m: dict[str, Any]) -> str:
    """What the ASR heard of the model in this window (MPE), its SHIFT response (M3) or readback (IFEval)."""
    for block in (m, m.get("response") or {}, m.get("readback") or {}):
        for key in ("transcript", "text"):
            if isinstance(block.get(key), str) and block[key]:
                return block[key]
    return ""


def _speech_s(m: dict[str, Any], spans: list[list[float]]) -> float | None:
    for key in ("speech_s", "window_speech_s", "model_speech_s"):
        if isinstance(m.get(key), int | float):
            return float(m[key])
    return round(sum(b - a for a, b in spans), 3) if spans else None


def _detail(detail_of: Any, m: dict[str, Any], result: dict[str, Any]) -> tuple[str, dict[str, bool]]:
    """The detail behind a window's verdict (its benchmark's `window_detail`): free text (why it failed), each
    metric's outcome when it returns a {metric: passed} dict, or both as a (text, {metric: passed}) pair."""
    if detail_of is None:
        return "", {}
    try:
        got = detail_of(m, result)
    except (KeyError, TypeError, ValueError):
        return "", {}
    if isinstance(got, tuple):
        text, per_metric = got
    elif isinstance(got, dict):
        text, per_metric = "", got
    else:
        text, per_metric = got, {}
    return str(text), {str(k): bool(v) for k, v in per_metric.items()}


def model_spans(measurements: list[dict[str, Any]]) -> list[list[float]]:
    """The model's VAD speech spans the scorer recorded for one episode (M3 keeps them all; MPE and IFEval keep
    those inside their windows), merged where they touch."""
    spans = sorted([float(a), float(b)] for m in measurements for key in ("vad_spans", "spans", "response_spans")
                   for a, b in (m.get(key) or []))
    merged: list[list[float]] = []
    for a, b in spans:
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    return merged


def window_rows(bench: Benchmark, measurements: list[dict[str, Any]], result: dict[str, Any]) -> list[WindowRow]:
    windows_of = bench.function("windows")
    detail_of = bench.function("window_detail") if bench.window_detail else None
    rows = []
    for m in measurements:
        label = str(m.get("label") or m.get("event_type") or m.get("kind") or "?")
        group = " ".join(str(m[k]) for k in FACETS if m.get(k) not in (None, ""))
        if m.get("failed"):
            w = m.get("window") or [None, None]
            rows.append(WindowRow(label, w[0], w[1], "failed", False, None, "", group,
                                  str(m.get("reason") or "the episode failed: counted as a failure")))
            continue
        try:
            got = windows_of([m], result)
        except (KeyError, TypeError, ValueError) as err:
            got, why = [], f"no verdict ({err})"
        else:
            why = "dropped by the rules" if not got else ""
        if not got:
            rows.append(WindowRow(label, None, None, "not scored", False, _speech_s(m, []), _transcript(m), group,
                                  why))
            continue
        a, b, ok, spans = got[0]
        speech = _speech_s(m, spans)
        talked = bool(spans) or bool(speech)
        detail, outcomes = _detail(detail_of, m, result)
        rows.append(WindowRow(label, float(a), float(b), "pass" if ok else "fail", talked, speech, _transcript(m),
                              group, detail, outcomes))
    return rows


def load_run(run_dir: Path, allow_stale: bool = False) -> RunView:
    result = load_scores(run_dir, allow_stale)
    bench = get_benchmark(result["benchmark"])
    name = f"{result['adapter']} ({run_dir.name})" + (" STALE" if result["_stale"] else "")
    run = RunView(run_dir, name, slug(run_dir.name), result, bench)
    by_case: dict[str, list[dict[str, Any]]] = {}
    for m in _read_jsonl(run_dir / MEASUREMENTS):
        by_case.setdefault(str(m["case_id"]), []).append(m)
    health_eps = {}
    if (run_dir / HEALTH).exists():
        try:
            health_eps = json.loads((run_dir / HEALTH).read_text()).get("episodes", {})
        except json.JSONDecodeError:
            health_eps = {}
    failed = {f["case_id"]: f for f in result.get("failed_episodes", [])}
    for rec_path in sorted(run_dir.glob("*.rec.json")):
        case_id = rec_path.name.removesuffix(".rec.json")
        try:
            rec = json.loads(rec_path.read_text())
            status, reason = str(rec.get("status", "?")), str(rec.get("failure") or "")
        except (OSError, json.JSONDecodeError) as err:
            rec, status, reason = None, "unreadable", f"{rec_path.name}: {err}"
        counted = ""
        if case_id in failed:  # failed by the run, or unusable to the scorer: its reason, counted against the model
            f = failed[case_id]
            status, reason = f["status"], f.get("reason") or reason
            counted = (f"counted as failed in {f['windows']} windows" if f.get("windows") is not None
                       else "windows unknown: NOT counted")
        ep = EpisodeView(case_id, slug(case_id), status, reason, rec, run_dir / f"{case_id}.wav", counted=counted,
                         health=health_eps.get(case_id))
        ep.windows = window_rows(bench, by_case.get(case_id, []), result)
        ep.model_spans = model_spans(by_case.get(case_id, []))
        run.episodes.append(ep)
    return run


def load_runs(run_dirs: list[Path], allow_stale: bool = False) -> list[RunView]:
    runs = [load_run(Path(d), allow_stale) for d in run_dirs]
    seen: dict[str, int] = {}
    for run in runs:  # two folders of one name (under different parents) get their own pages
        n = seen.get(run.slug, 0)
        seen[run.slug] = n + 1
        if n:
            run.slug = f"{run.slug}-{n + 1}"
    return runs
