"""HTML report: score tables per run, and per-episode timeline plots with the audio behind them.

People look before they read: each plot shows both channels, the realised user clips by label, the model's
VAD spans and each scored window coloured by its verdict.
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
from dataset_builder.episode import Episode
from eval.tables import paired_line, provenance, side_by_side
from metrics.mpe.verdicts import Thresholds, outcomes

LABEL_COLOURS = {"PRE": "#bbbbbb", "T": "#1f77b4", "N1": "#9467bd", "N2": "#8c564b", "N3": "#7f7f7f",
                 "N4Q": "#ff7f0e", "N4R": "#d62728"}


def plot_episode(ep: Episode, wav: Path, windows: list[dict[str, Any]], th: Thresholds, png: Path) -> None:
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
    for w in windows:
        ok = all(outcomes(w, th).values())
        a, b = (w["t_end_s"], w["t_end_s"] + th.t_onset_window_s) if w["kind"] == "T" else (
            w["window"] if w["kind"] == "silence" else (w["q_end_s"], w["r_end_s"]))
        ax[1].axvspan(a, b, color="#2ca02c" if ok else "#d62728", alpha=0.15)
        for s in w.get("response_spans", []) + w.get("spans", []):
            ax[1].plot(s, [0.8, 0.8], color="#1f77b4", lw=3)
    ax[1].set_xlabel("seconds")
    fig.suptitle(f"{ep.case_id} — {ep.adapter.get('name')} — {ep.status}", fontsize=9)
    fig.tight_layout()
    png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png, dpi=80)
    plt.close(fig)


def write_report(run_dirs: list[Path], out: Path, max_plots: int = 40) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    results = {}
    sections = []
    for run_dir in run_dirs:
        scores_path = run_dir / "scores.json"
        if not scores_path.exists():
            raise FileNotFoundError(f"{scores_path} missing: run `duplex-eval score {run_dir}` first")
        res = json.loads(scores_path.read_text())
        name = f"{res['adapter']} ({run_dir.name})"
        results[name] = res
        th = Thresholds(**res["thresholds"])
        measurements = [json.loads(x) for x in (run_dir / "measurements.jsonl").read_text().splitlines() if x]
        by_case: dict[str, list[dict[str, Any]]] = {}
        for m in measurements:
            by_case.setdefault(m["case_id"], []).append(m)
        items = []
        for i, rec in enumerate(sorted(run_dir.glob("*.rec.json"))):
            ep = Episode.load(rec)
            wav = run_dir / f"{ep.case_id}.wav"
            rel_wav = os.path.relpath(wav, out)
            verdicts = ", ".join(f"{w['label']}:{'ok' if all(outcomes(w, th).values()) else 'FAIL'}"
                                 for w in by_case.get(ep.case_id, []))
            img = ""
            if i < max_plots and ep.status == "ok":
                png = out / "plots" / run_dir.name / f"{ep.case_id}.png"
                plot_episode(ep, wav, by_case.get(ep.case_id, []), th, png)
                img = f'<br><img src="{html.escape(os.path.relpath(png, out))}" width="100%">'
            failure = f" <b>failed:</b> {html.escape(ep.failure or '')}" if ep.status != "ok" else ""
            items.append(f'<li><a href="{html.escape(rel_wav)}">{ep.case_id}</a> {html.escape(verdicts)}'
                         f"{failure}{img}</li>")
        by_cond = "".join(f"\n-- {cond}\n{side_by_side({name: res}, 'by_condition', cond)}"
                          for cond in res["by_condition"])
        scores_link = html.escape(os.path.relpath(scores_path, out))
        sections.append(f"<h2>{html.escape(name)}</h2><pre>{html.escape(side_by_side({name: res}))}\n"
                        f"{html.escape(by_cond)}\n\n{html.escape(paired_line(res))}\n"
                        f"{html.escape(provenance(res))}</pre><p><a href=\"{scores_link}\">scores.json</a></p>"
                        f"<details><summary>episodes</summary><ul>{''.join(items)}</ul></details>")
    body = (f"<h1>duplex-eval report</h1><h2>Duplex-MPE, side by side</h2>"
            f"<pre>{html.escape(side_by_side(results))}</pre>{''.join(sections)}")
    page = out / "index.html"
    atomic_write_text(page, f"<!doctype html><meta charset='utf-8'><title>duplex-eval</title>{body}")
    return page
