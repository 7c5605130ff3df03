"""Adding a benchmark is its own files plus one registry entry (dataset_builder/benchmarks.py): proven with a toy.

tests/toy_benchmark/ holds a fourth benchmark laid out exactly as docs/adding-a-benchmark.md lists the files,
one folder per layer. The test puts each folder on its layer package's `__path__` and registers the toy in a copy
of the registry, both only while it runs; then the toy is built through the CLI, run with `silent` and `oracle`
through the one runner, scored, tabulated by the CLI and the demo, and written into the report — and every place
with a default for a benchmark without its own piece (the generic leaderboard, the shared build audit, the demo's
default job seconds, the report's "no text tables" and "no verdict") must go unused.
"""

from __future__ import annotations

import importlib
import json
import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

import adapters
import dataset_builder
import dataset_builder.benchmarks as registry
import eval.plans
import eval.report_site.boards
import metrics
from dataset_builder.benchmarks import Benchmark, benchmark_names, get_benchmark
from dataset_builder.fingerprint import dataset_fingerprint
from dataset_builder.hf_dataset import config_shards
from eval.report import write_report
from eval.report_site.collect import load_run
from eval.run import RunConfig, run
from metrics.scoring import score_run_dir
from tests.test_benchmark_registry import CORE
from tests.test_layering import ORDER, imported_packages

ROOT = Path(__file__).resolve().parent.parent
TOY = Path(__file__).resolve().parent / "toy_benchmark"
CACHE = ROOT / ".cache" / "tts"
NAME = "toy"

# docs/adding-a-benchmark.md's list, as data: where each piece of a new benchmark <bench> lives, and what it holds.
# (test_the_docs_list_the_same_places holds the page to it; the docstring of dataset_builder/benchmarks.py names it.)
DOCUMENTED = (
    ("dataset_builder/<bench>/", "build(out_dir, options) -> info; case reading: cases(folder, config), "
                                 "case_audio(folder, config, wanted); optionally diagnostics(folder) -> text; "
                                 "its protocol class (a ProtocolParams dataclass)"),
    ("metrics/<bench>/", "score_run(run_dir, ...) -> result; tables(results); plot windows(measurements, result)"),
    ("adapters/oracle_<bench>.py", "oracle_script(case, agent) -> OracleScript"),
    ("eval/plans/<bench>.py", "plan(case, audio, protocol, sr) -> EpisodePlan"),
    ("eval/report_site/boards/<bench>.py", "optional: boards(runs) -> [Table]; window_detail(measurement, result)"),
    ("dataset_builder/benchmarks.py", "one Benchmark(...) entry naming the pieces above"),
)
ENTRY = "dataset_builder/benchmarks.py"  # the one shared file: here the entry is TOY below, registered in a copy

TOY_BENCH = Benchmark(
    name=NAME, title="Toy benchmark", configs=("toy",), presets=("mini",),
    protocol="dataset_builder.toy.protocol:ToyProtocol",
    build="dataset_builder.toy.build:build",
    plan="eval.plans.toy:plan",
    score="metrics.toy.score:score_run",
    tables="metrics.toy.tables:tables",
    windows="metrics.toy.tables:plot_windows",
    cases="dataset_builder.toy.rows:list_cases",
    case_audio="dataset_builder.toy.rows:iter_cases",
    oracle="adapters.oracle_toy:oracle_script",
    boards="eval.report_site.boards.toy:boards",
    window_detail="eval.report_site.boards.toy:window_detail",
    diagnostics="dataset_builder.toy.diagnostics:audit",
    demo_seconds=(("build", 7), ("silent", 3), ("oracle", 4)),  # not the demo's default, so a miss would show
)
# Every layer package the toy adds modules to, with the toy's folder for it.
LAYERS = {dataset_builder: TOY / "dataset_builder", metrics: TOY / "metrics", adapters: TOY / "adapters",
          eval.plans: TOY / "eval" / "plans", eval.report_site.boards: TOY / "eval" / "report_site" / "boards"}
TOY_MODULES = ("dataset_builder.toy", "metrics.toy", "adapters.oracle_toy", "eval.plans.toy",
               "eval.report_site.boards.toy")


def toy_files() -> set[str]:
    """The toy's files as paths a real benchmark would have from the repository root."""
    return {p.relative_to(TOY).as_posix() for p in TOY.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts and p != TOY / "README.md"}


def documented_places(bench: str) -> list[str]:
    return [where.replace("<bench>", bench) for where, _ in DOCUMENTED]


