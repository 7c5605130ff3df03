"""HTML of the report's pages: plain tables and links, made sortable and filterable by assets/report.js, with
nothing fetched from anywhere (the pages open from disk)."""

from __future__ import annotations

import json
from html import escape
from importlib import resources
from string import Template
from typing import Any

from eval.report_site.collect import EpisodeView, RunView, WindowRow
from eval.report_site.model import Cell, Table

VERDICTS = ("pass", "fail", "failed", "not scored")


def template(name: str) -> Template:
    return Template(resources.files("eval.report_site").joinpath("templates", name).read_text(encoding="utf-8"))


def page(title: str, body: str, root: str = "") -> str:
    """A whole page; `root` is the relative path from it to the report's top folder ("" or "../../")."""
    return template("page.html").substitute(title=escape(title), body=body, root=root)


def e(x: Any) -> str:
    return escape(str(x), quote=True)


def cell_html(c: Cell, tag: str = "td") -> str:
    attrs = ""
    if c.value is not None:
        attrs += f' data-sort="{c.value!r}" data-value="{c.value!r}"'
    if c.title:
        attrs += f' title="{e(c.title)}"'
    if c.cls:
        attrs += f' class="{e(c.cls)}"'
    text = f'<a href="{e(c.href)}">{e(c.text)}</a>' if c.href else e(c.text)
    main = f'<span class="v">{text}</span>' if c.value is not None else text
    ci = f' <span class="ci">{e(c.ci)}</span>' if c.ci else ""
    count = f' <span class="n">{e(c.count)}</span>' if c.count else ""
    return f"<{tag}{attrs}>{main}{ci}{count}</{tag}>"


def table_html(t: Table) -> str:
    # Headers may break after an underscore (answering_<wbr>window_<wbr>yield): a leaderboard of every metric fits
    # a 1,400 px window without a scroll (report.css: section.board).
    head = "".join(f'<th scope="col">{e(col).replace("_", "_<wbr>")}</th>' for col in t.columns)
    body = "\n".join("<tr>" + "".join(cell_html(c) for c in row) + "</tr>" for row in t.rows)
    note = f'<p class="note">{e(t.note)}</p>' if t.note else ""
    empty = "" if t.rows else '<p class="note">no rows in these scores</p>'
    return (f'<section class="board" id="{e(t.key)}"><h3>{e(t.title)}</h3>{note}'
            f'<div class="scroll"><table class="sortable" data-table="{e(t.key)}"><thead><tr>{head}</tr></thead>'
            f"<tbody>\n{body}\n</tbody></table></div>{empty}</section>")


def kv_table(items: list[tuple[str, Any]], cls: str = "kv") -> str:
    rows = []
    for k, v in items:
        if isinstance(v, dict | list):
            flat = json.dumps(v, ensure_ascii=False)
            v_html = e(flat) if len(flat) <= 160 else f"<pre>{e(json.dumps(v, indent=1, ensure_ascii=False))}</pre>"
        else:
            v_html = e("" if v is None else v)
        rows.append(f"<tr><th>{e(k)}</th><td>{v_html}</td></tr>")
    return f'<table class="{cls}">{"".join(rows)}</table>'


def fmt_s(x: float | None) -> str:
    return "" if x is None else f"{x:.2f}"


def episode_href(run: RunView, ep: EpisodeView, root: str = "") -> str:
    return f"{root}ep/{run.slug}/{ep.slug}.html"


def verdict_cell(w: WindowRow) -> str:
    """The window's verdict; one per metric where it counts toward several (each coloured on its own)."""
    if not w.outcomes:
        cls = {"fail": "bad", "failed": "bad", "pass": "good"}.get(w.verdict, "")
        return f'<td class="{cls}">{e(w.verdict)}</td>'
    items = "".join(f'<span class="{"good" if ok else "bad"}">{e(metric)}: {"pass" if ok else "fail"}</span>'
                    for metric, ok in w.outcomes.items())
    return f'<td class="verdicts">{items}</td>'


def window_row_html(run: RunView, ep: EpisodeView, w: WindowRow, root: str = "", with_episode: bool = True) -> str:
    first = (f'<td>{e(run.name)}</td><td><a href="{e(episode_href(run, ep, root))}">{e(ep.case_id)}</a></td>'
             if with_episode else "")
    start = "" if w.start_s is None else f' data-start="{w.start_s:.3f}"'
    return (f'<tr data-run="{e(run.slug)}" data-bench="{e(run.bench.name)}" data-label="{e(w.label)}" '
            f'data-verdict="{e(" ".join(w.verdicts))}" data-talked="{"yes" if w.talked else "no"}"{start}>'
            f"{first}<td>{e(w.label)}</td><td>{e(w.group)}</td>"
            f'<td data-sort="{w.start_s if w.start_s is not None else -1}">{fmt_s(w.start_s)}–{fmt_s(w.end_s)}</td>'
            + verdict_cell(w) + f'<td>{"yes" if w.talked else "no"}</td>'
            f'<td data-sort="{w.speech_s if w.speech_s is not None else -1}">{fmt_s(w.speech_s)}</td>'
            f'<td class="text">{e(w.transcript)}</td><td class="detail">{e(w.detail)}</td></tr>')


