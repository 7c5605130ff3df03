"""`duplex-eval report RUN_DIR... --out report/`: a static site that opens from disk, with no server and no
network.

    report/index.html            a leaderboard per benchmark across the runs, its breakdowns, each run's health,
                                 live-feasibility and failed/skipped episodes, and what produced the numbers
    report/episodes.html         every scored window of every episode, filterable in one click by benchmark, run,
                                 label, verdict and whether the model talked; every episode with its status
    report/ep/<run>/<case>.html  one page per episode: timeline figure, 2-channel audio, windows with transcripts,
                                 gold, step times, health numbers, parameters
    report/media/<sha>.ogg       each distinct recording as stereo Opus (ch0 user left, ch1 model right)
    report/summary.md            the same tables in Markdown
    report/assets/               the stylesheet and script every page shares
"""

from __future__ import annotations

import json
import time
from html import escape
from importlib import resources
from pathlib import Path
from typing import Any

from dataset_builder.atomic import atomic_write_bytes, atomic_write_text
from eval.report_site import pages as P
from eval.report_site.boards import tables_for
from eval.report_site.collect import EpisodeView, RunView, load_runs
from eval.report_site.markdown import summary
from eval.report_site.media import DEFAULT_KBPS, Media
from eval.report_site.model import Cell, Table, name

ASSETS = ("report.css", "report.js")


def _e(x: Any) -> str:
    return escape(str(x), quote=True)


def _tts(run: RunView) -> str:
    rec = run.first_rec()
    return str((rec.get("params") or {}).get("tts_backend") or "not recorded")


def _judge(result: dict[str, Any]) -> str:
    judge = result.get("judge") or {}
    if isinstance(judge, str):
        return judge
    return f"{judge.get('name')} ({'heuristic' if judge.get('heuristic') else 'model'})"


def feasibility(run: RunView) -> dict[str, Any] | None:
    """The run's live-feasibility block as `score` wrote it, else computed from the episodes' step times; None
    when neither exists (a run recorded before steps were timed)."""
    for key in ("feasibility", "live_feasibility", "live"):
        if isinstance(run.result.get(key), dict):
            return dict(run.result[key])
    if not any((ep.rec or {}).get("compute") for ep in run.episodes):
        return None
    try:
        from dataset_builder.episode import Episode
        from metrics.feasibility import run_feasibility
    except ImportError:
        return None
    eps = []
    for ep in run.episodes:
        try:
            eps.append(Episode.from_dict(ep.rec or {}))
        except (ValueError, TypeError):
            continue
    return run_feasibility(eps)


def feasibility_text(feas: dict[str, Any]) -> list[str]:
    try:
        from metrics.feasibility import feasibility_lines

        return feasibility_lines(feas)
    except (ImportError, KeyError, TypeError):
        return [json.dumps(feas)]


def provenance(run: RunView) -> list[tuple[str, Any]]:
    r, rec = run.result, run.first_rec()
    params = rec.get("params") or {}
    info = r.get("adapter_info") or {}
    skipped = sum(1 for ep in run.episodes if ep.status == "skipped")
    items: list[tuple[str, Any]] = [
        ("benchmark", f"{run.bench.title} ({run.bench.name})"), ("config", r.get("config")),
        ("adapter", f"{info.get('name', r.get('adapter'))} v{info.get('version', '?')}"
                    + (f", capabilities: {', '.join(info['capabilities'])}" if info.get("capabilities") else "")),
        ("adapter audio", f"{info.get('sample_rate', '?')} Hz, frame {info.get('frame_size', '?')} samples"),
        ("episodes", f"{r.get('n_episodes')} scored, {r.get('n_failed', 0)} failed, {skipped} skipped"),
        ("coverage", _coverage(r)["text"]),
        ("dataset", f"{r.get('dataset')} ({r.get('n_dataset_cases')} cases, fingerprint "
                    f"{str(r.get('dataset_fingerprint'))[:12]})"),
        ("ASR", r.get("asr")), ("judge", _judge(r)), ("TTS (user speech)", _tts(run)),
        ("thresholds", r.get("thresholds")), ("overrides", r.get("overrides") or "none")]
    if r.get("rules"):
        items.append(("rules", r["rules"]))
    items += [("VAD", params.get("vad")), ("protocol", params.get("protocol")),
              ("harness version", params.get("harness_version")), ("seed", rec.get("seed")),
              ("scores file", r.get("scores_file") or str(run.dir / "scores.json"))]
    return items


