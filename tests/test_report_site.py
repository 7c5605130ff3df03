"""The static report (`duplex-eval report`, eval/report_site/): every number it shows is the one in scores.json,
with its interval and count; breakdowns, health, provenance, failed and skipped episodes; a page with figure data
and playable audio for every episode; the windows table behind the one-click filters; summary.md; re-runs.

The runs are real Duplex-MPE runs (silent and oracle on the mini set) and hand-built folders of the other
benchmarks with failed and skipped episodes (tests/report_runs.py). The browser checks are in
test_report_browser.py.
"""

from __future__ import annotations

import hashlib
import json
import re
from html import escape
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
import soundfile as sf

from eval.report import write_report
from eval.report_site.media import Media
from eval.report_site.site import encode_run_media
from eval.run import RunConfig
from eval.run import run as run_eval
from metrics.scoring import score_run_dir
from tests.conftest import session_dir
from tests.report_runs import CACHE, report_runs


class Tables(HTMLParser):
    """Each <table data-table=KEY> (or id=KEY) of a page: rows of cells as {"text", "value", attributes}."""

    def __init__(self, page: str) -> None:
        super().__init__()
        self.tables: dict[str, list[list[dict[str, Any]]]] = {}
        self.rows: dict[str, list[dict[str, str]]] = {}
        self._key: str | None = None
        self._cell: dict[str, Any] | None = None
        self._in_body = False
        self.feed(page)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "table":
            self._key = a.get("data-table") or a.get("id")
            if self._key:
                self.tables[self._key] = []
                self.rows[self._key] = []
        elif tag == "tbody":
            self._in_body = True
        elif tag == "tr" and self._key and self._in_body:
            self.tables[self._key].append([])
            self.rows[self._key].append(a)
        elif tag in ("td", "th") and self._key and self._in_body:
            self._cell = {"text": "", "value": float(a["data-value"]) if "data-value" in a else None, **a}

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None and self._key:
            self._cell["text"] = " ".join(self._cell["text"].split())
            self.tables[self._key][-1].append(self._cell)
            self._cell = None
        elif tag == "tbody":
            self._in_body = False
        elif tag == "table":
            self._key = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell["text"] += data


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory, mini_dataset: Path) -> list[Path]:
    return report_runs(session_dir(tmp_path_factory), mini_dataset)


