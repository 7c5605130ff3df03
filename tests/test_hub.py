"""The Hub both ways, offline: `run --dataset ORG/NAME[@REV]` and `build --diagnostics-only --out ORG/NAME` read a
dataset repo through `huggingface_hub` from a local stand-in Hub (tests/hub_standin.py) into a private HF cache,
then from that cache offline; `push-results` writes exactly the folder it uploads (`--dry-run`), and the stand-in
receives it through `create_commit`'s preupload and commit endpoints."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from dataset_builder.errors import UsageError
from dataset_builder.hub_source import HubDataset, dataset_folder, hub_origin, hub_reference
from eval.cli import main
from eval.hub_results import headline_values
from tests.hub_standin import HubStandIn, Repo, folder_files

REPO = Path(__file__).resolve().parent.parent
SHA = "0123456789abcdef0123456789abcdef01234567"


# ---------------------------------------------------------------------------------------- what names the Hub

def test_hub_reference_rules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data" / "mpe-mini").mkdir(parents=True)
    assert hub_reference("me/mpe-mini") == HubDataset("me/mpe-mini", None)
    assert hub_reference("me/mpe-mini@v1.0") == HubDataset("me/mpe-mini", "v1.0")
    assert hub_reference(f"me/mpe-mini@{SHA}") == HubDataset("me/mpe-mini", SHA)
    assert hub_reference("data/mpe-mini") is None  # a local folder of that name wins
    assert hub_reference("hf://datasets/data/mpe-mini") == HubDataset("data/mpe-mini", None)  # ...unless forced
    for local in ("./me/mpe-mini", "/abs/me", "~/me/x", "a/b/c", "name", "me/x/", "me/x@", ".hidden/x"):
        assert hub_reference(local) is None, local
    with pytest.raises(UsageError, match="not a Hub dataset repo id"):
        hub_reference("hf://datasets/just-a-name")
    assert dataset_folder("./me/mpe-mini") == "./me/mpe-mini"  # a local path is returned as given, no network


def test_hub_origin_of_a_snapshot_folder() -> None:
    assert hub_origin(f"/c/hub/datasets--my-org--duplex-mpe/snapshots/{SHA}") == {
        "repo_id": "my-org/duplex-mpe", "revision": SHA}
    assert hub_origin("/data/mpe-mini") is None
    assert hub_origin(f"/c/hub/models--a--b/snapshots/{SHA}") is None  # a model repo is no dataset
    # push-results' card names a run's dataset by its Hub repo and commit when it was read from the Hub.
    from eval.hub_results import _dataset

    snapshot = f"/c/hub/datasets--my-org--duplex-mpe/snapshots/{SHA}"
    assert _dataset({"dataset": snapshot, "dataset_fingerprint": "f", "n_dataset_cases": 80}, {}) == {
        "hub": "my-org/duplex-mpe", "revision": SHA, "fingerprint": "f", "n_cases": 80}
    # A local set by its folder's name alone: its path is this machine's (the fingerprint says which data it was).
    assert _dataset({}, {"identity": {"dataset": "/data/mpe"}}) == {"name": "mpe", "fingerprint": None,
                                                                     "n_cases": None}


# ----------------------------------------------------------------------------------------------- fixtures

@pytest.fixture(scope="module")
def tiny_set(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real Duplex-MPE set of one scenario pair (two cases; real TTS from the clip cache, no speech gate)."""
    out = tmp_path_factory.mktemp("tiny") / "mpe-1"
    assert main(["build", "mpe", "--n", "1", "--no-speech-gate", "--no-progress", "--out", str(out)]) == 0
    return out


