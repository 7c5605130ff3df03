"""Runs you can trust, the runner's side (docs/scale.md): a folder is never locked by a typo, a rebuilt dataset is never
mixed into a resumed run, `--force` starts over, `--limit` says how much of the set runs, progress shows time left."""

from __future__ import annotations

import io
import json
import logging
from pathlib import Path

import pytest

from dataset_builder.build import BuildOptions
from dataset_builder.errors import UsageError
from dataset_builder.mpe.build import build as build_mpe
from dataset_builder.progress import Progress
from dataset_builder.schema import SchemaError
from eval.cli import main
from eval.run import RunConfig, run


def files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


@pytest.mark.parametrize("change, error", [
    ({"adapter": "silnet"}, "unknown adapter 'silnet'"),
    ({"adapter": "no_such_module:Agent"}, "no_such_module"),
    ({"params": ["t_onset_windw_s=4"]}, "t_onset_windw_s"),
    ({"params": ["t_onset_window_s=-1"]}, "t_onset_window_s"),
    ({"config": "mpee"}, "mpee"),
    ({"cases": ["mpe-99999-explicit"]}, "no such case"),
])
def test_a_mistake_writes_nothing_and_locks_nothing(change: dict, error: str, mini_dataset: Path,
                                                     tmp_path: Path) -> None:
    """#5: run.json used to be written before the dataset and adapter were checked, so a typo locked the folder
    ("belongs to a different run"). Now nothing is written, and the corrected command just runs."""
    out = tmp_path / "run"
    base = {"dataset": str(mini_dataset), "adapter": "silent", "out": str(out), "limit": 1}
    with pytest.raises((UsageError, SchemaError), match=error):
        run(RunConfig(**{**base, **change}))
    assert files(out) == []
    counts = run(RunConfig(**base))
    assert counts["ok"] == 1


def test_resume_refuses_a_dataset_rebuilt_in_place(tmp_path: Path) -> None:
    """#4: resume checked the dataset's path, not its content: a set rebuilt with another seed was silently
    mixed into the run. The fingerprint in run.json now refuses it; --force starts the folder over."""
    data, out = tmp_path / "data", tmp_path / "run"
    cache = Path(__file__).resolve().parent.parent / ".cache" / "tts"
    build_mpe(data, BuildOptions(n=1, seed=1, cache_dir=cache))
    cfg = RunConfig(dataset=str(data), adapter="silent", out=str(out), limit=1)
    assert run(cfg)["ok"] == 1
    first = json.loads((out / "run.json").read_text())
    assert len(first["dataset_fingerprint"]) == 64 and first["n_dataset_cases"] == 2
    build_mpe(data, BuildOptions(n=1, seed=2, cache_dir=cache))  # same path, same case ids, other content
    before = {p.name: p.stat().st_mtime_ns for p in out.iterdir()}
    with pytest.raises(UsageError, match="has changed since"):
        run(RunConfig(**{**cfg.__dict__, "limit": 2}))
    assert {p.name: p.stat().st_mtime_ns for p in out.iterdir()} == before
    counts = run(RunConfig(**{**cfg.__dict__, "limit": 2, "force": True}))
    assert counts["ok"] == 2 and counts["skipped_done"] == 0
    assert json.loads((out / "run.json").read_text())["dataset_fingerprint"] != first["dataset_fingerprint"]


def test_force_removes_only_what_a_run_wrote(mini_dataset: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    run(RunConfig(dataset=str(mini_dataset), adapter="silent", out=str(out), limit=1))
    (out / "notes.txt").write_text("mine")
    run(RunConfig(dataset=str(mini_dataset), adapter="oracle", out=str(out), limit=1, force=True,
                  adapter_args={"cache_dir": str(Path(__file__).resolve().parent.parent / ".cache" / "tts")}))
    assert (out / "notes.txt").read_text() == "mine"
    assert json.loads((out / "run.json").read_text())["identity"]["adapter"] == "oracle"
    assert len(list(out.glob("*.rec.json"))) == 1


def test_cli_run_exit_codes(mini_dataset: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """#1, #8: every episode failed -> exit 1 with a closing line; a typo -> exit 2, one line, no traceback."""
    out = tmp_path / "broken"
    args = ["run", "--dataset", str(mini_dataset), "--adapter", "tests.fake_agents:BrokenAgent",
            "--adapter-arg", "mode=raise", "--out", str(out), "--limit", "2"]
    assert main(args) == 1
    err = capsys.readouterr().err
    assert "2 episode(s) failed" in err
    assert main(args) == 1  # a rerun keeps them, and still fails
    assert "--retry-failed" in capsys.readouterr().err
    assert main(["run", "--dataset", str(mini_dataset), "--adapter", "silent", "--out", str(tmp_path / "x"),
                 "--param", "endpoint=1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err


def test_limit_says_how_much_of_the_set_runs(mini_dataset: Path, tmp_path: Path,
                                             caplog: pytest.LogCaptureFixture) -> None:
    """A --limit run says how much of the set it runs: "6 of 12", three whole scenario pairs."""
    with caplog.at_level(logging.INFO, logger="duplex_eval.run"):
        run(RunConfig(dataset=str(mini_dataset), adapter="silent", out=str(tmp_path / "r"), limit=6))
    assert any("running 6 of 12 cases" in r.getMessage() and "covers 3 whole scenario pairs of 6" in r.getMessage()
               for r in caplog.records)


def test_progress_line_counts_and_time_left() -> None:
    """#11: long jobs show counts and time left; off a terminal at most every few seconds, plus the last."""
    stream = io.StringIO()
    bar = Progress("run oracle", 4, stream=stream, every_s=0.0)
    for _ in range(4):
        bar.advance()
    lines = stream.getvalue().splitlines()
    assert lines[0].startswith("run oracle  1/4   25%  elapsed 0:00  left ")
    assert lines[-1].startswith("run oracle  4/4  100%") and lines[-1].endswith("left 0:00")
    quiet = io.StringIO()
    bar = Progress("build mpe", 3, stream=quiet, enabled=False)
    bar.advance(3)
    assert quiet.getvalue() == ""