@pytest.fixture(scope="module")
def site(runs: list[Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_report(runs, tmp_path_factory.mktemp("site") / "report").parent


def scores(run: Path) -> dict[str, Any]:
    return json.loads((run / "scores.json").read_text())


def run_name(run: Path) -> str:
    return f"{scores(run)['adapter']} ({run.name})"


def shown(entry: dict[str, Any]) -> str:
    """A rate as the text tables give it: value [Wilson 95% CI] k/n, or n/a without a denominator."""
    if entry["value"] is None:
        return f"n/a {entry['k']}/{entry['n']}"
    lo, hi = entry["ci"]
    return f"{entry['value']:.3f} [{lo:.2f},{hi:.2f}] {entry['k']}/{entry['n']}"


def rows_of(table: list[list[dict[str, Any]]], name: str) -> list[list[dict[str, Any]]]:
    return [r for r in table if r[0]["text"] == name]


def by_bench(runs: list[Path], bench: str) -> list[Path]:
    return [r for r in runs if scores(r)["benchmark"] == bench]


def test_mpe_leaderboard_shows_each_score_with_its_interval_and_count(runs: list[Path], site: Path) -> None:
    t = Tables((site / "index.html").read_text())
    board = t.tables["mpe-leaderboard"]
    header = ["fresh_onset_rate", "answer_accuracy", "silence_preservation", "answering_window_yield"]
    for run in by_bench(runs, "mpe"):
        (row,) = rows_of(board, run_name(run))
        for i, metric in enumerate(header, start=1):
            entry = scores(run)["scores"][metric]
            assert row[i]["value"] == entry["value"], (run.name, metric)
            assert row[i]["text"] == shown(entry), (run.name, metric)
    oracle = rows_of(board, run_name(by_bench(runs, "mpe")[1]))[0]
    assert oracle[1]["value"] == 1.0  # the oracle answers every T turn within the onset window
    paired = scores(by_bench(runs, "mpe")[1])["paired"]["response_presence"]
    assert paired["n_pairs"] == 2
    assert f"McNemar p={paired['mcnemar_p']:.3g} (2 pairs)" in " ".join(c["text"] for c in oracle)
    failed = rows_of(board, run_name(by_bench(runs, "mpe")[2]))[0]
    assert failed[-1]["text"] == "1 (5 windows counted as failed)" and failed[-1]["value"] == 1.0


def test_mpe_breakdowns_by_condition_label_and_pairs(runs: list[Path], site: Path) -> None:
    t = Tables((site / "index.html").read_text())
    run = by_bench(runs, "mpe")[1]
    s = scores(run)
    cond = {r[1]["text"]: r for r in rows_of(t.tables["mpe-condition"], run_name(run))}
    assert set(cond) == {"explicit", "implicit"}
    assert cond["implicit"][2]["value"] == s["by_condition"]["implicit"]["fresh_onset_rate"]["value"]
    labels = {(r[1]["text"], r[2]["text"]): r[3]["value"] for r in rows_of(t.tables["mpe-label"], run_name(run))}
    assert labels == {(lab, m): e["value"] for lab, block in s["by_label"].items() for m, e in block.items()}
    pairs = rows_of(t.tables["mpe-paired"], run_name(run))
    assert {r[1]["text"] for r in pairs} == set(s["paired"])


def test_ifeval_levels_actions_roles_and_the_entailment_gap(runs: list[Path], site: Path) -> None:
    t = Tables((site / "index.html").read_text())
    (run,) = by_bench(runs, "ifeval")
    s = scores(run)
    (row,) = rows_of(t.tables["ifeval-leaderboard"], run_name(run))
    assert row[1]["value"] == s["scores"]["ias"]["value"] and row[1]["text"].endswith(
        f"{s['scores']['ias']['k']}/{s['scores']['ias']['n']}")
    gap = s["entailment_gap"]
    assert row[2]["value"] == gap["value"] and f"n={gap['n_a']}/{gap['n_b']}" in row[2]["text"]
    assert "McNemar p=" in row[2]["text"] and "Newcombe" in (site / "index.html").read_text()
    (level,) = rows_of(t.tables["ifeval-level"], run_name(run))
    assert [c["value"] for c in level[1:]] == [e["value"] for e in s["by_level"].values()]
    (action,) = rows_of(t.tables["ifeval-action"], run_name(run))
    assert [c["value"] for c in action[1:]] == [e["value"] for e in s["by_action"].values()]
    (role,) = rows_of(t.tables["ifeval-role"], run_name(run))
    assert [c["value"] for c in role[1:]] == [e["value"] for e in s["by_role"].values()]
    diffs = {r[1]["text"]: r for r in rows_of(t.tables["ifeval-differences"], run_name(run))}
    assert diffs["entailment_gap"][4]["value"] == gap["paired"]["n_pairs"]


def test_m3_per_language_domain_and_condition(runs: list[Path], site: Path) -> None:
    t = Tables((site / "index.html").read_text())
    (run,) = by_bench(runs, "m3")
    s = scores(run)
    rows = {r[3]["text"]: r for r in rows_of(t.tables["m3-condition"], run_name(run))}
    assert set(rows) == {"none", "user", "full"}  # full: all skipped, still listed with its count
    assert rows["full"][-1]["text"] == "1" and rows["full"][4]["text"] == "–"
    for cond in ("none", "user"):
        block = s["scores"][f"en_task_{cond}"]
        assert rows[cond][1]["text"] == "en" and rows[cond][2]["text"] == "task"
        assert rows[cond][4]["value"] == block["shift_tor"]["value"]  # SHIFT TOR, with its Wilson interval
        assert rows[cond][5]["value"] == block["shift_latency"]["value"]  # SHIFT latency, mean ± t
        assert "±" in rows[cond][5]["text"] or block["shift_latency"]["ci"] is None
    # The paper's None&Full row needs a Full value: with Full skipped it says so, cell by cell.
    (rep,) = rows_of(t.tables["m3-leaderboard"], run_name(run))
    assert all(c["text"] == "–" and c["title"].startswith("no Full value") for c in rep[3:])


def test_health_feasibility_failed_skipped_and_provenance(runs: list[Path], site: Path) -> None:
    page = (site / "index.html").read_text()
    silent = by_bench(runs, "mpe")[0]
    assert "<b>Run health</b>" in page and "no model speech in 4/4 episodes" in page
    assert "<b>failed:</b> step stalled (counted as failed in 5 windows)" in page
    assert "<b>skipped:</b> the adapter has no teacher_forcing capability (Full context)" in page
    assert "<b>failed:</b> step raised RuntimeError: boom at t=3.000s" in page
    rec = json.loads(next(silent.glob("*.rec.json")).read_text())
    assert rec["params"]["tts_backend"] in page and scores(silent)["asr"] in page and "heuristic" in page
    t = Tables(page)
    runs_rows = {r[0]["text"]: r for r in t.tables["runs"]}
    assert runs_rows[run_name(silent)][8]["value"] == len(scores(silent)["health"]["flags"])
    # The real runs are `--limit 4` runs: partial, and said so in the runs table and in their section.
    n = scores(silent)["n_dataset_cases"]
    assert n > 4 and runs_rows[run_name(silent)][4]["text"] == f"4 of {n} PARTIAL"
    assert f"<b>PARTIAL:</b> the scores cover 4 of {n} cases, PARTIAL run (--limit 4)" in page
    has_compute = any(json.loads(p.read_text()).get("compute") for r in runs for p in r.glob("*.rec.json"))
    # Live feasibility is shown where step times were recorded, and said to be missing where they were not.
    assert ("<b>Live feasibility</b>" in page) == has_compute
    assert "not recorded" in runs_rows[run_name(by_bench(runs, "m3")[0])][9]["text"]


def test_every_episode_has_a_page_with_its_figure_and_audio(runs: list[Path], site: Path) -> None:
    for run in runs:
        for rec_path in run.glob("*.rec.json"):
            rec = json.loads(rec_path.read_text())
            page = (site / "ep" / run.name / f"{rec['case_id']}.html").read_text()
            assert rec["case_id"] in page
            wav = run / f"{rec['case_id']}.wav"
            if not wav.exists() or not sf.info(str(wav)).frames:  # a skipped episode's recording is empty
                assert "no recording" in page or "holds no samples" in page
                continue
            fig = json.loads(re.search(r"<script type='application/json' id='fig'>(.*?)</script>", page).group(1))
            assert len(fig["env"]) == 2 and fig["dur"] == pytest.approx(rec["duration_s"], abs=0.01)
            assert all(v in ("pass", "fail", "failed", "not scored", "mixed") for *_, v, _ in fig["win"])
            assert fig["win"] or rec["status"] != "ok"  # an episode that ran has its scored windows drawn
            src = re.search(r"<audio id='player' controls preload='metadata' src='\.\./\.\./(media/\w+\.ogg)'", page)
            info = sf.info(str(site / src.group(1)))
            assert info.channels == 2 and info.duration == pytest.approx(rec["duration_s"], abs=0.05)


def test_identical_recordings_share_one_audio_file(runs: list[Path], site: Path) -> None:
    wavs = [w for r in runs for w in r.glob("*.wav") if sf.info(str(w)).frames]  # skipped episodes' are empty
    digests = {hashlib.sha256(w.read_bytes()).hexdigest() for w in wavs}
    assert len(list((site / "media").glob("*.ogg"))) == len(digests) < len(wavs)


def test_windows_table_has_every_measured_window_with_its_verdict(runs: list[Path], site: Path) -> None:
    t = Tables((site / "episodes.html").read_text())
    measured = [json.loads(x) for r in runs for x in (r / "measurements.jsonl").read_text().splitlines() if x]
    rows = t.rows["windows"]
    assert len(rows) == len(measured)
    assert sum(r["data-verdict"] == "failed" for r in rows) == sum(bool(m.get("failed")) for m in measured)
    # "every N2 window the model talked in": the rows the one-click filter shows
    n2_talked = [m for r in by_bench(runs, "mpe") for x in (r / "measurements.jsonl").read_text().splitlines()
                 if (m := json.loads(x)).get("label") == "N2" and not m.get("failed") and m["speech_s"] > 0]
    assert sum(r["data-label"] == "N2" and r["data-talked"] == "yes" for r in rows) == len(n2_talked)
    assert "bench=mpe&amp;label=N2&amp;talked=yes" in (site / "index.html").read_text()
    statuses = {r["data-status"] for r in t.rows["episodes"]}
    assert {"ok", "failed", "skipped"} <= statuses


def test_summary_md_has_the_leaderboards_as_markdown_tables(runs: list[Path], site: Path) -> None:
    md = (site / "summary.md").read_text()
    for title in ("## Duplex-MPE", "## DSB-IFEval", "## M3-DuplexBench", "### Duplex-MPE leaderboard"):
        assert title in md
    tables = re.findall(r"((?:^\|.*\|\n)+)", md, flags=re.M)
    assert tables and all(len({line.count(" | ") for line in tb.splitlines() if not line.startswith("|--")}) == 1
                          for tb in tables)
    s = scores(by_bench(runs, "ifeval")[0])["scores"]["ias"]
    assert f"| {run_name(by_bench(runs, 'ifeval')[0])} | {s['value']:.3f} [{s['ci'][0]:.2f},{s['ci'][1]:.2f}] " \
           f"{s['k']}/{s['n']} |" in md


def test_a_second_report_reuses_encoded_audio_and_drops_what_it_no_longer_shows(runs: list[Path],
                                                                               tmp_path: Path) -> None:
    out = tmp_path / "report"
    write_report(runs[:2], out)
    first = {p.name: p.stat().st_mtime_ns for p in (out / "media").glob("*.ogg")}
    write_report(runs[:1], out)
    again = {p.name: p.stat().st_mtime_ns for p in (out / "media").glob("*.ogg")}
    assert again and set(again) < set(first) and all(again[k] == first[k] for k in again)
    assert not (out / "ep" / runs[1].name).exists() and (out / "ep" / runs[0].name).is_dir()


def test_runs_encoded_ahead_in_workers_are_reused_by_the_report(runs: list[Path], site: Path, tmp_path: Path) -> None:
    """The demo encodes each run's recordings as the run is scored (`encode_run_media` in its workers, merged
    into the index in turn); the report then encodes nothing and is the same site as one written directly."""
    out = tmp_path / "report"
    for run in runs[:3]:
        Media.merge(out / "media", encode_run_media(run, out))
    ahead = {p.name: p.stat().st_mtime_ns for p in (out / "media").glob("*.ogg")}
    write_report(runs[:3], out)
    after = {p.name: p.stat().st_mtime_ns for p in (out / "media").glob("*.ogg")}
    assert ahead and after == ahead  # every file reused, none re-encoded or dropped
    direct = write_report(runs[:3], tmp_path / "direct").parent
    assert sorted(p.name for p in (direct / "media").glob("*.ogg")) == sorted(after)
    for page in (direct / "ep").rglob("*.html"):
        assert page.read_text() == (out / page.relative_to(direct)).read_text()


class Links(HTMLParser):
    """Every href and src of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.targets: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.targets += [v for k, v in attrs if k in ("href", "src") and v]


def test_every_link_of_the_report_resolves_inside_its_folder(runs: list[Path], site: Path) -> None:
    """A copied report keeps working: each run's scores.json is copied in (byte for byte), and no page links
    outside the report's folder."""
    pages = list(site.rglob("*.html"))
    checked = 0
    for page in pages:
        parser = Links()
        parser.feed(page.read_text())
        for target in parser.targets:
            path = target.split("#")[0]
            if not path:
                continue
            assert "://" not in path, (page, target)
            resolved = (page.parent / path).resolve()
            assert resolved.is_relative_to(site.resolve()) and resolved.exists(), (page.relative_to(site), target)
            checked += 1
    assert checked > len(pages)
    index = (site / "index.html").read_text()
    for run_dir in runs:
        copy = site / "runs" / run_dir.name / "scores.json"
        assert copy.read_bytes() == (run_dir / "scores.json").read_bytes()
        assert f'href="runs/{run_dir.name}/scores.json"' in index


def test_an_n4_window_shows_one_verdict_per_metric(runs: list[Path], site: Path) -> None:
    """A silent model on an N4 window: it stays silent through the answering window (answering_window_yield
    passes) and does not respond (window_response fails); the row says both, not one "fail"."""
    silent = next(r for r in by_bench(runs, "mpe") if scores(r)["adapter"] == "silent")
    t = Tables((site / "episodes.html").read_text())
    rows = [(a, cells[5]["text"]) for a, cells in zip(t.rows["windows"], t.tables["windows"], strict=True)
            if a["data-run"] == silent.name]
    n4 = [(a, v) for a, v in rows if a["data-label"] == "N4"]
    assert n4
    for a, verdict in n4:
        assert a["data-verdict"] == "fail pass"
        assert "window_response: fail" in verdict and "answering_window_yield: pass" in verdict, verdict
    # a silence window counts toward one metric: one verdict
    n1 = [(a, v) for a, v in rows if a["data-label"] == "N1"]
    assert n1 and all(a["data-verdict"] == "pass" and v == "silence_preservation: pass" for a, v in n1)


@pytest.fixture(scope="module")
def cascade_site(mini_dataset: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The real cascade (Silero VAD, whisper, its policy, TTS) on the mini set's first case, scored with whisper."""
    out = tmp_path_factory.mktemp("cascade-run") / "mpe-cascade"
    counts = run_eval(RunConfig(dataset=str(mini_dataset), config="mpe", adapter="cascade", out=str(out),
                           adapter_args={"cache_dir": str(CACHE)}, limit=1))
    assert counts["ok"] == 1, counts
    score_run_dir(out)
    return out, write_report([out], tmp_path_factory.mktemp("cascade-site") / "report").parent


def test_a_cascade_episode_page_says_what_was_said_heard_and_decided(cascade_site: tuple[Path, Path]) -> None:
    run_dir, site = cascade_site
    (rec_path,) = run_dir.glob("*.rec.json")
    rec = json.loads(rec_path.read_text())
    # the runner recorded the script's words with each clip, and the cascade its own hearing and decisions
    turns = {t["turn_id"]: t for t in rec["timeline"]}
    words = [t["text"] for t in rec["timeline"] if t["turn_id"] != "preamble"]
    assert all(words) and any("Aria" in w for w in words)
    assert rec["notes"] and all(n[1].startswith(("heard ", "yields: ")) for n in rec["notes"])
    answered = [n for n in rec["notes"] if "-> answers: " in n[1]]
    assert answered, rec["notes"]
    page = (site / "ep" / run_dir.name / f"{rec['case_id']}.html").read_text()
    said = page[page.index("<table class=\"said\""):]
    said = said[:said.index("</table>")]
    # the user's words, on the row of their clip, with its label
    t = turns["t00"]
    assert f"<td>{t['start_s']:.2f}–{t['end_s']:.2f}</td><td>user</td><td>{t['label']}</td>" in said
    assert escape(t["text"]) in said and "Aria" in said
    # what the ASR heard of the model in its scored windows, as scored
    heard = [json.loads(x) for x in (run_dir / "measurements.jsonl").read_text().splitlines() if x]
    transcripts = [m["transcript"] for m in heard if m.get("transcript")]
    assert transcripts and all(escape(x) in said for x in transcripts)
    assert "model (ASR, as scored)" in said
    # and what the cascade itself heard and decided
    assert all(escape(n[1]) in said for n in rec["notes"]) and "adapter note" in said
    fig = json.loads(re.search(r"<script type='application/json' id='fig'>(.*?)</script>", page).group(1))
    assert [u[3] for u in fig["user"]] == [t["text"] for t in rec["timeline"]]
