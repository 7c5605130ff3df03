"""The first commands a new user types: `duplex-eval build mpe --preset mini` and `make demo` build one set from one
clip cache, the build shows progress from its start and ends with a few lines (its statistics in the folder, no
JSON and no library noise), and the built-in agents speak from that same cache (docs/quickstart.md)."""

from __future__ import annotations

import io
import json
import logging
from pathlib import Path
from typing import Any

import pytest

from dataset_builder.build import BuildOptions, build_estimate_s, uncached_clips
from dataset_builder.progress import Progress
from dataset_builder.tts.cache import CachedTTS, default_cache_dir
from eval import building, demo
from eval.cli import main


def _captured_build(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, Path, BuildOptions]]:
    calls: list[tuple[str, Path, BuildOptions]] = []

    def fake(bench: Any, out: Path, options: BuildOptions) -> tuple[dict[str, Any], list[str]]:
        calls.append((bench.name, Path(out), options))
        return {}, []

    monkeypatch.setattr(building, "build_quietly", fake)
    return calls


def _same_build(options: BuildOptions) -> dict[str, Any]:
    """What decides a build's bytes: every option but the progress line, gates by kind, name and cache."""
    fields = {k: v for k, v in vars(options).items() if k not in ("progress", "speech_gate", "heard_gate")}
    for gate in ("speech_gate", "heard_gate"):
        g = getattr(options, gate)
        fields[gate] = None if g is None else (type(g), g.name, vars(g).get("cache_dir"))
    return fields


