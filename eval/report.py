"""HTML report: score tables per run, and per-episode timeline plots with the audio behind them.

People look before they read: each plot shows both channels, the realised user clips by label, the model's
VAD spans and each scored window coloured by its verdict. Runs of the same benchmark are also shown side by
side; tables come from the benchmark's own `tables` function (SPEC §11).
"""

from __future__ import annotations

import html
import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from dataset_builder.atomic import atomic_write_text
from dataset_builder.audio import read_wav
from dataset_builder.benchmarks import get_benchmark
from dataset_builder.episode import Episode
from metrics.freshness import SCORES, load_json, stale_error, staleness
from metrics.scoring import result_tables
from metrics.tables import provenance

LABEL_COLOURS = {"PRE": "#bbbbbb", "T": "#1f77b4", "N1": "#9467bd", "N2": "#8c564b", "N3": "#7f7f7f",
                 "N4Q": "#ff7f0e", "N4R": "#d62728"}

Window = tuple[float, float, bool, list[list[float]]]


def plot_episode(ep: Episode, wav: Path, windows: list[Window], png: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    audio, sr = read_wav(wav)
    hop = sr // 100
    n = len(audio) // hop
    env = np.abs(audio[: n * hop]).reshape(n, hop, 2).max(axis=1)
    t = np.arange(n) / 100
    fig, ax = plt.subplots(2, 1, figsize=(14, 3.6), sharex=True)
    for k, name in enumerate(("user (ch0)", "model (ch1)")):
        ax[k].fill_between(t, -env[:, k], env[:, k], color="#444444", lw=0)
        ax[k].set_ylabel(name)
        ax[k].set_yticks([])
    for ev in ep.timeline:
        ax[0].axvspan(ev.start_s, ev.end_s, color=LABEL_COLOURS.get(ev.label, "#cccccc"), alpha=0.3)
        ax[0].text(ev.start_s, 0.9, ev.label, fontsize=7, va="top")
    for a, b, ok, spans in windows:
        ax[1].axvspan(a, b, color="#2ca02c" if ok else "#d62728", alpha=0.15)
        for s in spans:
            ax[1].plot(s, [0.8, 0.8], color="#1f77b4", lw=3)
    ax[1].set_xlabel("seconds")
    fig.suptitle(f"{ep.case_id} — {ep.adapter.get('name')} — {ep.status}", fontsize=9)
    fig.tight_layout()
    png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png, dpi=80)
    plt.close(fig)


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


def _run_section(run_dir: Path, name: str, res: dict[str, Any], out: Path, max_plots: int) -> str:
    bench = get_benchmark(res["benchmark"])
    windows_of = bench.function("windows")
    mpath = run_dir / "measurements.jsonl"
    measurements = [json.loads(x) for x in mpath.read_text().splitlines() if x] if mpath.exists() else []
    by_case: dict[str, list[dict[str, Any]]] = {}
    for m in measurements:
        by_case.setdefault(m["case_id"], []).append(m)
    failed = {f["case_id"]: f for f in res.get("failed_episodes", [])}
    items = []
    for i, rec in enumerate(sorted(run_dir.glob("*.rec.json"))):
        case_id = rec.name.removesuffix(".rec.json")
        wav = run_dir / f"{case_id}.wav"
        link = f'<a href="{html.escape(os.path.relpath(wav, out))}">{html.escape(case_id)}</a>'
        if case_id in failed:  # failed or unusable: its reason, counted against the model, no plot
            f = failed[case_id]
            counted = (f"counted as failed in {f['windows']} windows" if f.get("windows") is not None
                       else "windows unknown: NOT counted")
            items.append(f"<li>{link} <b>{html.escape(f['status'])}:</b> {html.escape(f['reason'] or '')} "
                         f"({counted})</li>")
            continue
        try:
            ep = Episode.load(rec)
        except ValueError as err:
            items.append(f"<li>{html.escape(rec.name)} <b>unreadable:</b> {html.escape(str(err))}</li>")
            continue
        ok_windows = [m for m in by_case.get(case_id, []) if not m.get("failed")]
        windows = windows_of(ok_windows, res)
        verdicts = ", ".join(f"{m['label']}:{'ok' if ok else 'FAIL'}"
                             for m, (_, _, ok, _) in zip(ok_windows, windows, strict=False))
        img = ""
        if i < max_plots and ep.status == "ok" and wav.exists():
            png = out / "plots" / run_dir.name / f"{case_id}.png"
            try:
                plot_episode(ep, wav, windows, png)
                img = f'<br><img src="{html.escape(os.path.relpath(png, out))}" width="100%">'
            except (RuntimeError, ValueError, IndexError) as err:  # the recording changed since scoring
                img = f"<br><b>no plot:</b> {html.escape(f'{wav.name}: {err}')}"
        items.append(f"<li>{link} {html.escape(verdicts)}{img}</li>")
    health = "".join(f"<li>{html.escape(f)}</li>" for f in res.get("health", {}).get("flags", []))
    health_html = f"<div class='health'><b>Run health</b><ul>{health}</ul></div>" if health else ""
    stale = "".join(f"<p class='stale'><b>STALE:</b> {html.escape(w)}</p>" for w in res.get("_stale", []))
    text = "\n\n".join(f"-- {title}\n{body}" for title, body in result_tables({name: res}))
    scores_link = html.escape(os.path.relpath(run_dir / "scores.json", out))
    return (f"<h2>{html.escape(name)}</h2>{stale}{health_html}<pre>{html.escape(text)}\n\n"
            f"{html.escape(provenance(res))}</pre><p><a href=\"{scores_link}\">scores.json</a></p>"
            f"<details><summary>episodes</summary><ul>{''.join(items)}</ul></details>")


def write_report(run_dirs: list[Path], out: Path, max_plots: int = 40, allow_stale: bool = False) -> Path:
    """The report of these runs; a run whose scores no longer match its folder is refused (UsageError naming
    the fix), or with `allow_stale` shown under a STALE banner and marked STALE in the side-by-side tables."""
    out.mkdir(parents=True, exist_ok=True)
    by_bench: dict[str, dict[str, dict[str, Any]]] = {}
    sections = []
    for run_dir in run_dirs:
        res = load_scores(run_dir, allow_stale=allow_stale)
        name = f"{res['adapter']} ({run_dir.name})" + (" STALE" if res["_stale"] else "")
        by_bench.setdefault(res["benchmark"], {})[name] = res
        sections.append(_run_section(run_dir, name, res, out, max_plots))
    side = "".join(
        f"<h2>{html.escape(get_benchmark(b).title)}, side by side</h2><pre>"
        + html.escape("\n\n".join(f"-- {t}\n{body}" for t, body in result_tables(results))) + "</pre>"
        for b, results in by_bench.items())
    body = f"<h1>duplex-eval report</h1>{side}{''.join(sections)}"
    page = out / "index.html"
    atomic_write_text(page, f"<!doctype html><meta charset='utf-8'><title>duplex-eval</title>{body}")
    return page