@pytest.fixture()
def hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[HubStandIn]:
    """The stand-in Hub, and huggingface_hub pointed at it with a private cache (its settings are module constants
    read at call time, so this process and the commands it runs in-process use them), online, with no token."""
    import huggingface_hub.constants as hconst

    server = HubStandIn().__enter__()
    monkeypatch.setattr(hconst, "ENDPOINT", server.endpoint)
    monkeypatch.setattr(hconst, "HUGGINGFACE_CO_URL_TEMPLATE",
                        server.endpoint + "/{repo_id}/resolve/{revision}/{filename}")
    monkeypatch.setattr(hconst, "HF_HUB_CACHE", str(tmp_path / "hf" / "hub"))
    monkeypatch.setattr(hconst, "HF_HUB_OFFLINE", False)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setenv("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    yield server
    server.close()


def hub_env(server: HubStandIn, tmp_path: Path, **extra: str) -> dict[str, str]:
    """The same settings for a subprocess, as a user sets them: environment variables."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    return env | {"HF_ENDPOINT": server.endpoint, "HF_HUB_CACHE": str(tmp_path / "hf" / "hub"),
                  "HF_HUB_DISABLE_PROGRESS_BARS": "1", "PYTHONPATH": str(REPO)} | extra


def one_error_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert len(err) == 1, err
    return err[0]


# ------------------------------------------------------------------------------------------------ reading

def test_run_reads_a_hub_dataset_and_then_offline(tiny_set: Path, hub: HubStandIn, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    repo = Repo()
    sha = repo.commit(folder_files(tiny_set))
    hub.repos["me/mpe-1"] = repo
    out = tmp_path / "run"
    # No --config: inferred from the downloaded folder, as from a local one.
    assert main(["run", "--dataset", "me/mpe-1", "--adapter", "silent", "--out", str(out), "--no-progress"]) == 0
    snapshot = Path(dataset_folder("me/mpe-1"))
    assert snapshot == tmp_path / "hf" / "hub" / "datasets--me--mpe-1" / "snapshots" / sha
    info = json.loads((out / "run.json").read_text())
    assert info["config"] == "mpe" and hub_origin(info["identity"]["dataset"]) == {"repo_id": "me/mpe-1",
                                                                                    "revision": sha}
    assert len(list(out.glob("*.rec.json"))) == 2
    used = {(m, p.split("/")[5] if p.startswith("/api/datasets/") else p.split("/")[4]) for m, p in hub.requests
            if p.startswith(("/api/datasets/me/mpe-1/", "/datasets/me/mpe-1/"))}
    assert used == {("GET", "revision"), ("GET", "tree"), ("HEAD", "resolve"), ("GET", "resolve")}, hub.requests

    # The same repo at its commit, with the stand-in gone: from the cache, and through the user's own setting.
    hub.close()
    proc = subprocess.run([sys.executable, "-m", "eval.cli", "run", "--dataset", f"me/mpe-1@{sha}", "--adapter",
                           "silent", "--out", str(tmp_path / "run-offline"), "--no-progress"],
                          env=hub_env(hub, tmp_path, HF_HUB_OFFLINE="1"), capture_output=True, text=True,
                          timeout=600, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert len(list((tmp_path / "run-offline").glob("*.rec.json"))) == 2
    # A repo never downloaded, offline: one line naming it, what stopped it and what to do.
    capsys.readouterr()
    import huggingface_hub.constants as hconst

    hconst.HF_HUB_OFFLINE = True  # restored by the fixture's monkeypatch
    assert main(["run", "--dataset", "me/other", "--adapter", "silent", "--out", str(tmp_path / "x")]) == 2
    assert one_error_line(capsys) == (
        "error: Hub dataset repo me/other (no local folder me/other exists; write ./me/other for a local path): "
        f"offline (HF_HUB_OFFLINE is set) and no copy is cached under {tmp_path / 'hf' / 'hub'}; run it once "
        "online (or fetch it with `hf download me/other --repo-type dataset`) first")


def test_unreachable_missing_and_unknown_revision_are_one_line(hub: HubStandIn, tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    hub.repos["me/ds"] = Repo()
    hub.repos["me/ds"].commit({"README.md": b"---\n---\n"})
    cases = [
        ("me/nope", "not found on the Hub {ep} (private? set HF_TOKEN to a token that can read it)"),
        ("me/ds@v9", "it has no revision 'v9' (a branch, tag or commit)"),
    ]
    for spec, why in cases:
        assert main(["run", "--dataset", spec, "--adapter", "silent", "--out", str(tmp_path / "r")]) == 2
        line = one_error_line(capsys)
        assert line.startswith(f"error: Hub dataset repo {spec} (no local folder {spec} exists;"), line
        assert line.endswith(why.format(ep=hub.endpoint)), line
    hub.close()  # nothing listens there any more
    assert main(["run", "--dataset", "me/ds", "--adapter", "silent", "--out", str(tmp_path / "r")]) == 2
    assert one_error_line(capsys).endswith(
        f"the Hub {hub.endpoint} cannot be reached and no copy is cached under {tmp_path / 'hf' / 'hub'}; run it "
        "once online (or fetch it with `hf download me/ds --repo-type dataset`) first")
    assert not (tmp_path / "r").exists()


def test_a_launched_process_reads_the_cache_only(hub: HubStandIn, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """`run --num-processes N`: the launching process downloads the set; each process it starts finds it in the
    cache without asking the Hub (so N processes never race to download it, nor see two commits)."""
    from eval.cli import parser
    from eval.launch import LAUNCH_ENV
    from eval.run import configs_from_args

    hub.repos["me/ds"] = Repo()
    hub.repos["me/ds"].commit({"README.md": b"---\n---\n"})
    with pytest.raises(UsageError, match="this process reads the HF cache only"):
        dataset_folder("me/ds", local_only=True)
    assert hub.requests == []
    folder = dataset_folder("me/ds")  # the launching process
    asked = len(hub.requests)
    monkeypatch.setenv(LAUNCH_ENV, str(tmp_path))
    a = parser().parse_args(["run", "--dataset", "me/ds", "--config", "mpe", "--adapter", "silent", "--out", "o"])
    assert [c.dataset for c in configs_from_args(a)] == [folder]
    assert len(hub.requests) == asked


def test_a_local_folder_of_the_same_name_wins(tiny_set: Path, hub: HubStandIn, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "me").mkdir()
    (tmp_path / "me" / "mpe-1").symlink_to(tiny_set)
    monkeypatch.chdir(tmp_path)
    assert main(["run", "--dataset", "me/mpe-1", "--adapter", "silent", "--out", "run", "--limit", "1",
                 "--no-progress"]) == 0
    assert hub.requests == []  # the stand-in has no such repo, and was never asked
    assert json.loads((tmp_path / "run" / "run.json").read_text())["identity"]["dataset"] == str(
        (tmp_path / "me" / "mpe-1").resolve())


def test_build_diagnostics_only_audits_a_hub_repo_without_writing_the_cache(
        hub: HubStandIn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    scripts = tmp_path / "scripts"
    assert main(["build", "mpe", "--n", "2", "--scripts-only", "--out", str(scripts)]) == 0
    repo = Repo()
    sha = repo.commit(folder_files(scripts))
    hub.repos["me/mpe-scripts"] = repo
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    assert main(["build", "mpe", "--diagnostics-only", "--out", "me/mpe-scripts", "--no-progress"]) == 0
    view = tmp_path / "out" / "hub" / f"me--mpe-scripts@{sha[:12]}"
    text = capsys.readouterr().out
    assert f"auditing Hub dataset me/mpe-scripts (commit {sha[:12]}) through out/hub/me--mpe-scripts@{sha[:12]}" in text
    assert f"diagnostics written to out/hub/me--mpe-scripts@{sha[:12]}/diagnostics.json" in text
    result = json.loads((view / "diagnostics.json").read_text())
    assert result["configs"]["mpe"]["source"] == "scripts.jsonl"
    snapshot = tmp_path / "hf" / "hub" / "datasets--me--mpe-scripts" / "snapshots" / sha
    assert sorted(p.name for p in snapshot.iterdir()) == sorted(folder_files(scripts))  # nothing added there


# ------------------------------------------------------------------------------------------------ pushing

def test_headline_values_of_each_benchmark_shape() -> None:
    rate = {"value": 0.25, "n": 8, "k": 2, "ci": [0.0715, 0.5907]}
    mean = {"value": 1.248, "n": 4, "ci": [1.1, 1.4], "sd": 0.1, "interval": "student-t-95", "n_failed": 0}
    gap = {"value": 0.1, "a": "L1", "b": "L2", "n_a": 48, "n_b": 48, "ci": [-0.05, 0.25], "paired": {"n_pairs": 48}}
    scores = {
        "scores": {"en_task_none": {"shift_tor": rate, "shift_latency": mean}},
        "representative": {"en_task": {"shift_tor": rate | {"from": ["none"]}}},
        "entailment_gap": gap,
        "pas": {"computed": False, "reason": "not computed (needs an LLM judge)"},
        "conflict_profile": {"computed": True, "judge": "openai", "L4a": {"persona-wins": rate}},
        "by_condition": {"explicit": {"fresh_onset_rate": rate}},  # a breakdown, not a headline
        "thresholds": {"value": 3},  # a setting, not a value: it has no n and is not under a headline block
    }
    got = headline_values(scores)
    assert got == [
        {"key": "scores.en_task_none.shift_tor", "metric": "shift_tor", "group": "en_task_none", "value": 0.25,
         "n": 8, "k": 2, "ci": [0.0715, 0.5907], "interval": "wilson-95"},
        {"key": "scores.en_task_none.shift_latency", "metric": "shift_latency", "group": "en_task_none",
         "value": 1.248, "n": 4, "ci": [1.1, 1.4], "interval": "student-t-95", "sd": 0.1},
        {"key": "representative.en_task.shift_tor", "metric": "shift_tor", "group": "en_task", "value": 0.25,
         "n": 8, "k": 2, "ci": [0.0715, 0.5907], "interval": "wilson-95"},
        {"key": "entailment_gap", "metric": "entailment_gap", "group": "overall", "value": 0.1, "n_a": 48,
         "n_b": 48, "a": "L1", "b": "L2", "ci": [-0.05, 0.25], "interval": "newcombe-95"},
        {"key": "pas", "metric": "pas", "group": "overall", "computed": False,
         "reason": "not computed (needs an LLM judge)", "value": None},
        {"key": "conflict_profile.L4a.persona-wins", "metric": "persona-wins", "group": "L4a", "value": 0.25,
         "n": 8, "k": 2, "ci": [0.0715, 0.5907], "interval": "wilson-95"},
    ]


@pytest.fixture(scope="module")
def scored_run(tiny_set: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The silent agent's run of the tiny set, scored by the real scorer."""
    out = tmp_path_factory.mktemp("runs") / "mpe-silent"
    assert main(["run", "--dataset", str(tiny_set), "--adapter", "silent", "--out", str(out), "--no-progress"]) == 0
    assert main(["score", str(out), "--no-progress"]) == 0
    return out


EXPECTED_FILES = ["README.md", "results.jsonl", "runs/mpe-silent/health.json", "runs/mpe-silent/parameters.json",
                  "runs/mpe-silent/report.md", "runs/mpe-silent/scores.json"]


def read_card(folder: Path) -> tuple[dict, str]:
    text = (folder / "README.md").read_text()
    assert text.startswith("---\n")
    _, front, body = text.split("---\n", 2)
    return yaml.safe_load(front), body


def test_push_results_dry_run_writes_exactly_the_folder(scored_run: Path, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "dry"
    capsys.readouterr()
    assert main(["push-results", str(scored_run), "--repo-id", "me/results", "--dry-run", "--out", str(folder)]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].startswith(f"dry run: wrote {folder} (6 files, ")
    assert [line.split()[0] for line in printed[1:]] == EXPECTED_FILES
    assert sorted(folder_files(folder)) == EXPECTED_FILES
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dry"]  # no temp folder left beside it

    scores = json.loads((scored_run / "scores.json").read_text())
    # The scores as score wrote them, with this machine's paths replaced (test_nothing_published_holds_a_local_path).
    published = json.loads((folder / "runs" / "mpe-silent" / "scores.json").read_text())
    assert published == scores | {"dataset": Path(scores["dataset"]).name,
                                  "scores_file": "runs/mpe-silent/scores.json"}
    front, body = read_card(folder)
    assert front["configs"] == [{"config_name": "results", "data_files": [{"split": "train", "path": "results.jsonl"}]}]
    (run,) = front["duplex_eval"]["runs"]
    assert {k: run[k] for k in ("run", "model", "benchmark", "config", "n_episodes", "n_failed")} == {
        "run": "mpe-silent", "model": "silent", "benchmark": "mpe", "config": "mpe", "n_episodes": 2, "n_failed": 0}
    from eval.orchestrator import HARNESS_VERSION

    assert run["harness_version"] == HARNESS_VERSION == front["duplex_eval"]["pushed_with"]
    assert run["dataset"]["name"] == Path(scores["dataset"]).name == "mpe-1" and run["dataset"]["n_cases"] == 2
    for key in ("asr", "judge", "thresholds", "vad"):
        assert run[key] == scores[key], key
    assert run["thresholds"] == {"t_onset_window_s": 5.0, "yield_tolerance_s": 1.0}
    # Every headline value with its n and interval: the six Duplex-MPE scores, exactly as scores.json has them.
    assert [r["metric"] for r in run["results"]] == list(scores["scores"])
    for r in run["results"]:
        s = scores["scores"][r["metric"]]
        assert (r["value"], r["n"], r["k"], r["ci"], r["interval"]) == (s["value"], s["n"], s["k"], s["ci"],
                                                                        "wilson-95")
    silence = next(r for r in run["results"] if r["metric"] == "silence_preservation")
    assert silence["value"] == 1.0 and silence["n"] == scores["scores"]["silence_preservation"]["n"] > 0
    rows = [json.loads(line) for line in (folder / "results.jsonl").read_text().splitlines()]
    assert len(rows) == 6 and rows[0]["model"] == "silent" and rows[0]["metric"] == "fresh_onset_rate"
    assert (rows[0]["value"], rows[0]["n"], rows[0]["ci_low"]) == (0.0, 2, 0.0)
    assert "| mpe-silent | silent | mpe | mpe | 2 of 2 | silence_preservation | overall | 1 |" in body
    assert run["coverage"] == scores["coverage"] == {"n_cases": 2, "n_dataset_cases": 2, "partial": False,
                                                     "selection": "every case", "text": "2 of 2 cases"}
    assert all((r["n_cases"], r["n_dataset_cases"], r["partial"]) == (2, 2, False) for r in rows)
    params = json.loads((folder / "runs" / "mpe-silent" / "parameters.json").read_text())
    assert params["protocol"]["t_onset_window_s"] == 5.0 and params["run"]["identity"]["adapter"] == "silent"
    assert "silence_preservation" in (folder / "runs" / "mpe-silent" / "report.md").read_text()


def test_push_results_refuses_unscored_runs_in_one_line(scored_run: Path, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    bare = tmp_path / "bare"
    bare.mkdir()
    folder = tmp_path / "dry"
    assert main(["push-results", str(scored_run), str(bare), "--repo-id", "me/r", "--dry-run", "--out",
                 str(folder)]) == 2
    assert one_error_line(capsys) == (f"error: push-results: {bare} has no scores.json: score it first "
                                      f"(duplex-eval score {bare})")
    assert not folder.exists()
    with pytest.raises(SystemExit) as exit_:  # argparse's own refusal: --repo-id is required
        main(["push-results", str(scored_run), "--dry-run"])
    assert exit_.value.code == 2
    assert one_error_line(capsys) == "error: push-results: the following arguments are required: --repo-id"


def test_a_partial_run_says_so_everywhere_and_is_pushed_only_when_allowed(
        tiny_set: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`--limit 1` of the two cases: scores.json, `score`'s lines and table, the card and every results.jsonl row say
    "1 of 2 cases" and PARTIAL; push-results refuses it in one line unless --allow-partial."""
    out = tmp_path / "mpe-limit"
    assert main(["run", "--dataset", str(tiny_set), "--adapter", "silent", "--out", str(out), "--limit", "1",
                 "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["score", str(out), "--no-progress"]) == 0
    printed = capsys.readouterr().out
    scores = json.loads((out / "scores.json").read_text())
    assert scores["coverage"] == {"n_cases": 1, "n_dataset_cases": 2, "partial": True, "selection": "--limit 1",
                                  "text": "1 of 2 cases, PARTIAL run (--limit 1)"}
    header = printed.splitlines()[0]
    assert header.endswith("covers 1 of 2 cases, PARTIAL run (--limit 1)"), header
    assert any(line.split() == ["cases", "1", "of", "2", "PARTIAL", "(--limit", "1)"] for line in
               printed.splitlines()), printed
    folder = tmp_path / "dry"
    assert main(["push-results", str(out), "--repo-id", "me/r", "--dry-run", "--out", str(folder)]) == 2
    assert one_error_line(capsys) == (
        f"error: push-results: {out} is a partial run: its scores cover 1 of 2 cases (chosen by --limit 1); run "
        "the rest into the same folder (the same `run` command without --limit/--sample/--case resumes it) and "
        "score it again, or pass --allow-partial to publish it marked PARTIAL")
    assert not folder.exists()
    assert main(["push-results", str(out), "--repo-id", "me/r", "--dry-run", "--out", str(folder),
                 "--allow-partial"]) == 0
    front, body = read_card(folder)
    (run,) = front["duplex_eval"]["runs"]
    assert run["coverage"]["partial"] is True and run["coverage"]["text"] == scores["coverage"]["text"]
    assert "**Partial runs** (mpe-limit)" in body
    assert "| mpe-limit | silent | mpe | mpe | 1 of 2 PARTIAL | fresh_onset_rate |" in body
    rows = [json.loads(line) for line in (folder / "results.jsonl").read_text().splitlines()]
    assert rows and all((r["n_cases"], r["n_dataset_cases"], r["partial"]) == (1, 2, True) for r in rows)
    assert "coverage: 1 of 2 cases, PARTIAL run (--limit 1)" in (folder / "runs/mpe-limit/report.md").read_text()


def test_push_results_uploads_one_commit_to_the_hub(scored_run: Path, hub: HubStandIn, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["push-results", str(scored_run), "--repo-id", "me/results"]) == 2  # no token
    assert one_error_line(capsys) == ("error: push-results: no Hugging Face token: set HF_TOKEN to a write token "
                                      "(or pass --dry-run to write the folder that would be uploaded)")
    assert hub.requests == []
    monkeypatch.setenv("HF_TOKEN", "hf_secret")
    hub.repos["me/results"] = Repo()
    hub.repos["me/results"].commit({".gitattributes": b"", "runs/old/scores.json": b"{}"})  # an earlier push
    assert main(["push-results", str(scored_run), "--repo-id", "me/results"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"pushed 1 run(s) to dataset repo me/results: {hub.endpoint}/datasets/me/results/commit/")
    assert "hf_secret" not in out
    posted = [p for m, p in hub.requests if m == "POST"]
    assert {"/api/repos/create", "/api/datasets/me/results/preupload/main",
            "/api/datasets/me/results/commit/main"} <= set(posted)
    # What the repo holds now is exactly what --dry-run writes (the earlier push's run gone in the same commit).
    assert main(["push-results", str(scored_run), "--repo-id", "me/results", "--dry-run", "--out",
                 str(tmp_path / "dry")]) == 0
    sha, files = hub.repos["me/results"].files_at("main")
    assert files == folder_files(tmp_path / "dry") | {".gitattributes": b""}
    assert len(hub.commit_bodies) == 1


def test_push_results_takes_the_html_report_along(scored_run: Path, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    report = tmp_path / "report"
    assert main(["report", str(scored_run), "--out", str(report), "--max-plots", "1"]) == 0
    folder = tmp_path / "dry"
    assert main(["push-results", str(scored_run), "--repo-id", "me/r", "--report", str(report), "--dry-run",
                 "--out", str(folder)]) == 0
    pushed = folder_files(folder)
    written = {k: v for k, v in folder_files(report).items() if not any(p.startswith(".") for p in k.split("/"))}
    assert {k[len("report/"):] for k in pushed if k.startswith("report/")} == set(written)
    # Byte for byte, but for this machine's paths (test_nothing_published_holds_a_local_path).
    assert all(pushed[f"report/{k}"] == v for k, v in written.items() if str(scored_run.parent).encode() not in v)
    assert sorted(k for k in pushed if not k.startswith("report/")) == EXPECTED_FILES

    capsys.readouterr()
    assert main(["push-results", str(scored_run), "--repo-id", "me/r", "--report", str(scored_run), "--dry-run",
                 "--out", str(tmp_path / "dry2")]) == 2
    assert one_error_line(capsys) == (f"error: --report {scored_run}: not a report folder (no index.html); write "
                                      "one with `duplex-eval report RUN... --out DIR`")
    assert not (tmp_path / "dry2").exists()


def test_nothing_published_holds_a_local_path(scored_run: Path, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    """The card, results.jsonl, parameters.json, the scores, health and the HTML report name the run as
    runs/<run> and the dataset by its folder's name: no path of this machine goes to the Hub, which the run's own
    files (scores.json, run.json, the report's pages) do hold."""
    report = tmp_path / "report"
    assert main(["report", str(scored_run), "--out", str(report), "--max-plots", "1"]) == 0
    folder = tmp_path / "dry"
    assert main(["push-results", str(scored_run), "--repo-id", "me/r", "--report", str(report), "--dry-run",
                 "--out", str(folder)]) == 0
    dataset = json.loads((scored_run / "scores.json").read_text())["dataset"]
    local = [str(scored_run.parent), str(Path(dataset).parent), str(tmp_path)]
    assert local[0].encode() in (scored_run / "scores.json").read_bytes()  # the run's own file holds them
    assert any(dataset.encode() in v for v in folder_files(report).values())  # and so does the report
    leaks = [(name, where) for name, data in folder_files(folder).items() for where in local
             if where.encode() in data]
    assert not leaks, leaks
    front, _ = read_card(folder)
    assert front["duplex_eval"]["runs"][0]["dataset"]["name"] == Path(dataset).name


def test_published_paths_stand_in_for_local_ones() -> None:
    from eval.hub_results import LocalPaths

    local = LocalPaths()
    local.add("/home/me/runs/silent", "runs/silent")
    local.add(f"/root/.cache/huggingface/hub/datasets--org--mpe/snapshots/{SHA}", f"org/mpe@{SHA}")
    assert local.json({"scores_file": "/home/me/runs/silent/scores.json", "n": 3, "args": {"model": "/w/ckpt"},
                       "list": [f"/root/.cache/huggingface/hub/datasets--org--mpe/snapshots/{SHA}"],
                       "url": "http://host/x", "name": "/home/me/runs/silent2"}) == {
        "scores_file": "runs/silent/scores.json", "n": 3, "args": {"model": "ckpt"}, "list": [f"org/mpe@{SHA}"],
        "url": "http://host/x", "name": "silent2"}
    # In the HTML report: the whole path only (not a longer folder name that starts with it).
    assert local.text("<td>/home/me/runs/silent</td> /home/me/runs/silent/x.wav /home/me/runs/silent2") == (
        "<td>runs/silent</td> runs/silent/x.wav /home/me/runs/silent2")