def _coverage(result: dict[str, Any]) -> dict[str, Any]:
    """"k of n cases" and whether the run is partial (`metrics.tables.coverage_of`)."""
    from metrics.tables import coverage_of

    return coverage_of(result)


def provenance_line(run: RunView) -> str:
    r = run.result
    return (f"{run.name}: {run.bench.title} config {r.get('config')}, adapter {r.get('adapter')}, "
            f"covers {_coverage(r)['text']}, ASR {r.get('asr')}, "
            f"judge {_judge(r)}, TTS {_tts(run)}, thresholds {json.dumps(r.get('thresholds'))}"
            + (f", rules {r['rules'].get('name')}" if isinstance(r.get("rules"), dict) else ""))


# ---- index.html ------------------------------------------------------------------------------------------------

def _runs_table(runs: list[RunView]) -> Table:
    t = Table("runs", "Runs", ["run", "benchmark", "config", "adapter", "cases", "ok", "failed", "skipped",
                               "health flags", "live feasibility", "ASR", "judge", "TTS"])
    for run in runs:
        r = run.result
        counts = {s: sum(1 for ep in run.episodes if ep.status == s) for s in ("ok", "skipped")}
        flags = len((r.get("health") or {}).get("flags", []))
        feas = feasibility(run)
        live = ("not recorded" if feas is None or feas.get("live") is None
                else "could hold a live call" if feas["live"] else "could NOT hold a live call")
        cov = _coverage(r)
        cases = f"{cov['n_cases']} of {cov['n_dataset_cases'] or '?'}" + (" PARTIAL" if cov["partial"] else "")
        t.add([name(run.name, f"#run-{run.slug}"), name(run.bench.title), name(r.get("config")),
               name(r.get("adapter")), Cell(cases, float(cov["n_cases"]), cls="bad" if cov["partial"] else ""),
               Cell(str(counts["ok"]), float(counts["ok"])),
               Cell(str(r.get("n_failed", 0)), float(r.get("n_failed", 0))),
               Cell(str(counts["skipped"]), float(counts["skipped"])),
               Cell(str(flags), float(flags), cls="bad" if flags else ""),
               Cell(live, cls="bad" if feas is not None and feas.get("live") is False else ""), name(r.get("asr")),
               name(_judge(r)), name(_tts(run))])
    return t


def _run_section(run: RunView, out: Path) -> str:
    parts = [f'<section class="run" id="run-{_e(run.slug)}"><h3>{_e(run.name)}</h3>']
    parts += [f"<p class='stale'><b>STALE:</b> {_e(w)}</p>" for w in run.stale]
    cov = _coverage(run.result)
    if cov["partial"]:  # every number below covers only these cases
        parts.append(f"<p class='stale'><b>PARTIAL:</b> the scores cover {_e(cov['text'])}</p>")
    else:
        parts.append(f"<p>Covers {_e(cov['text'])}.</p>")
    flags = (run.result.get("health") or {}).get("flags", [])
    if flags:
        parts.append("<div class='health'><b>Run health</b><ul>" + "".join(f"<li>{_e(f)}</li>" for f in flags)
                     + "</ul></div>")
    else:
        parts.append("<div class='health ok'><b>Run health</b>: no flags (model speech found, no clipping, DC "
                     "offset, constant output or wordless speech)</div>")
    feas = feasibility(run)
    if feas is not None:
        parts.append("<div class='feas'><b>Live feasibility</b> (step compute time against the frame duration)<ul>"
                     + "".join(f"<li>{_e(x)}</li>" for x in feasibility_text(feas)) + "</ul></div>")
    bad = [ep for ep in run.episodes if ep.status != "ok"]
    if bad:
        items = []
        for ep in bad:
            counted = f" ({ep.counted})" if ep.counted else ""
            items.append(f'<li><a href="{_e(P.episode_href(run, ep))}">{_e(ep.case_id)}</a> '
                         f"<b>{_e(ep.status)}:</b> {_e(ep.reason)}{_e(counted)}</li>")
        parts.append(f"<p><b>Failed and skipped episodes ({len(bad)})</b></p><ul class='bad'>{''.join(items)}</ul>")
    parts.append(f'<p><a href="episodes.html#run={_e(run.slug)}">windows of this run</a> · '
                 f'<a href="{_e(scores_href(run))}">scores.json</a> (a copy; the run\'s own is '
                 f"<code>{_e(run.dir / 'scores.json')}</code>)</p>")
    parts.append("<details><summary>what produced these numbers</summary>" + P.kv_table(provenance(run))
                 + "</details></section>")
    return "".join(parts)


