"""The command line says what it takes: every option and argument of every subcommand has help, each default worth
stating is in it, a flag that reads like a list takes one (comma-separated or the flag again), a required option is
shown required, and `--version` names the commit when run from a checkout."""

from __future__ import annotations

import argparse
import importlib.metadata
import subprocess
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

import eval.orchestrator as orchestrator
from eval.cli import parser
from eval.run import comma_list, configs_from_args

ROOT = Path(__file__).resolve().parent.parent


def subcommands(p: argparse.ArgumentParser, name: str = "duplex-eval") -> Iterator[tuple[str, argparse.ArgumentParser]]:
    yield name, p
    for action in p._actions:  # argparse keeps its subparsers nowhere public
        if isinstance(action, argparse._SubParsersAction):
            for sub, sp in action.choices.items():
                yield from subcommands(sp, sub)


def shown_actions(p: argparse.ArgumentParser) -> Iterator[argparse.Action]:
    """What `--help` lists (a suppressed one is a refusal with a hint, such as `push FOLDER REPO`)."""
    for action in p._actions:
        if not isinstance(action, argparse._SubParsersAction | argparse._HelpAction) and \
                action.help != argparse.SUPPRESS:
            yield action


def name_of(action: argparse.Action) -> str:
    return "/".join(action.option_strings) or action.dest


def test_every_option_and_argument_has_help() -> None:
    missing = [f"{cmd} {name_of(a)}" for cmd, p in subcommands(parser()) for a in shown_actions(p)
               if not (a.help or "").strip()]
    assert not missing, missing
    assert len(list(subcommands(parser()))) == 14  # the walk reached every subcommand


def test_every_stated_default_is_in_the_help() -> None:
    """An option whose default is a value (not off, not empty, not "decided later") says it: `report --out` writes to
    out/report unless told otherwise, and the help says so."""
    silent = []
    for cmd, p in subcommands(parser()):
        formatter = p._get_formatter()
        for a in shown_actions(p):
            default = a.default
            if default in (None, False, [], "", argparse.SUPPRESS) or isinstance(a, argparse._StoreConstAction):
                continue  # unset, off, or empty: nothing to state (store_true/false are store_const)
            text = formatter._expand_help(a)
            shown = f"{default:g}" if isinstance(default, float) else str(default)
            if shown not in text:
                silent.append(f"{cmd} {name_of(a)} (default {default!r}): {text}")
    assert not silent, silent


def test_the_help_of_report_out_and_demo_names_their_folders() -> None:
    report = dict(subcommands(parser()))["report"].format_help()
    assert "--out DIR" in report and "(default out/report)" in " ".join(report.split())
    demo = " ".join(dict(subcommands(parser()))["demo"].format_help().split())
    assert "datasets/, runs/ and report/ (default out)" in demo and "(default silent,oracle,cascade)" in demo


@pytest.mark.parametrize("command", ["push", "push-results"])
def test_repo_id_is_shown_required(command: str) -> None:
    usage = dict(subcommands(parser()))[command].format_usage()
    assert " --repo-id ORG/NAME " in usage and "[--repo-id" not in usage


def test_one_spelling_of_config() -> None:
    """`--config` on build and run alike (no `--configs`), each taking several names either way."""
    for cmd in ("build", "run"):
        options = {o for a in shown_actions(dict(subcommands(parser()))[cmd]) for o in a.option_strings}
        assert "--config" in options and "--configs" not in options, cmd


def test_list_flags_take_lists(tmp_path: Path) -> None:
    assert comma_list(["a,b", "c", " a ", None, ""]) == ["a", "b", "c"]
    assert comma_list("x, y,,") == ["x", "y"] and comma_list(None) == []
    args = parser().parse_args(["run", "--dataset", str(tmp_path), "--config", "mpe", "--adapter", "silent",
                                "--out", str(tmp_path / "o"), "--case", "mpe_a,mpe_b", "--case", "mpe_c"])
    (cfg,) = configs_from_args(args)
    assert cfg.cases == ["mpe_a", "mpe_b", "mpe_c"]
    args = parser().parse_args(["run", "--dataset", str(tmp_path), "--config", "mpe", "--config", "ifeval",
                                "--adapter", "silent", "--out", str(tmp_path / "o")])
    assert [c.config for c in configs_from_args(args)] == ["mpe", "ifeval"]


# ------------------------------------------------------------------------------------------------- --version

def _git(cwd: Path, *argv: str) -> str:
    return subprocess.run(["git", "-C", str(cwd), *argv], check=True, capture_output=True, text=True).stdout.strip()


def test_version_names_the_commit_of_a_checkout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = tmp_path / "checkout"
    repo.mkdir()
    _git(repo, "init", "-q")
    (repo / "f.txt").write_text("one\n")
    _git(repo, "add", "f.txt")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "one")
    head = _git(repo, "rev-parse", "HEAD")
    monkeypatch.setattr(orchestrator, "CHECKOUT", repo)
    assert orchestrator.version_text() == f"duplex-eval {orchestrator.HARNESS_VERSION} (commit {head[:12]})"
    (repo / "f.txt").write_text("two\n")
    assert orchestrator.version_text().endswith(f"(commit {head[:12]}, with local changes)")


def test_version_of_an_installed_copy_is_the_version_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Installed (no .git beside the packages, even where the install sits inside a checkout's .venv): no commit."""
    inside = tmp_path / ".venv" / "site-packages"
    inside.mkdir(parents=True)
    _git(tmp_path, "init", "-q")  # a checkout around it is not this code's
    monkeypatch.setattr(orchestrator, "CHECKOUT", inside)
    assert orchestrator.version_text() == f"duplex-eval {orchestrator.HARNESS_VERSION}"


def test_the_version_of_a_checkout_is_its_pyproject_even_when_the_install_is_older(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An editable install keeps the version it was installed at; the checkout's pyproject.toml is the code's."""
    monkeypatch.setattr(importlib.metadata, "version", lambda name: "0.0.1")
    with (ROOT / "pyproject.toml").open("rb") as f:
        assert orchestrator._harness_version() == tomllib.load(f)["project"]["version"]
    monkeypatch.setattr(orchestrator, "CHECKOUT", tmp_path)  # an installed copy: its metadata
    assert orchestrator._harness_version() == "0.0.1"