@pytest.mark.parametrize("bench", ["mpe", "ifeval", "m3"])
def test_demo_builds_what_the_quickstart_builds(bench: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The demo's set and `duplex-eval build NAME --preset mini`'s are one set: the same options, speech gate on,
    the same clip cache (the speech gate's transcripts kept in it)."""
    calls = _captured_build(monkeypatch)
    assert main(["build", bench, "--preset", "mini", "--out", str(tmp_path / "cli")]) == 0
    demo._build(bench, tmp_path / "demo", "mini")
    (_, cli_out, cli), (_, demo_out, dem) = calls
    assert (cli_out, demo_out) == (tmp_path / "cli", tmp_path / "demo")
    assert _same_build(cli) == _same_build(dem)
    assert dem.cache_dir == default_cache_dir() and dem.speech_gate is not None


def test_demo_agents_speak_from_the_build_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """oracle and cascade speak through the cache the quickstart's build filled, not a demo-only one."""
    seen: dict[str, Any] = {}

    def fake_run(cfg: Any) -> dict[str, int]:
        seen[cfg.adapter] = cfg.adapter_args
        raise RuntimeError("stop")

    monkeypatch.setattr(demo, "run", fake_run)
    for agent in ("oracle", "silent"):
        with pytest.raises(RuntimeError):
            demo._run_and_score(tmp_path, "mpe", agent, tmp_path / agent, tmp_path / "report")
    assert seen == {"oracle": {"cache_dir": str(default_cache_dir())}, "silent": {}}


def test_assistant_voice_caches_in_the_build_cache_by_default() -> None:
    """`run --adapter oracle` without cache_dir speaks from (and fills) the clip cache `duplex-eval build` uses."""
    from adapters.base import AssistantVoice

    mouth = AssistantVoice("piper", None, 24000)
    assert isinstance(mouth.tts, CachedTTS) and mouth.tts.cache_dir == default_cache_dir()


def test_build_prints_a_summary_and_writes_its_statistics(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """No JSON on stdout: a few lines, the statistics in OUT/build-info.json; progress from the start, with time
    left before the first case; the card says the speech gate did not run."""
    out = tmp_path / "mpe"
    assert main(["build", "mpe", "--n", "1", "--no-speech-gate", "--out", str(out)]) == 0
    printed = capsys.readouterr()
    assert "{" not in printed.out and len(printed.out.splitlines()) <= 5
    assert "built 2 MPE cases" in printed.out and f"build statistics: {out / building.BUILD_INFO}" in printed.out
    info = json.loads((out / building.BUILD_INFO).read_text())
    assert info["n_cases"] == 2 and "speech_gate" not in info
    first, second = printed.err.splitlines()[:2]  # at once; then, the scripts composed, with the time left
    assert " 0/2 " in first and "composing scripts" in first
    assert " 0/2 " in second and "clips to synthesise" in second and "left ?" not in second
    card = (out / "README.md").read_text()
    assert '"speech_gate": {\n    "ran": false\n  }' in card


def test_build_holds_back_its_info_lines_and_passes_warnings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          capfd: pytest.CaptureFixture[str]) -> None:
    """The builders' INFO lines become the summary (not printed as they come, with timestamps); a warning still
    prints at once."""
    class Bench:
        name = "toy"

        @staticmethod
        def function(_: str) -> Any:
            def build(out: Path, options: BuildOptions) -> dict[str, Any]:
                log = logging.getLogger(building.BUILD_LOG)
                log.info("built 3 toy cases")
                log.warning("toy has no event X")
                return {"n_cases": 3}
            return build

    logging.getLogger().setLevel(logging.INFO)
    info, lines = building.build_quietly(Bench(), tmp_path, BuildOptions())  # type: ignore[arg-type]
    err = capfd.readouterr().err
    assert info == {"n_cases": 3} and lines[0] == "built 3 toy cases"
    assert "built 3 toy cases" not in err and "toy has no event X" in err
    assert json.loads((tmp_path / building.BUILD_INFO).read_text()) == info


def test_no_library_lines_per_transcribed_clip() -> None:
    """faster-whisper logs "Processing audio with duration ..." at INFO for every clip: the commands keep it out."""
    logging.getLogger("faster_whisper").setLevel(logging.NOTSET)
    building.quiet_libraries()
    assert not logging.getLogger("faster_whisper").isEnabledFor(logging.INFO)


def test_progress_shows_an_estimate_before_the_first_item() -> None:
    """The first line comes at once, with the estimate as time left; once items are done, the estimate for the
    rest stretched by how much slower than estimated the job ran, start-up discounted: one slow first pair (which
    carries the start-up) does not promise hours, and a busy host does not promise minutes."""
    stream = io.StringIO()
    bar = Progress("build mpe", 40, stream=stream, every_s=0.0)
    bar.start("starting", estimate_s=120, startup_s=20)
    assert stream.getvalue().startswith("build mpe  0/40    0%  elapsed 0:00  left 2:00  starting")
    bar.t0 -= 45  # the first case after 45 s, against 22.5 s estimated: twice as slow as estimated so far
    bar.advance()
    left = bar.left_s()
    assert left is not None and abs(left - 2 * 100 * 39 / 40) < 1  # not 39 x 45 s, the first case's own pace
    bar.t0 -= 1000  # ... and then far slower (a busy host): the time left grows with it
    later = bar.left_s()
    assert later is not None and later > 20 * left
    late = Progress("x", 4, stream=io.StringIO(), estimate_s=10)
    late.t0 -= 11
    assert late.left_s() is None  # past the estimate before the first item: unknown, not 0:00


def test_estimate_counts_only_the_clips_not_in_the_cache(tmp_path: Path) -> None:
    from dataset_builder.tts.espeak_backend import EspeakTTS

    tts = EspeakTTS()
    voice = tts.voices()[0]
    CachedTTS(tts, tmp_path).path_for("hello", voice).parent.mkdir(parents=True)
    CachedTTS(tts, tmp_path).path_for("hello", voice).write_bytes(b"")
    clips = [("hello", voice), ("world", voice)]
    assert uncached_clips(tts, tmp_path, clips) == 1 and uncached_clips(tts, None, clips) == 2
    assert build_estimate_s(10, 20, 2, gated=True) > build_estimate_s(10, 20, 2, gated=False) > \
        build_estimate_s(0, 20, 2, gated=False)


def test_the_demo_progress_counts_the_jobs_in_flight() -> None:
    """Known answers of the demo's progress count (expected job-seconds): a finished job counts whole, a job in
    flight the seconds it has run, never all of them before it ends; the count never goes down when a job ends,
    early or late."""
    assert demo.credited(100, [], now=20) == 100
    assert demo.credited(100, [(0.0, 50.0)], now=20) == 120  # counting finished jobs alone would say 100
    assert demo.credited(100, [(0.0, 50.0), (10.0, 300.0)], now=20) == 130
    assert demo.credited(0, [(0.0, 50.0)], now=80) == 49  # overdue: all but its last second
    assert demo.credited(50, [], now=80) == 50  # ... and whole once it ends
    assert demo.credited(0, [(30.0, 50.0)], now=20) == 0  # a clock read before the start counts nothing


def test_a_demo_job_reports_its_wall_and_cpu_seconds(tmp_path: Path) -> None:
    """What OUT/demo-timings.json is made of: each job's (result, cost); a set already built costs next to nothing."""
    (tmp_path / "README.md").write_text("built\n")
    value, cost = demo._build("mpe", tmp_path, "mini")
    assert value is None and set(cost) == {"wall_s", "cpu_s"} and 0 <= cost["wall_s"] < 5 and cost["cpu_s"] >= 0


def test_a_forced_progress_line_is_never_throttled() -> None:
    """Off a terminal the line prints at most every 5 s; a forced one (the demo's "built mpe") always prints."""
    stream = io.StringIO()
    bar = Progress("demo", 100, stream=stream)
    bar.advance(10, "running a")
    bar.advance(10, "running a")  # within 5 s of the last: throttled
    bar.advance(10, "built mpe", force=True)
    assert [line.split("  ")[-1] for line in stream.getvalue().splitlines()] == ["running a", "built mpe"]