def scores_href(run: RunView) -> str:
    """Where the report keeps its copy of a run's scores.json: inside its own folder, so a copied report keeps
    every link."""
    return f"runs/{run.slug}/scores.json"


def _text_tables(runs: list[RunView]) -> str:
    from metrics.scoring import result_tables

    try:
        text = "\n\n".join(f"-- {t}\n{body}" for t, body in result_tables({r.name: r.result for r in runs}))
    except (KeyError, TypeError, ValueError) as err:
        text = f"(no text tables: {err})"
    return ("<details><summary>the same scores as plain text, as <code>duplex-eval score</code> prints them"
            f"</summary><pre class='text'>{_e(text)}</pre></details>")


def index_html(runs: list[RunView], groups: list[tuple[str, list[RunView], list[Table]]], out: Path,
               seconds: float) -> str:
    nav = " ".join(f'<a href="#bench-{_e(rs[0].bench.name)}">{_e(title)}</a>' for title, rs, _ in groups)
    body = [f"<h1>duplex-eval report</h1><nav class='top'>{nav} <a href='#runs'>Runs</a> "
            "<a href='episodes.html'>Episodes and windows</a> <a href='summary.md'>summary.md</a></nav>",
            f"<p class='note'>{len(runs)} runs, {sum(len(r.episodes) for r in runs)} episodes; written "
            f"{time.strftime('%Y-%m-%d %H:%M')} in {seconds:.0f} s. Every number comes from the run's scores.json; "
            "click a column header to sort.</p>"]
    chips = P.quick_filters(runs)
    for title, rs, tables in groups:
        bench = rs[0].bench.name
        body.append(f'<h2 id="bench-{_e(bench)}">{_e(title)}</h2>')
        for run in rs:
            body += [f"<p class='stale'><b>STALE:</b> {_e(run.name)}: {_e(w)}</p>" for w in run.stale]
            flags = (run.result.get("health") or {}).get("flags", [])
            if flags:
                body.append(f"<p class='note'>health: {_e(run.name)} has {len(flags)} run-health flag(s): "
                            f'<a href="#run-{_e(run.slug)}">see the run</a></p>')
        body.append(P.table_html(tables[0]))
        mine = [c for c in chips if c[1].startswith(f"bench={bench}&")]
        if mine:
            body.append("<p class='note'>Windows, in one click:</p>" + P.chips(mine, "episodes.html"))
        if len(tables) > 1:
            body.append("<h3>Breakdowns</h3>" + "".join(P.table_html(t) for t in tables[1:]))
        body.append(_text_tables(rs))
    body.append("<h2 id='runs'>Runs</h2>" + P.table_html(_runs_table(runs)))
    body += [_run_section(run, out) for run in runs]
    return P.page("duplex-eval report", "\n".join(body))


# ---- episodes.html ---------------------------------------------------------------------------------------------

