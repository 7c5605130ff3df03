"""`make docs`: the docs site builds offline with mkdocs --strict (every page in the navigation, every link and
anchor resolved, the API reference's names found in the code), and the API page documents the adapter protocol."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_the_docs_site_builds_offline_and_strict(tmp_path: Path) -> None:
    pytest.importorskip("mkdocs", reason="the docs extra (pip install -e .[docs]; `make setup` installs it)")
    pytest.importorskip("mkdocstrings_handlers.python", reason="the docs extra (mkdocstrings-python)")
    env = os.environ | {"HF_HUB_OFFLINE": "1", "NO_PROXY": "*", "http_proxy": "http://127.0.0.1:9",
                        "https_proxy": "http://127.0.0.1:9"}  # any fetch would fail: the build must need none
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    api = (tmp_path / "site" / "api" / "index.html").read_text()
    for name in ("DuplexAgent", "BatchedDuplexAgent", "Frame", "run_episode", "score_run_dir", "MPEProtocol"):
        assert name in api, name
    assert (tmp_path / "site" / "benchmarks" / "m3" / "index.html").exists()