def _forget_toy_modules() -> None:
    for mod in [m for m in sys.modules if any(m == t or m.startswith(t + ".") for t in TOY_MODULES)]:
        del sys.modules[mod]
        parent, _, leaf = mod.rpartition(".")
        if parent in sys.modules and getattr(sys.modules[parent], leaf, None) is not None:
            delattr(sys.modules[parent], leaf)


def _no_fallback(what: str) -> Callable[..., None]:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"the toy fell back to {what}")
    return refuse


@contextmanager
def toy_installed() -> Iterator[pytest.MonkeyPatch]:
    """The toy importable and registered; on exit neither, and no toy module left in sys.modules."""
    with pytest.MonkeyPatch.context() as mp:
        for package, folder in LAYERS.items():
            mp.setattr(package, "__path__", [*package.__path__, str(folder)])
        mp.setattr(registry, "_BENCHMARKS", dict(registry._BENCHMARKS))
        registry.register_benchmark(TOY_BENCH)
        # The defaults for a benchmark without its own piece: none may be reached.
        import eval.demo
        import metrics.build_audit

        mp.setattr(eval.report_site.boards, "generic", _no_fallback("the generic leaderboard"))
        mp.setattr(metrics.build_audit, "audit", _no_fallback("the shared build audit"))
        mp.setattr(eval.demo, "DEFAULT_JOB_S", None)  # a job the entry does not list would time as None
        importlib.invalidate_caches()
        try:
            yield mp
        finally:
            _forget_toy_modules()


def test_the_toy_is_exactly_the_documented_files() -> None:
    places = documented_places(NAME)
    files = toy_files()
    outside = sorted(f for f in files if not any(f == p or (p.endswith("/") and f.startswith(p)) for p in places))
    assert not outside, f"toy files the documented list has no place for: {outside}"
    missing = [p for p in places if p != ENTRY and not any(f == p or f.startswith(p) for f in files)]
    assert not missing, f"documented places the toy does not fill: {missing}"
    # The entry names only the toy's own files (its protocol class included), never a core module.
    for part in ("protocol", "build", "plan", "score", "tables", "windows", "cases", "case_audio", "oracle",
                 "boards", "window_detail", "diagnostics"):
        module = getattr(TOY_BENCH, part).partition(":")[0]
        path = module.replace(".", "/")
        assert f"{path}.py" in files or f"{path}/__init__.py" in files, (part, module)
    # Each toy file keeps its layer's import rule, as the real packages do (tests/test_layering.py).
    for f in files:
        if f.endswith(".py"):
            rank = ORDER.index(f.split("/")[0])
            assert all(ORDER.index(p) <= rank for p in imported_packages(TOY / f)), f


def test_the_docs_list_the_same_places() -> None:
    """The list under docs/adding-a-benchmark.md's `bench-files` mark names exactly the documented places."""
    text = (ROOT / "docs" / "adding-a-benchmark.md").read_text()
    listed = text.split("<!-- bench-files", 1)[1].split("-->\n", 1)[1].split("\n\n", 1)[0]
    places = re.findall(r"^- `([^`]+)`:", listed, re.M)
    assert places == [where for where, _ in DOCUMENTED], places


def test_the_core_does_not_know_the_toy() -> None:
    for path in (*CORE, "eval/cli.py", ENTRY):
        text = (ROOT / path).read_text()
        assert f'"{NAME}"' not in text and f"'{NAME}'" not in text and "oracle_toy" not in text, path