def episodes_html(runs: list[RunView]) -> str:
    labels = sorted({w.label for r in runs for ep in r.episodes for w in ep.windows})
    head = "".join(f"<th>{_e(c)}</th>" for c in ("run", "episode", *P.WINDOW_COLUMNS))
    rows = "\n".join(P.window_row_html(run, ep, w) for run in runs for ep in run.episodes for w in ep.windows)
    controls = P.filter_controls(runs, labels, "windows").replace('class="filters"', 'class="filters" data-hash')
    ep_rows = []
    for run in runs:
        for ep in run.episodes:
            dur = (ep.rec or {}).get("duration_s")
            failed = sum(1 for w in ep.windows if w.verdict in ("fail", "failed"))
            talked = sum(1 for w in ep.windows if w.talked)
            cls = "" if ep.status == "ok" else " class='bad'"
            ep_rows.append(
                f'<tr data-run="{_e(run.slug)}" data-bench="{_e(run.bench.name)}" data-status="{_e(ep.status)}">'
                f"<td>{_e(run.name)}</td><td><a href=\"{_e(P.episode_href(run, ep))}\">{_e(ep.case_id)}</a></td>"
                f"<td{cls}>{_e(ep.status)}</td><td data-sort=\"{dur or 0}\">{_e(dur or '')}</td>"
                f"<td data-sort='{len(ep.windows)}'>{len(ep.windows)}</td><td data-sort='{failed}'>{failed}</td>"
                f"<td data-sort='{talked}'>{talked}</td><td>{_e(ep.reason)} {_e(ep.counted)}</td></tr>")
    statuses = sorted({ep.status for r in runs for ep in r.episodes})
    ep_controls = ('<div class="filters" data-target="episodes"><label>run <select data-filter="run">'
                   '<option value="">all</option>' + "".join(f'<option value="{_e(r.slug)}">{_e(r.name)}</option>'
                                                             for r in runs)
                   + '</select></label><label>status <select data-filter="status"><option value="">all</option>'
                   + "".join(f'<option value="{_e(s)}">{_e(s)}</option>' for s in statuses)
                   + '</select></label><span class="count" data-count-of="episodes"></span></div>')
    ep_head = "".join(f"<th>{c}</th>" for c in ("run", "episode", "status", "duration (s)", "windows",
                                                 "failed windows", "windows the model talked in", "reason"))
    body = ("<nav class='top'><a href='index.html'>← report</a></nav><h1>Episodes and scored windows</h1>"
            "<p class='note'>One row per scored window: its verdict under the thresholds or rules the scores were "
            "computed with (failed: a window of a failed episode, counted as a failure), whether the model talked "
            "in it, and what the ASR heard. Filter in one click:</p>"
            + P.chips(P.quick_filters(runs))
            + f"<h2>Windows</h2>{controls}<div class='scroll'><table class='sortable' id='windows'><thead><tr>{head}"
              f"</tr></thead><tbody>\n{rows}\n</tbody></table></div>"
            + f"<h2>Episodes</h2>{ep_controls}<div class='scroll'><table class='sortable' id='episodes'><thead><tr>"
              f"{ep_head}</tr></thead><tbody>\n{''.join(ep_rows)}\n</tbody></table></div>")
    return P.page("duplex-eval: episodes and windows", body)


# ---- ep/<run>/<case>.html --------------------------------------------------------------------------------------

