"""benchmarks/gpu_smoke.py: refuses cleanly on a machine without a CUDA GPU (one line, exit status 3, nothing
built), and its whole path (datasets, both passes, the sample-for-sample comparison, feasibility, the table) runs
as a `--cpu-tiny` dry run on the tiny random Moshi-family model. Its real run needs a GPU and the weights
(docs/models.md#gpu-smoke)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "benchmarks" / "gpu_smoke.py"


def run(args: list[str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", PYTHONPATH=str(REPO), NO_TORCH_COMPILE="1")
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=1800)


def test_refuses_cleanly_without_a_gpu(tmp_path: Path) -> None:
    done = run(["--out", str(tmp_path / "out")], tmp_path)
    assert done.returncode == 3, done.stderr
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("gpu_smoke: refused: no CUDA GPU")
    assert not (tmp_path / "out").exists()  # refused before building or loading anything


def test_a_bad_adapter_argument_is_a_usage_error(tmp_path: Path) -> None:
    done = run(["--cpu-tiny", "--adapter-arg", "tiny=1"], tmp_path)
    assert done.returncode == 2 and "is not ADAPTER.KEY=VALUE" in done.stderr


def test_cpu_tiny_dry_run_compares_both_passes(mini_sets: Mapping[str, Path], tmp_path: Path) -> None:
    pytest.importorskip("moshi", reason="the `moshi` package is not installed: `make setup`")
    data = tmp_path / "data"
    data.mkdir()
    (data / "m3").symlink_to(mini_sets["m3"])
    out = tmp_path / "out"
    done = run(["--cpu-tiny", "--adapters", "j-moshi,minicpm-o", "--configs", "m3_chat_ja", "--cases", "2",
                "--batch", "2", "--data", str(data), "--out", str(out)], tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = json.loads((out / "gpu-smoke.json").read_text())
    (row,) = rows["rows"]
    assert rows["device"] is None and row["adapter"] == "j-moshi"
    assert (row["episodes"], row["ok"] + row["skipped"], row["same samples"], row["agree"]) == (2, 2, "2/2", True)
    assert "ms of 80 ms" in row["step B=1"] and "ms of 80 ms" in row["step B=2"]
    assert rows["skipped"] == ["minicpm-o: no tiny model (--cpu-tiny runs the Moshi-family presets only)"]
    assert "| adapter |" in done.stdout and "skipped minicpm-o" in done.stdout
    assert sorted(p.name for p in (out / "j-moshi" / "one").glob("*.wav")) == \
        sorted(p.name for p in (out / "j-moshi" / "batched").glob("*.wav"))