def test_a_toy_benchmark_runs_end_to_end_from_its_own_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                                             ) -> None:
    from eval.cli import main as cli
    from eval.demo import ConfigRuns, _build, _print_block, _seconds

    with toy_installed():
        assert get_benchmark(NAME) is TOY_BENCH
        assert benchmark_names() == ["ifeval", "m3", "mpe", "toy"]
        data = tmp_path / "duplex-toy"
        # Built through the CLI, whose choices come from the registry, with the toy's own diagnostics.
        assert cli(["build", NAME, "--out", str(data), "--cache-dir", str(CACHE), "--no-speech-gate",
                    "--no-progress", "--diagnostics"]) == 0
        out = capsys.readouterr().out
        assert json.loads((data / "build-info.json").read_text())["configs"] == {"toy": 2}  # the statistics
        assert f"toy diagnostics of {data}:" in out
        assert "toy-00: 'What time is it?'" in out and "toy-01: 'Where is the station?'" in out
        # The demo's build job makes the same folder: the build is deterministic.
        _build(NAME, tmp_path / "demo-toy", "mini")
        assert dataset_fingerprint(config_shards(tmp_path / "demo-toy", "toy")) == \
            dataset_fingerprint(config_shards(data, "toy"))

        results = {}
        for agent in ("silent", "oracle"):
            run_dir = tmp_path / agent
            args = {"cache_dir": str(CACHE)} if agent == "oracle" else {}
            counts = run(RunConfig(dataset=str(data), config="toy", adapter=agent, out=str(run_dir),
                                   adapter_args=args))
            assert counts == {"cases": 2, "skipped_done": 0, "ok": 2, "failed": 0, "failed_kept": 0}, counts
            assert json.loads((run_dir / "run.json").read_text())["benchmark"] == NAME
            results[agent] = score_run_dir(run_dir)

        # Known answers: the oracle answers both questions inside the window, the silent agent neither (Wilson
        # 95 % intervals of 2/2 and 0/2 through metrics.stats).
        assert results["oracle"]["scores"] == {"answered": {"value": 1.0, "n": 2, "k": 2, "ci": [0.3424, 1.0]}}
        assert results["silent"]["scores"] == {"answered": {"value": 0.0, "n": 2, "k": 0, "ci": [0.0, 0.6576]}}
        assert results["oracle"]["health"]["flags"] == []
        assert results["silent"]["health"]["flags"][0].startswith("no model speech in 2/2 episodes")
        for r in results.values():
            assert r["benchmark"] == NAME and r["n_failed"] == 0 and r["n_episodes"] == 2
        # It was the toy's oracle script that spoke: the answer in its own text, right after the question.
        rec = json.loads((tmp_path / "oracle" / "toy-00.rec.json").read_text())
        assert [text for _, text in rec["model_text"]] == ["It is noon."]
        assert [e["turn_id"] for e in rec["timeline"]] == ["q"] and rec["timeline"][0]["start_s"] == 0.5
        for line in (tmp_path / "oracle" / "measurements.jsonl").read_text().splitlines():
            m = json.loads(line)
            assert 0.3 <= m["onset_s"] - m["window"][0] <= 0.6, m  # answer_delay_s 0.3, cues one frame late
            assert m["window"][1] - m["window"][0] == pytest.approx(2.0)

        # The CLI's score (stored measurements, no ASR) prints the toy's table.
        assert cli(["score", str(tmp_path / "oracle"), "--reuse", "--no-progress"]) == 0
        out = capsys.readouterr().out
        assert "-- answered within the window" in out and re.search(r"answered +1\.000 2/2 \[0\.34,1\.00\]", out)

        # The demo's timing and its printed block come from the entry.
        assert [_seconds(f"build {NAME}"), _seconds(f"{NAME} silent"), _seconds(f"{NAME} oracle")] == [7, 3, 4]
        _print_block(ConfigRuns(NAME, "toy", NAME, data, "mini", (tmp_path / "silent", tmp_path / "oracle")),
                     results)
        out = capsys.readouterr().out
        assert "=== Toy benchmark mini (value k/n [Wilson 95% CI]) ===" in out
        assert "0.000 0/2 [0.00,0.66]" in out and "1.000 2/2 [0.34,1.00]" in out

        page = write_report([tmp_path / "silent", tmp_path / "oracle"], tmp_path / "report", max_plots=1)
        index = page.read_text()
        assert "Toy leaderboard" in index and "answered within the window" in index
        assert "no text tables" not in index
        # Each window's verdict is the toy's own (its plot windows), with its own detail beside it.
        for agent, verdict in (("silent", "fail"), ("oracle", "pass")):
            rows = [w for ep in load_run(tmp_path / agent).episodes for w in ep.windows]
            assert [(w.label, w.verdict, w.group) for w in rows] == [("answer", verdict, "ask")] * 2, agent
            assert all(w.detail.startswith("no model speech" if agent == "silent" else "model speech began 0.")
                       for w in rows), [w.detail for w in rows]
        windows = (page.parent / "episodes.html").read_text()
        assert windows.count("no model speech began in the window") == 2
        assert windows.count("model speech began 0.") == 2  # the oracle's two windows, with their onsets

    # Gone again: nothing of the toy leaks into the tests that follow.
    assert NAME not in benchmark_names()
    assert not [m for m in sys.modules if any(m == t or m.startswith(t + ".") for t in TOY_MODULES)]
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("dataset_builder.toy")