def episode_html(run: RunView, ep: EpisodeView, media: dict[str, Any] | None, prev: EpisodeView | None,
                 nxt: EpisodeView | None) -> str:
    root = "../../"
    rec = ep.rec or {}
    nav = [f"<a href='{root}index.html'>report</a> › <a href='{root}index.html#run-{_e(run.slug)}'>{_e(run.name)}</a>"
           f" › {_e(ep.case_id)}"]
    if prev:
        nav.append(f" · <a href='{_e(prev.slug)}.html' rel='prev'>← {_e(prev.case_id)}</a>")
    if nxt:
        nav.append(f" · <a href='{_e(nxt.slug)}.html' rel='next'>{_e(nxt.case_id)} →</a>")
    parts = [f"<nav class='top'>{''.join(nav)}</nav><h1>{_e(ep.case_id)}</h1>",
             f"<p>{_e(run.bench.title)} · {_e(run.name)} · status <b>{_e(ep.status)}</b>"
             + (f" · {float(rec['duration_s']):.2f} s" if rec.get("duration_s") else "") + "</p>"]
    if ep.status != "ok":
        parts.append(f"<div class='health'><b>{_e(ep.status)}:</b> {_e(ep.reason)}"
                     + (f" ({_e(ep.counted)})" if ep.counted else "") + "</div>")
    if media and "env" in media:
        fig = P.figure_data(run, ep, media)
        parts.append("<figure class='timeline'><canvas class='timeline' data-json='fig' data-audio='player'>"
                     "</canvas><figcaption>Top: the user channel (ch0) with its clips by label (gold timeline); "
                     "bottom: the model channel (ch1) with its VAD speech (blue). Shaded: each scored window, green "
                     "pass, red fail, with its label and verdict. Click to play from a time.</figcaption></figure>"
                     f"<script type='application/json' id='fig'>{P.script_json(fig)}</script>")
        if media.get("audio"):
            src = f"{root}media/{media['audio']}"
            parts.append(f"<audio id='player' controls preload='metadata' src='{_e(src)}'></audio>"
                         "<p class='note'>Stereo: the user on the left, the model on the right.</p>")
        elif media.get("audio_error"):
            parts.append(f"<p class='note'>audio {_e(media['audio_error'])}</p>")
    elif media and media.get("error"):
        parts.append(f"<p class='note'>no figure or audio: {_e(media['error'])}</p>")
    elif not media:
        parts.append("<p class='note'>no figure or audio: "
                     + ("no recording" if not ep.wav.exists() else "left out of this report (--max-plots)") + "</p>")
    if ep.windows:
        head = "".join(f"<th>{_e(c)}</th>" for c in P.WINDOW_COLUMNS)
        rows = "\n".join(P.window_row_html(run, ep, w, root, with_episode=False) for w in ep.windows)
        parts.append(f"<h2>Scored windows</h2><p class='note'>Click a row to play from its start.</p>"
                     f"<div class='scroll'><table class='sortable' id='ep-windows'><thead><tr>{head}</tr></thead>"
                     f"<tbody>{rows}</tbody></table></div>")
    said = P.conversation(ep)
    if said:
        parts.append("<h2>What was said, heard and decided</h2><p class='note'>In time order: the script's user turns "
                     "as played (label, realised times, words), what the ASR heard of the model in each scored "
                     "window (as scored), the model's own text stream, and the notes its adapter logged of what it "
                     "heard and decided (never scored). Click a row to play from its time.</p>" + said)
    gold = rec.get("gold") or {}
    if gold:
        parts.append("<h2>Gold</h2>" + P.kv_table(list(gold.items())))
    if rec.get("compute"):
        comp = {k: v for k, v in rec["compute"].items() if k != "hist"}
        parts.append("<h2>Step compute time</h2>" + P.kv_table(list(comp.items())))
    if ep.health:
        parts.append("<details><summary>health numbers of the model channel</summary>"
                     + P.kv_table(list(ep.health.items())) + "</details>")
    base = run.first_rec().get("params") or {}
    own = [(k, v) for k, v in (rec.get("params") or {}).items() if base.get(k) != v]
    parts.append("<details><summary>parameters</summary><p class='note'>protocol, VAD and TTS as the run's "
                 f"(<a href='{root}index.html#run-{_e(run.slug)}'>what produced these numbers</a>)"
                 + (", except:" if own else "") + "</p>"
                 + P.kv_table([*own, ("seed", rec.get("seed")), ("wall time (s)", rec.get("wall_s"))]) + "</details>")
    return P.page(f"{ep.case_id} — {run.name}", "".join(parts), root)


# ---- the whole site ------------------------------------------------------------------------------------------

def write_if_changed(path: Path, text: str) -> bool:
    """Write a page atomically unless it already holds exactly `text` (a report written again over its folder
    rewrites only the pages that changed); whether it wrote."""
    try:
        if path.stat().st_size == len(text.encode("utf-8")) and path.read_text(encoding="utf-8") == text:
            return False
    except OSError:
        pass
    atomic_write_text(path, text)
    return True


