"""`duplex-eval push-metric NAME --space ORG/NAME --dry-run`: exactly what a Hub metric Space would receive, and a
Space made of those files works without the duplex-eval package installed. The upload itself is not run here;
without a token, or offline, it fails with one line that never shows the token."""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest
import yaml

from eval.cli import main as cli
from metrics import EVALUATE_MODULES, metric_names
from metrics.hub_metric import ROOT, space_files
from metrics.ifeval.headline import headline as ifeval_headline
from metrics.ifeval.verdicts import Thresholds as IFEvalThresholds
from metrics.m3.headline import headline as m3_headline
from metrics.m3.rules import RULE_SETS
from metrics.mpe.aggregate import aggregate
from metrics.mpe.headline import headline as mpe_headline
from metrics.mpe.verdicts import RECORDED, Thresholds

MODULES = metric_names()
FILE_LINE = re.compile(r"^  (\S+) +<- (.+?)  \(([\d,]+) bytes, sha256 ([0-9a-f]{12})\)$", re.M)


def dry_run(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    assert cli(["push-metric", *args, "--dry-run"]) == 0
    return capsys.readouterr().out


def section(out: str, dest: str) -> str:
    """The text the dry run prints for one file."""
    return out.split(f"===== {dest} =====\n", 1)[1].split("\n\n===== ", 1)[0].split("\n\ndry run:", 1)[0]


@pytest.mark.parametrize("name", MODULES)
def test_dry_run_lists_every_file_and_prints_what_it_writes(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    out = dry_run(capsys, name, "--space", "some-org/my_metric")
    assert out.rstrip().endswith("dry run: nothing uploaded")
    listed = {m.group(1): m for m in FILE_LINE.finditer(out)}
    files = {f.dest: f for f in space_files(name, "some-org/my_metric")}
    assert list(listed) == list(files)
    for dest, f in files.items():
        assert listed[dest].group(4) == f.sha256[:12] and int(listed[dest].group(3).replace(",", "")) == len(f.data)
    # The script, named after the Space (evaluate.load("ORG/NAME") fetches NAME.py), byte for byte.
    assert files["my_metric.py"].data == (EVALUATE_MODULES / name / f"{name}.py").read_bytes()
    # The copied scoring code: this checkout's files, byte for byte, and every project file the script reaches.
    copied = [d for d in files if d.startswith(("metrics/", "dataset_builder/"))]
    assert "metrics/__init__.py" in copied and all(files[d].data == (ROOT / d).read_bytes() for d in copied)
    assert "metrics/evaluate_modules/base.py" in copied  # the base every script subclasses
    assert not any(d.startswith(("adapters/", "eval/")) for d in files)
    # The standard evaluate widget app.
    assert section(out, "app.py") == ('import evaluate\nfrom evaluate.utils import launch_gradio_widget\n\n\n'
                                      'module = evaluate.load("some-org/my_metric")\nlaunch_gradio_widget(module)')
    # Requirements: every third-party import pinned to the version installed (and tested) here.
    pins = [line for line in section(out, "requirements.txt").splitlines() if not line.startswith("#")]
    for dist in ("evaluate", "datasets"):
        assert f"{dist}=={importlib.metadata.version(dist)}" in pins
    assert all(re.fullmatch(r"[A-Za-z0-9_.-]+==[\w.+-]+", p) for p in pins), pins
    # README: the Space header over the card.
    readme = section(out, "README.md")
    assert readme == files["README.md"].data.decode().rstrip("\n")
    header = yaml.safe_load(readme.split("---\n")[1])
    card = (EVALUATE_MODULES / name / "README.md").read_text()
    card_meta = yaml.safe_load(card.split("---\n")[1])
    assert header["sdk"] == "gradio" and header["app_file"] == "app.py" and header["sdk_version"].startswith("3.")
    assert header["python_version"] == "3.11" and header["title"] == card_meta["title"]
    assert header["tags"] == card_meta["tags"] and "evaluate" in header["tags"]
    assert 'evaluate.load("some-org/my_metric")' in readme
    assert card.split("## Metric Description", 1)[1].rstrip() in readme


def test_package_requirement_instead_of_copies(capsys: pytest.CaptureFixture[str]) -> None:
    req = "duplex-eval @ git+https://github.com/some-org/duplex-eval@0123456789abcdef0123456789abcdef01234567"
    out = dry_run(capsys, "stop_latency", "--space", "some-org/m3-stop", "--package", req)
    assert [m.group(1) for m in FILE_LINE.finditer(out)] == ["m3-stop.py", "README.md", "app.py", "requirements.txt"]
    pins = [line for line in section(out, "requirements.txt").splitlines() if not line.startswith("#")]
    assert pins[0] == req and f"evaluate=={importlib.metadata.version('evaluate')}" in pins
    # The script's base (metrics/evaluate_modules/base.py) imports datasets for the script: pinned as the script's own.
    assert pins[1:] == [f"{d}=={importlib.metadata.version(d)}" for d in ("datasets", "evaluate")]


# Spaces: each app's folder first on sys.path, and no duplex-eval installed (the editable install's finder and the
# repository removed, so only the copied files can provide `metrics`). One process for all of them (importing
# evaluate is the slow part): the copied packages are forgotten between Spaces, so each Space imports its own.
SPACES = """
import importlib.util, json, os, sys
sys.meta_path[:] = [f for f in sys.meta_path if not getattr(f, "__module__", "").startswith("__editable__")]
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != sys.argv[2]]
assert importlib.util.find_spec("adapters") is None, "duplex-eval is still importable"
import evaluate
out = {}
for name, job in json.loads(open(sys.argv[1]).read()).items():
    for mod in [m for m in sys.modules if m.split(".")[0] in ("metrics", "dataset_builder")]:
        del sys.modules[mod]
    sys.path.insert(0, job["space"])
    os.chdir(job["space"])
    module = evaluate.load(job["space"])
    import metrics
    assert metrics.__file__.startswith(job["space"]), metrics.__file__
    out[name] = module.compute(measurements=job["measurements"])
    sys.path.remove(job["space"])
print(json.dumps(out))
"""

MPE = [{"case_id": f"p0-{c}", "pair_id": "p0", "condition": c, "kind": "T", "label": "T", "active_at_end": False,
        "onset_latency_s": lat, "answer_verdict": "correct" if lat else None} for c, lat in (("explicit", 0.4),
                                                                                             ("implicit", None))]
MPE += [{"case_id": "p0-explicit", "pair_id": "p0", "condition": "explicit", "kind": "silence", "label": "N2",
         "speech_s": 1.2, "ack_verdict": "intrusion"},
        {"case_id": "p0-explicit", "pair_id": "p0", "condition": "explicit", "kind": "N4", "label": "N4",
         "window_speech_s": 1.0, "active_at_r_start": True, "stop_latency_s": 0.3, "new_onsets_in_r": 0}]
MPE = [m | {RECORDED: asdict(Thresholds())} for m in MPE]  # the thresholds the run was recorded with, as score stores
IFEVAL = [{"case_id": f"R1-C1-i1-{lv}", "conversation_id": "R1-C1-i1", "level": lv, "role": "R1", "probe": "C1",
           "expected_action": "LISTEN", "n_onsets": n, "verifier": {}, "matched_audio": False}
          for lv, n in (("L1", 0), ("L2", 1), ("L3", 0))]
M3 = [{"case_id": f"en-chat-d000-e0{i}-user", "group": "en_chat_user", "event_type": ev, "prompt_start_s": 1.0,
       "event_start_s": 5.0, "event_end_s": 5.0 if ev == "SHIFT" else 5.6, "duration_s": 15.0, "vad_spans": spans}
      for i, (ev, spans) in enumerate((("SHIFT", [[5.3, 7.0]]), ("BARGE_IN", [[3.0, 5.5]])))]


def expected(name: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The measurements a module gets and what the installed package computes from them."""
    if name == "duplex_mpe":
        return MPE, aggregate(MPE, Thresholds())
    if name in ("fresh_onset_rate", "silence_preservation", "answering_window_yield"):
        return MPE, mpe_headline(MPE, name, Thresholds())
    if name == "instruction_adherence":
        return IFEVAL, ifeval_headline(IFEVAL, IFEvalThresholds())
    return M3, m3_headline(M3, name, RULE_SETS["paper"])


def test_a_space_of_those_files_works_without_the_package(tmp_path: Path) -> None:
    jobs, want = {}, {}
    for name in MODULES:
        space = tmp_path / "spaces" / f"{name}_space"  # as the Hub checks it out: the folder named after the Space
        for f in space_files(name, f"some-org/{name}_space"):
            (space / f.dest).parent.mkdir(parents=True, exist_ok=True)
            (space / f.dest).write_bytes(f.data)
        records, want[name] = expected(name)
        jobs[name] = {"space": str(space), "measurements": [json.dumps(r) for r in records]}
    (tmp_path / "jobs.json").write_text(json.dumps(jobs))
    env = os.environ | {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "HF_EVALUATE_OFFLINE": "1",
                        "HF_HOME": str(tmp_path / "hf"), "HF_MODULES_CACHE": str(tmp_path / "modules")}
    env.pop("PYTHONPATH", None)
    proc = subprocess.run([sys.executable, "-c", SPACES, str(tmp_path / "jobs.json"), str(ROOT)],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got == json.loads(json.dumps(want))
    # The records were chosen so each benchmark's numbers are not empty.
    assert mpe_headline(MPE, "fresh_onset_rate", Thresholds())["k"] == 1
    assert ifeval_headline(IFEVAL, IFEvalThresholds())["entailment_gap"]["value"] == 1.0
    stop = m3_headline(M3, "stop_latency", RULE_SETS["paper"])["stop_latency"]["en_chat_user"]
    assert stop["barge_in_stop_latency"]["value"] == 0.5


def push_cli(env: dict[str, str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k not in ("HF_TOKEN", "PYTHONPATH")}
    return subprocess.run([sys.executable, "-m", "eval.cli", "push-metric", "takeover_rate", "--space",
                           "some-org/m3-tor"], capture_output=True, text=True, env=base | env, cwd=tmp_path,
                          timeout=300)


def test_upload_without_a_token_is_one_clear_line(tmp_path: Path) -> None:
    proc = push_cli({}, tmp_path)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip().splitlines() == [
        "error: push-metric: no Hugging Face token: set HF_TOKEN to a write token (or pass --dry-run to see what "
        "would be uploaded)"]


def test_upload_offline_is_one_line_without_the_token(tmp_path: Path) -> None:
    token = "hf_test_token_that_must_not_be_printed"
    proc = push_cli({"HF_TOKEN": token, "HF_HUB_OFFLINE": "1"}, tmp_path)
    assert proc.returncode == 2 and proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: push-metric: could not upload to Space some-org/m3-tor: ")
    assert "offline" in lines[0].lower() and token not in proc.stderr


def test_bad_names_are_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli(["push-metric", "nope", "--space", "some-org/x", "--dry-run"]) == 2
    assert "no metric module 'nope'; known: answering_window_yield, duplex_mpe" in capsys.readouterr().err
    assert cli(["push-metric", "stop_latency", "--space", "just-a-name", "--dry-run"]) == 2
    assert "expected ORG/NAME" in capsys.readouterr().err
