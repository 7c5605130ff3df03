"""The report in a real browser: headless Debian chromium driven by playwright (no browser download, no server,
no network: the pages open from file://). Tables render the numbers of scores.json, a header click sorts, a
one-click filter shows exactly the windows it names, and an episode page draws its timeline and plays its audio.

A screenshot of the index and of an episode page, and the measured open times, are kept in out/test-artifacts/
(the times are recorded, never asserted; benchmarks/bench_report.py measures the demo report).
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from eval.report import write_report
from tests.conftest import session_dir
from tests.report_runs import report_runs

REPO = Path(__file__).resolve().parent.parent
ARTIFACTS = REPO / "out" / "test-artifacts"
CHROMIUM = os.environ.get("DUPLEX_EVAL_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"

if not Path(CHROMIUM).exists():
    pytest.skip(f"no chromium at {CHROMIUM}: `make setup` installs Debian's chromium (the Makefile's APT_PKGS)",
                allow_module_level=True)
from playwright import sync_api  # noqa: E402 (the dev extra: installed wherever chromium is)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory, mini_dataset: Path) -> list[Path]:
    return report_runs(session_dir(tmp_path_factory), mini_dataset)


@pytest.fixture(scope="module")
def site(runs: list[Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_report(runs, tmp_path_factory.mktemp("browser") / "report").parent


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True,
                              args=["--autoplay-policy=no-user-gesture-required"])
        yield b
        b.close()


@pytest.fixture()
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    pg = context.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda err: errors.append(str(err)))
    pg.on("requestfailed", lambda req: errors.append(f"request failed: {req.url}"))
    yield pg
    context.close()
    assert not errors, errors  # no script error, no missing file


def scores(run: Path) -> dict[str, Any]:
    return json.loads((run / "scores.json").read_text())


def record(name: str, value: Any) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / "report-browser.json"
    data = json.loads(path.read_text()) if path.exists() else {}
    data[name] = value
    path.write_text(json.dumps(data, indent=1))


def open_page(pg: Any, url: str, name: str) -> None:
    t0 = time.perf_counter()
    pg.goto(url, wait_until="load")
    record(f"open_s {name}", round(time.perf_counter() - t0, 3))


def board_values(pg: Any, key: str) -> dict[str, list[float | None]]:
    """Row name -> the data-value of each cell (None where a cell has none), as the browser renders them."""
    return pg.eval_on_selector_all(
        f"table[data-table='{key}'] tbody tr",
        "rows => Object.fromEntries(rows.map(r => [r.cells[0].textContent.trim(), Array.from(r.cells).slice(1)"
        ".map(c => c.hasAttribute('data-value') ? parseFloat(c.getAttribute('data-value')) : null)]))")


def test_index_renders_the_scores_and_sorts_on_a_header_click(runs: list[Path], site: Path, page: Any) -> None:
    open_page(page, (site / "index.html").as_uri(), "index")
    assert page.title() == "duplex-eval report"
    mpe = [r for r in runs if scores(r)["benchmark"] == "mpe"]
    got = board_values(page, "mpe-leaderboard")
    for run in mpe:
        s = scores(run)["scores"]
        row = got[f"{scores(run)['adapter']} ({run.name})"]
        assert row[:4] == [s[m]["value"] for m in ("fresh_onset_rate", "answer_accuracy", "silence_preservation",
                                                   "answering_window_yield")]
    (ifeval,) = [r for r in runs if scores(r)["benchmark"] == "ifeval"]
    row = board_values(page, "ifeval-leaderboard")[f"handmade ({ifeval.name})"]
    assert row[0] == scores(ifeval)["scores"]["ias"]["value"] and row[1] == scores(ifeval)["entailment_gap"]["value"]
    assert page.is_visible("table[data-table='m3-condition']")
    page.screenshot(path=str(ARTIFACTS / "report-index.png"), full_page=True)

    # Sorting: one click on "silence_preservation" orders the runs high to low, a second click low to high.
    table = "table[data-table='mpe-leaderboard']"
    col = page.eval_on_selector_all(f"{table} thead th", "ths => ths.map(t => t.textContent)").index(
        "silence_preservation")

    def column() -> list[float]:
        return page.eval_on_selector_all(
            f"{table} tbody tr", f"rows => rows.map(r => parseFloat(r.cells[{col}].getAttribute('data-value')))")

    page.click(f"{table} thead th:nth-child({col + 1})")
    assert column() == sorted(column(), reverse=True) and len(set(column())) > 1
    assert page.get_attribute(f"{table} thead th:nth-child({col + 1})", "aria-sort") == "descending"
    page.click(f"{table} thead th:nth-child({col + 1})")
    assert column() == sorted(column())


def test_one_click_shows_every_n2_window_the_model_talked_in(runs: list[Path], site: Path, page: Any) -> None:
    open_page(page, (site / "index.html").as_uri(), "index again")
    expected = sum(1 for r in runs if scores(r)["benchmark"] == "mpe"
                   for x in (r / "measurements.jsonl").read_text().splitlines()
                   if (m := json.loads(x)).get("label") == "N2" and not m.get("failed") and m["speech_s"] > 0)
    page.click("a.chip:text-is('N2 · model talked')")  # the one click
    page.wait_for_url("**/episodes.html#*")
    shown = page.eval_on_selector_all("#windows tbody tr:not([hidden])", "rows => rows.map(r => [r.dataset.label, "
                                      "r.dataset.talked, r.dataset.bench])")
    assert len(shown) == expected > 0 and all(s == ["N2", "yes", "mpe"] for s in shown)
    assert page.input_value("select[data-filter='label']") == "N2"
    assert page.inner_text("[data-count-of='windows']").startswith(f"{expected} of ")
    # ... and a second control narrows it: the failed ones among them
    page.select_option("select[data-filter='verdict']", "fail")
    failed = page.eval_on_selector_all("#windows tbody tr:not([hidden])", "rows => rows.map(r => r.dataset.verdict)")
    assert failed == ["fail"] * len(failed) and len(failed) <= expected
    assert "verdict=fail" in page.url


def test_an_episode_page_draws_its_timeline_and_plays_its_audio(runs: list[Path], site: Path, page: Any) -> None:
    oracle = next(r for r in runs if r.name == "mpe-oracle")
    rec = json.loads(sorted(oracle.glob("*.rec.json"))[0].read_text())
    open_page(page, (site / "ep" / oracle.name / f"{rec['case_id']}.html").as_uri(), "episode")
    assert page.get_attribute("canvas.timeline", "data-drawn") == "1"
    inked = page.evaluate("""() => { const c = document.querySelector('canvas.timeline');
        const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
        let n = 0; for (let i = 3; i < d.length; i += 4) if (d[i] > 0) n++; return n / (d.length / 4); }""")
    assert 0.02 < inked < 0.95  # drawn, not blank and not one flood of colour
    page.wait_for_function("document.getElementById('player').readyState >= 1", timeout=10_000)
    audio = page.evaluate("() => { const a = document.getElementById('player'); return {ready: a.readyState, "
                          "duration: a.duration, error: a.error && a.error.code, "
                          "opus: a.canPlayType('audio/ogg; codecs=opus')}; }")
    assert audio["error"] is None and audio["opus"] == "probably"
    assert audio["duration"] == pytest.approx(rec["duration_s"], abs=0.05)
    # It plays: from a click on the figure at about half way, the playhead moves on.
    box = page.locator("canvas.timeline").bounding_box()
    page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    start = page.evaluate("document.getElementById('player').currentTime")
    assert start > 0.3 * rec["duration_s"]
    page.evaluate("document.getElementById('player').play()")
    page.wait_for_function(f"document.getElementById('player').currentTime > {start} + 0.2", timeout=10_000)
    page.evaluate("document.getElementById('player').pause()")
    assert page.locator("#ep-windows tbody tr").count() == len(
        [x for x in (oracle / "measurements.jsonl").read_text().splitlines() if rec["case_id"] in x])
    page.screenshot(path=str(ARTIFACTS / "report-episode.png"), full_page=True)


def test_every_leaderboard_fits_a_1400_px_window_without_a_scroll(site: Path, page: Any) -> None:
    """Headers wrap and a cell's interval and count sit under its value, so no leaderboard hides a column behind a
    horizontal scroll at the page's 1,400 px."""
    open_page(page, (site / "index.html").as_uri(), "index")
    widths = page.eval_on_selector_all(
        "section.board[id$='-leaderboard'] div.scroll",
        "boxes => boxes.map(b => [b.parentElement.id, b.scrollWidth, b.clientWidth])")
    assert len(widths) == 3, widths  # one per benchmark
    for key, scroll, client in widths:
        assert scroll <= client <= 1400, (key, scroll, client)