WINDOW_COLUMNS = ("label", "group", "window (s)", "verdict", "model talked", "model speech (s)",
                  "transcript (ASR of the model)", "detail")


def filter_controls(runs: list[RunView], labels: list[str], target: str) -> str:
    def select(key: str, title: str, options: list[tuple[str, str]]) -> str:
        opts = "".join(f'<option value="{e(v)}">{e(t)}</option>' for v, t in options)
        return f'<label>{e(title)} <select data-filter="{key}"><option value="">all</option>{opts}</select></label>'

    benches = sorted({(r.bench.name, r.bench.title) for r in runs})
    return (f'<div class="filters" data-target="{e(target)}">'
            + select("bench", "benchmark", benches)
            + select("run", "run", [(r.slug, r.name) for r in runs])
            + select("label", "label", [(x, x) for x in labels])
            + select("verdict", "verdict", [(v, v) for v in VERDICTS])
            + select("talked", "model talked", [("yes", "yes"), ("no", "no")])
            + '<label>text <input type="search" data-filter="q" placeholder="transcript, case id…"></label>'
            + f' <span class="count" data-count-of="{e(target)}"></span></div>')


def chips(items: list[tuple[str, str]], href_prefix: str = "") -> str:
    """One-click filters: (label, hash) pairs, e.g. ("N2 · model talked", "label=N2&talked=yes")."""
    return '<p class="chips">' + " ".join(
        f'<a class="chip" href="{e(href_prefix)}#{e(h)}">{e(t)}</a>' for t, h in items) + "</p>"


def quick_filters(runs: list[RunView]) -> list[tuple[str, str]]:
    """Per benchmark and window label: the windows the model talked in, and the windows it failed."""
    out = []
    for bench in sorted({r.bench.name for r in runs}):
        labels = sorted({w.label for r in runs if r.bench.name == bench for ep in r.episodes for w in ep.windows})
        for label in labels:
            out.append((f"{label} · model talked", f"bench={bench}&label={label}&talked=yes"))
            out.append((f"{label} · failed", f"bench={bench}&label={label}&verdict=fail"))
    return out


def figure_data(run: RunView, ep: EpisodeView, media: dict[str, Any]) -> dict[str, Any]:
    rec = ep.rec or {}
    return {"dur": media.get("seconds") or rec.get("duration_s"), "hop": media.get("hop_s"),
            "env": media.get("env", []),
            "user": [[t["start_s"], t["end_s"], t["label"], t.get("text", "")] for t in rec.get("timeline", [])],
            "model": ep.model_spans,
            "win": [[w.start_s, w.end_s, "mixed" if len(w.verdicts) > 1 else w.verdict, w.label]
                    for w in ep.windows if w.start_s is not None]}


def conversation(ep: EpisodeView) -> str:
    """The episode as a time-ordered table: the user's turns (rec.json timeline, with the script's words where the
    run recorded them), the ASR of the model in each scored window, the model's own text (joined per second), and
    its adapter's notes (`Frame.note`); "" when there is none of it."""
    rec = ep.rec or {}
    rows: list[tuple[float, int, str, str, str, str]] = []  # start, order, who, label, times, text
    for t in rec.get("timeline") or []:
        rows.append((float(t.get("start_s") or 0.0), 0, "user", str(t.get("label", "")),
                     f"{fmt_s(t.get('start_s'))}–{fmt_s(t.get('end_s'))}", str(t.get("text") or "")))
    for w in ep.windows:
        if w.transcript and w.start_s is not None:
            rows.append((w.start_s, 1, "model (ASR, as scored)", w.label, f"{fmt_s(w.start_s)}–{fmt_s(w.end_s)}",
                         w.transcript))
    pieces: dict[int, list[Any]] = {}
    for x in rec.get("model_text") or []:
        if isinstance(x, list | tuple) and len(x) > 1 and isinstance(x[0], int | float):
            pieces.setdefault(int(x[0]), [float(x[0]), ""])[1] += str(x[1])
    rows += [(t, 2, "model (its own text)", "", fmt_s(t), text) for t, text in pieces.values()]
    for x in rec.get("notes") or []:
        if isinstance(x, list | tuple) and len(x) > 1 and isinstance(x[0], int | float):
            rows.append((float(x[0]), 3, "adapter note", "", fmt_s(float(x[0])), str(x[1])))
    if not rows:
        return ""
    rows.sort(key=lambda r: (r[0], r[1]))
    body = "".join(f'<tr class="who-{e(who.split()[0])}" data-start="{t:.3f}"><td>{e(times)}</td><td>{e(who)}</td>'
                   f'<td>{e(label)}</td><td class="text">{e(text)}</td></tr>' for t, _, who, label, times, text in rows)
    return ('<div class="scroll"><table class="said" id="said"><thead><tr><th>time (s)</th><th>who</th><th>label</th>'
            f"<th>text</th></tr></thead><tbody>{body}</tbody></table></div>")


def script_json(obj: Any) -> str:
    """JSON safe inside a <script> element."""
    return json.dumps(obj, separators=(",", ":")).replace("</", "<\\/")
