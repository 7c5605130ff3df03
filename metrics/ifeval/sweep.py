"""The threshold sweep (docs/benchmarks/ifeval.md, App. E.7): IAS under 180 verifier configurations, recomputed from
stored measurements (no model, VAD or ASR), and Kendall's tau of the Entailment-Gap ranking of several runs under each
configuration against the ranking under the default thresholds.

Gaps are ranked and compared as exact fractions (`aggregate.entailment_gap`), so two runs with equal gaps over
different case counts tie; the result holds them as floats for printing and storing.

A configuration sets one value per swept threshold for every case of its action (role overrides included);
the default ranking is the one scores.json reports, with each case's own thresholds.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any

from dataset_builder.errors import UsageError
from dataset_builder.ifeval.schema import BENCHMARK
from metrics.ifeval.aggregate import entailment_gap
from metrics.ifeval.verdicts import Thresholds, passes
from metrics.stats import summarise

GRID: dict[str, tuple[float, ...]] = {
    "take_turn_max_wait_s": (1.5, 2.0, 2.5),
    "yield_max_latency_ms": (200.0, 400.0, 600.0, 1000.0, 1500.0),
    "interrupt_max_latency_ms": (1000.0, 1500.0, 2000.0),
    "bc_ceiling_s": (0.6, 0.8, 1.0, 1.2),
}


def configurations() -> list[Thresholds]:
    """The 3 x 5 x 3 x 4 = 180 configurations, in grid order."""
    return [Thresholds(**dict(zip(GRID, values, strict=True))) for values in itertools.product(*GRID.values())]


Number = float | Fraction


def _sign(x: Number) -> int:
    return int(x > 0) - int(x < 0)


def kendall_tau(x: Sequence[Number], y: Sequence[Number]) -> float | None:
    """Kendall's tau-b of two equally long sequences (ties handled: exact only for exact values, such as
    Fractions); None when either is constant or n < 2."""
    if len(x) != len(y):
        raise ValueError(f"need sequences of one length, got {len(x)} and {len(y)}")
    concordant = discordant = ties_x = ties_y = 0
    for i, j in itertools.combinations(range(len(x)), 2):
        sx, sy = _sign(x[i] - x[j]), _sign(y[i] - y[j])
        if sx == 0 and sy == 0:
            continue
        if sx == 0:
            ties_x += 1
        elif sy == 0:
            ties_y += 1
        elif sx == sy:
            concordant += 1
        else:
            discordant += 1
    denom = math.sqrt((concordant + discordant + ties_x) * (concordant + discordant + ties_y))
    return None if denom == 0 else (concordant - discordant) / denom


def _order(gaps: dict[str, Number]) -> list[str]:
    """Run names by gap, largest first; equal gaps by name."""
    return sorted(gaps, key=lambda name: (-gaps[name], name))


def _floats(gaps: dict[str, Fraction]) -> dict[str, float]:
    return {n: float(g) for n, g in gaps.items()}


def _gaps(runs: dict[str, list[dict[str, Any]]], th: Thresholds) -> dict[str, Fraction]:
    gaps = {name: entailment_gap(ms, th) for name, ms in runs.items()}
    missing = sorted(n for n, g in gaps.items() if g is None)
    if missing:
        raise UsageError(f"--sweep: {', '.join(missing)} scored no L1 or no L2 case, so it has no Entailment Gap")
    return gaps  # type: ignore[return-value]


def sweep(runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """IAS and Entailment Gap of every run under every configuration, and tau against the default ranking."""
    default = _gaps(runs, Thresholds())
    names = sorted(runs)
    base, base_order = [default[n] for n in names], _order(default)
    rows = []
    for th in configurations():
        gaps = _gaps(runs, th)  # a run with L1 and L2 cases has both under every configuration
        order = _order(gaps)
        ias = {n: summarise(passes(m, th) for m in runs[n])["value"] for n in names}
        rows.append({"thresholds": th.applied(), "entailment_gap": _floats(gaps), "ias": ias,
                     "tau": kendall_tau(base, [gaps[n] for n in names]),
                     "top1_kept": order[:1] == base_order[:1], "order_kept": order == base_order,
                     "order": order})
    taus = [r["tau"] for r in rows if r["tau"] is not None]
    summary = {"n_configs": len(rows), "n_runs": len(names), "n_tau": len(taus),
               "mean": statistics.fmean(taus) if taus else None, "median": statistics.median(taus) if taus else None,
               "min": min(taus) if taus else None, "max": max(taus) if taus else None,
               "top1_kept": sum(r["top1_kept"] for r in rows) / len(rows),
               "order_kept": sum(r["order_kept"] for r in rows) / len(rows)}
    return {"default_entailment_gap": _floats(default), "default_order": base_order, "configs": rows,
            "summary": summary}


def load_runs(run_dirs: Sequence[Path]) -> dict[str, list[dict[str, Any]]]:
    """Each run's stored measurements, refused (UsageError with the fix) when stale or not a DSB-IFEval run;
    runs are named by adapter and folder."""
    from metrics.freshness import load_reusable

    out: dict[str, list[dict[str, Any]]] = {}
    for run_dir in run_dirs:
        meta, measurements, _ = load_reusable(Path(run_dir))
        if meta.get("benchmark") != BENCHMARK:
            raise UsageError(f"--sweep: {run_dir} is a {meta.get('benchmark')!r} run; the threshold sweep is "
                             f"defined for DSB-IFEval runs (docs/benchmarks/ifeval.md)")
        name = f"{meta.get('adapter')} ({Path(run_dir).name})"
        out[name if name not in out else f"{meta.get('adapter')} ({run_dir})"] = measurements
    return out


def sweep_text(result: dict[str, Any], worst: int = 5) -> str:
    """What `duplex-eval score ... --sweep` prints: the default ranking, tau over the 180 configurations, and
    the configurations that disagree most."""
    s = result["summary"]
    lines = [f"threshold sweep: {s['n_configs']} configurations x {s['n_runs']} runs (IAS recomputed from stored "
             "measurements)",
             "default Entailment Gap ranking: " + ", ".join(
                 f"{n} {result['default_entailment_gap'][n]:+.3f}" for n in result["default_order"])]
    if not s["n_tau"]:
        lines.append("Kendall's tau: undefined (needs at least two runs whose Entailment Gaps differ)")
        return "\n".join(lines)
    lines.append(f"Kendall's tau vs default: mean {s['mean']:.3f}, median {s['median']:.3f}, min {s['min']:.3f}, "
                 f"max {s['max']:.3f} over {s['n_tau']} configurations; top-1 kept in {s['top1_kept']:.0%}, "
                 f"full order kept in {s['order_kept']:.0%}")
    rows = sorted((r for r in result["configs"] if r["tau"] is not None), key=lambda r: r["tau"])[:worst]
    for r in rows:
        t = r["thresholds"]
        lines.append(f"  tau {r['tau']:+.3f} at take_turn {t['take_turn_max_wait_s']:g} s, yield "
                     f"{t['yield_max_latency_ms']:g} ms, interrupt {t['interrupt_max_latency_ms']:g} ms, "
                     f"backchannel {t['bc_ceiling_s']:g} s: " + ", ".join(r["order"]))
    return "\n".join(lines)


def sweep_runs(run_dirs: Sequence[Path]) -> str:
    return sweep_text(sweep(load_runs(run_dirs)))