def _prune(folder: Path, keep: set[Path]) -> None:
    """Remove what an earlier report left in one of our own folders (ep/, media/) and this one did not write."""
    if not folder.exists():
        return
    for p in sorted(folder.rglob("*"), reverse=True):
        if p.is_file() and p not in keep:
            p.unlink()
        elif p.is_dir() and not any(p.iterdir()):
            p.rmdir()


def write_site(run_dirs: list[Path], out: Path, max_plots: int | None = None, allow_stale: bool = False,
               audio_kbps: float = DEFAULT_KBPS, workers: int | None = None, progress: bool = False) -> Path:
    """The report of these runs; its index.html. A run whose scores no longer match its folder is refused
    (UsageError naming the fix), or with `allow_stale` shown under a STALE banner. `max_plots` caps the episodes
    per run that get a figure and audio (None: all; their pages exist either way)."""
    t0 = time.perf_counter()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    runs = load_runs([Path(d) for d in run_dirs], allow_stale)
    for asset in ASSETS:
        atomic_write_text(out / "assets" / asset,
                          resources.files("eval.report_site").joinpath("assets", asset).read_text(encoding="utf-8"))
    store = Media(out / "media", audio_kbps)
    media = store.make(_recordings(runs, max_plots), workers, progress)
    store.save()
    groups: dict[str, list[RunView]] = {}
    for run in runs:
        groups.setdefault(run.bench.name, []).append(run)
    boards = [(rs[0].bench.title, rs, tables_for(rs)) for rs in groups.values()]
    written: set[Path] = set()
    for run in runs:
        for i, ep in enumerate(run.episodes):
            path = out / "ep" / run.slug / f"{ep.slug}.html"
            prev = run.episodes[i - 1] if i else None
            nxt = run.episodes[i + 1] if i + 1 < len(run.episodes) else None
            write_if_changed(path, episode_html(run, ep, media.get((run.slug, ep.slug)), prev, nxt))
            written.add(path)
    _prune(out / "ep", written)
    copied = set()
    for run in runs:  # the scores each run's section links to, byte for byte
        dest = out / scores_href(run)
        dest.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(dest, (run.dir / "scores.json").read_bytes())
        copied.add(dest)
    _prune(out / "runs", copied)
    atomic_write_text(out / "episodes.html", episodes_html(runs))
    atomic_write_text(out / "summary.md", summary(boards, [provenance_line(r) for r in runs]))
    page = out / "index.html"
    atomic_write_text(page, index_html(runs, boards, out, time.perf_counter() - t0))
    return page


def encode_run_media(run_dir: Path, out: Path, audio_kbps: float = DEFAULT_KBPS) -> dict[str, dict[str, Any]]:
    """Encode one scored run's recordings into the report folder `out`'s media/ ahead of `write_site`, in this
    process, and return their index entries for `Media.merge` (this writes no index: workers would race on it).
    The demo does it in its worker pool as each run is scored, so the report at the end reuses every file."""
    store = Media(Path(out) / "media", audio_kbps)
    store.make(_recordings(load_runs([Path(run_dir)], False)), workers=1)
    return {k: store.index[k] for k in store.used if k in store.index}


def _recordings(runs: list[RunView], max_plots: int | None = None) -> dict[tuple[str, str], tuple[Path, bool]]:
    """What `Media.make` encodes: each run's first `max_plots` episodes with a recording (None: all), with audio."""
    wanted: dict[tuple[str, str], tuple[Path, bool]] = {}
    for run in runs:
        with_wav = [e for e in run.episodes if e.wav.exists()]
        for ep in with_wav[:max_plots] if max_plots is not None else with_wav:
            wanted[(run.slug, ep.slug)] = (ep.wav, True)
    return wanted


def site_bytes(folder: Path) -> int:
    """Bytes under a folder (what a report weighs)."""
    return sum(p.stat().st_size for p in Path(folder).rglob("*") if p.is_file())
