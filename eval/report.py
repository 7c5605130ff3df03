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
from dataset_builder.errors import UsageError
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


def load_scores(run_dir: Path) -> dict[str, Any]:
    scores_path = run_dir / "scores.json"
    if not scores_path.exists():
        raise UsageError(f"{scores_path} missing: run `duplex-eval score {run_dir}` first")
    return json.loads(scores_path.read_text())


def _run_section(run_dir: Path, name: str, res: dict[str, Any], out: Path, max_plots: int) -> str:
    bench = get_benchmark(res["benchmark"])
    windows_of = bench.function("windows")
    mpath = run_dir / "measurements.jsonl"
    measurements = [json.loads(x) for x in mpath.read_text().splitlines() if x] if mpath.exists() else []
    by_case: dict[str, list[dict[str, Any]]] = {}
    for m in measurements:
        by_case.setdefault(m["case_id"], []).append(m)
    items = []
    for i, rec in enumerate(sorted(run_dir.glob("*.rec.json"))):
        try:
            ep = Episode.load(rec)
        except ValueError as err:
            items.append(f"<li>{html.escape(rec.name)} <b>unreadable:</b> {html.escape(str(err))}</li>")
            continue
        wav = run_dir / f"{ep.case_id}.wav"
        windows = windows_of(by_case.get(ep.case_id, []), res)
        verdicts = ", ".join(f"{m['label']}:{'ok' if ok else 'FAIL'}"
                             for m, (_, _, ok, _) in zip(by_case.get(ep.case_id, []), windows, strict=False))
        img = ""
        if i < max_plots and ep.status == "ok" and wav.exists():
            png = out / "plots" / run_dir.name / f"{ep.case_id}.png"
            plot_episode(ep, wav, windows, png)
            img = f'<br><img src="{html.escape(os.path.relpath(png, out))}" width="100%">'
        failure = f" <b>failed:</b> {html.escape(ep.failure or '')}" if ep.status != "ok" else ""
        items.append(f'<li><a href="{html.escape(os.path.relpath(wav, out))}">{ep.case_id}</a> '
                     f"{html.escape(verdicts)}{failure}{img}</li>")
    health = "".join(f"<li>{html.escape(f)}</li>" for f in res.get("health", {}).get("flags", []))
    health_html = f"<div class='health'><b>Run health</b><ul>{health}</ul></div>" if health else ""
    stale = "".join(f"<p class='stale'><b>STALE:</b> {html.escape(w)}</p>" for w in res.get("_stale", []))
    text = "\n\n".join(f"-- {title}\n{body}" for title, body in result_tables({name: res}))
    scores_link = html.escape(os.path.relpath(run_dir / "scores.json", out))
    return (f"<h2>{html.escape(name)}</h2>{stale}{health_html}<pre>{html.escape(text)}\n\n"
            f"{html.escape(provenance(res))}</pre><p><a href=\"{scores_link}\">scores.json</a></p>"
            f"<details><summary>episodes</summary><ul>{''.join(items)}</ul></details>")


def write_report(run_dirs: list[Path], out: Path, max_plots: int = 40) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    by_bench: dict[str, dict[str, dict[str, Any]]] = {}
    sections = []
    for run_dir in run_dirs:
        res = load_scores(run_dir)
        name = f"{res['adapter']} ({run_dir.name})"
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
