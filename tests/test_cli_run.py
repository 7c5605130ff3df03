"""The `run` and `build` command lines over the real mini sets: which configs a command means (inferred from the
folder, benchmark names, comma lists; `build BENCHMARK` and `--config` alike), `--sample` and `--limit`, `--version`,
the one `error: ...` line, and `run --num-processes` with a real Ctrl-C (SIGINT to real processes).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import psutil
import pytest

from dataset_builder.benchmarks import get_benchmark
from dataset_builder.errors import UsageError
from eval.cli import _interrupted_line, build_selection, main, parser
from eval.launch import free_port
from eval.orchestrator import HARNESS_VERSION
from eval.run import Interrupted, RunConfig, Tally, resolve_configs, run
from eval.selection import covered, select_cases, stratified_sample

ROOT = Path(__file__).resolve().parent.parent
M3_CONFIGS = ["m3_chat_en", "m3_task_en", "m3_chat_ja", "m3_task_ja"]
INTERRUPTED = re.compile(r"^interrupted; (\d+) episodes kept(?: by (\d) processes)?; rerun the same command to resume$")


def recs(out: Path) -> list[str]:
    return sorted(p.name.removesuffix(".rec.json") for p in out.glob("*.rec.json"))


def json_lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


@pytest.fixture(scope="module")
def two_benchmarks(mini_sets, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One folder holding the configs of two benchmarks (DSB-IFEval's and M3's data folders side by side)."""
    folder = tmp_path_factory.mktemp("mixed")
    (folder / "data").mkdir()
    for name in ("ifeval", "m3"):
        for config in (mini_sets[name] / "data").iterdir():
            (folder / "data" / config.name).symlink_to(config, target_is_directory=True)
    return folder


# --------------------------------------------------------------------------------------------- which configs

def test_a_folder_of_one_benchmark_needs_no_config(mini_sets, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    ifeval, m3 = str(mini_sets["ifeval"]), str(mini_sets["m3"])
    # DSB-IFEval runs its first config (ifeval_matched is a subset its scorer reports from the same run); M3 all four.
    assert resolve_configs(ifeval, None) == ["ifeval"]
    assert resolve_configs(m3, None) == M3_CONFIGS
    out = tmp_path / "run"
    assert main(["run", "--dataset", ifeval, "--adapter", "silent", "--out", str(out), "--limit", "2",
                 "--no-progress"]) == 0
    assert json.loads((out / "run.json").read_text())["config"] == "ifeval"
    assert [(c["cases"], c["ok"]) for c in json_lines(capsys.readouterr().out)] == [(2, 2)]


def test_benchmark_names_and_comma_lists(mini_sets, two_benchmarks: Path) -> None:
    ifeval, m3, mixed = str(mini_sets["ifeval"]), str(mini_sets["m3"]), str(two_benchmarks)
    assert resolve_configs(m3, "m3") == M3_CONFIGS
    assert resolve_configs(m3, "m3_task_ja") == ["m3_task_ja"]
    assert resolve_configs(m3, "m3_task_ja, m3_chat_en,m3_task_ja") == ["m3_task_ja", "m3_chat_en"]
    assert resolve_configs(ifeval, "ifeval,ifeval_matched") == ["ifeval", "ifeval_matched"]
    assert resolve_configs(mixed, "ifeval,m3") == ["ifeval", *M3_CONFIGS]
    with pytest.raises(UsageError, match=r"holds configs of 2 benchmarks \(ifeval, m3\); say which with --config"):
        resolve_configs(mixed, None)
    with pytest.raises(UsageError, match=r"--config m3: .* has no config of benchmark m3"):
        resolve_configs(ifeval, "m3")
    with pytest.raises(UsageError, match=r"--config 'ifevl' is neither a benchmark \(ifeval, m3, mpe\) nor"):
        resolve_configs(ifeval, "ifevl")


def test_run_takes_the_benchmark_as_build_does(mini_sets, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    m3 = str(mini_sets["m3"])
    out = tmp_path / "m3"
    # `run BENCHMARK` as `build BENCHMARK`; two configs: each its own run folder under --out, each its summary.
    assert main(["run", "m3_chat_en,m3_task_ja", "--dataset", m3, "--adapter", "silent", "--out", str(out),
                 "--limit", "1", "--no-progress"]) == 0
    stdout = capsys.readouterr().out
    assert sorted(p.name for p in out.iterdir()) == ["m3_chat_en", "m3_task_ja"]
    assert [len(recs(out / c)) for c in ("m3_chat_en", "m3_task_ja")] == [1, 1]
    assert [json.loads((out / c / "run.json").read_text())["config"] for c in ("m3_chat_en", "m3_task_ja")] == [
        "m3_chat_en", "m3_task_ja"]
    assert [(c["cases"], c["ok"]) for c in json_lines(stdout)] == [(1, 1), (1, 1)]
    assert f"== m3_chat_en: {out / 'm3_chat_en'}" in stdout
    assert main(["run", "mpe", "--config", "m3", "--dataset", m3, "--adapter", "silent", "--out", str(out)]) == 2
    assert capsys.readouterr().err == "error: run: two benchmarks given (mpe and --config m3); give one\n"


def test_build_takes_the_benchmark_either_way() -> None:
    def sel(*argv: str) -> tuple[str, tuple[str, ...] | None]:
        bench, configs = build_selection(parser().parse_args(["build", *argv]))
        return bench.name, configs

    assert sel("ifeval") == sel("--config", "ifeval") == ("ifeval", None)  # the benchmark: all its configs
    assert sel("m3", "--config", "m3_chat_en") == sel("--config", "m3_chat_en") == ("m3", ("m3_chat_en",))
    assert sel("--config", "m3_task_ja,m3_chat_en") == ("m3", ("m3_task_ja", "m3_chat_en"))
    assert sel("--config", "m3_task_ja", "--config", "m3_chat_en") == ("m3", ("m3_task_ja", "m3_chat_en"))
    with pytest.raises(UsageError, match=r"build: give the configs as --config m3_chat_en \(there is no --configs\)"):
        sel("m3", "--configs", "m3_chat_en")  # one spelling, as run has it
    with pytest.raises(UsageError, match="build: one benchmark at a time; mpe, ifeval name mpe, ifeval"):
        sel("mpe", "--config", "ifeval")
    with pytest.raises(UsageError, match=r"build: name the benchmark: duplex-eval build BENCHMARK \(ifeval, m3, mpe\)"):
        sel()
    with pytest.raises(UsageError, match="unknown dataset config 'nope'"):
        sel("--config", "nope")


# -------------------------------------------------------------------------------------------- --sample, --limit

def test_stratified_sample_draws_whole_groups_spread_over_each_dimension() -> None:
    # 3 roles x 2 modes, each stratum holding 2 conversations of 4 levels: 12 conversations, 48 cases.
    cases = [SimpleNamespace(case_id=f"{role}-{mode}-c{c}-L{lv}", role=role, mode=mode, group=f"{role}-{mode}-c{c}")
             for role in ("R1", "R2", "R3") for mode in ("take", "barge") for c in (1, 2) for lv in range(4)]

    def strata(c: SimpleNamespace) -> tuple[tuple[str, str], str]:
        return (f"role {c.role}", f"turn 2 {c.mode}"), c.group

    def whole(sample: list[SimpleNamespace]) -> bool:
        groups = Counter(c.group for c in sample)
        return all(k == 4 for k in groups.values())

    # Asked for 4 cases: one whole conversation (all 4 levels), never 4 levels of 4 conversations.
    four = stratified_sample(cases, 4, 0, strata)
    assert len(four) == 4 and whole(four) and len({c.group for c in four}) == 1
    # At least 9 cases: 3 whole conversations, one per role.
    nine = stratified_sample(cases, 9, 0, strata)
    assert len(nine) == 12 and whole(nine) and sorted(c.role for c in nine[::4]) == ["R1", "R2", "R3"]
    # 6 conversations: each role twice, each once per mode.
    six = stratified_sample(cases, 24, 0, strata)
    assert whole(six) and Counter((c.role, c.mode) for c in six[::4]) == {
        (r, m): 1 for r in ("R1", "R2", "R3") for m in ("take", "barge")}
    assert [cases.index(c) for c in six] == sorted(cases.index(c) for c in six)  # dataset order
    assert [c.case_id for c in stratified_sample(cases, 24, 0, strata)] == [c.case_id for c in six]
    assert len({tuple(c.case_id for c in stratified_sample(cases, 8, s, strata)) for s in range(6)}) > 1
    assert stratified_sample(cases, 60, 0, strata) == cases
    with pytest.raises(UsageError, match="--sample must be >= 1, got 0"):
        stratified_sample(cases, 0, 0, strata)
    with pytest.raises(UsageError, match="give --limit N .* or --sample N .*, not both"):
        select_cases(cases, limit=2, sample=2)


def test_covered_says_which_groups_and_strata_a_choice_leaves_out() -> None:
    cases = [SimpleNamespace(case_id=f"{role}-c{c}-L{lv}", role=role, group=f"{role}-c{c}")
             for role in ("R1", "R2", "R3") for c in (1, 2) for lv in range(4)]

    def strata(c: SimpleNamespace) -> tuple[tuple[str], str]:
        return (f"role {c.role}",), c.group

    first, _ = select_cases(cases, limit=6)  # --limit 6: R1-c1 whole, 2 levels of R1-c2, nothing of R2 or R3
    assert covered(first, cases, strata, "conversation") == (
        "1 whole conversation of 6 and part of 1 more (a split conversation has no complete comparison); "
        "role R1 only; none of role R2, role R3")
    assert covered(stratified_sample(cases, 12, 0, strata), cases, strata, "conversation") == (
        "3 whole conversations of 6")
    assert covered(cases, cases, strata, "conversation") == "6 whole conversations of 6"
    assert covered(first, cases, None) == ""


def groups_of(cases: list, key) -> Counter:
    return Counter(key(c) for c in cases)


def test_sample_of_the_real_sets_draws_whole_pairs_conversations_and_dialogues(mini_sets) -> None:
    mpe = get_benchmark("mpe")
    mpe_cases = mpe.function("cases")(mini_sets["mpe"], "mpe")
    four = stratified_sample(mpe_cases, 4, 0, mpe.function("strata"))
    # Two whole scenario pairs (explicit and implicit each), of two cue kinds: the paired test has its pairs.
    assert groups_of(four, lambda c: c.script.pair_id) == dict.fromkeys({c.script.pair_id for c in four}, 2)
    assert len(four) == 4 and Counter(c.script.condition for c in four) == {"explicit": 2, "implicit": 2}
    assert len({c.script.cue for c in four}) == 2
    ifeval = get_benchmark("ifeval")
    items = ifeval.function("cases")(mini_sets["ifeval"], "ifeval")
    size = groups_of(items, lambda c: c.case.conversation_id)
    first = items[0].case.conversation_id
    three = stratified_sample(items, 2 * size[first] + 1, 0, ifeval.function("strata"))
    drawn = groups_of(three, lambda c: c.case.conversation_id)
    assert all(drawn[g] == size[g] for g in drawn), "every level of each conversation drawn"
    roles = [c.case.role for c in three if c.case.level == "L0"]
    assert len(drawn) == 3 and len(roles) == len(set(roles)) == 3  # three conversations, of three roles
    m3 = get_benchmark("m3")
    m3_cases = m3.function("cases")(mini_sets["m3"], "m3_chat_en")
    some = stratified_sample(m3_cases, 5, 0, m3.function("strata"))
    dialogues = {c.event.dialogue_id for c in some}
    # Every event of each dialogue drawn, under every condition.
    assert some == [c for c in m3_cases if c.event.dialogue_id in dialogues]
    assert {c.condition for c in some} == {"none", "user", "full"}


def test_limit_says_what_it_covers(mini_sets, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """`--limit 2` on DSB-IFEval takes two levels of the first conversation: the run says it covers role R1 only
    and a split conversation."""
    ifeval = str(mini_sets["ifeval"])
    with caplog.at_level("INFO", logger="duplex_eval.run"):
        assert main(["run", "--dataset", ifeval, "--config", "ifeval", "--adapter", "silent", "--limit", "2",
                     "--out", str(tmp_path / "run"), "--no-progress"]) == 0
    (line,) = [r.getMessage() for r in caplog.records if r.getMessage().startswith("running 2 of ")]
    assert "the first (--limit 2); covers 0 whole conversations of " in line
    assert "and part of 1 more (a split conversation has no complete comparison); role R1 only; none of role R2, " \
        "role R3, " in line, line


def test_limit_and_sample_count_only_cases_the_adapter_can_run(mini_sets) -> None:
    m3 = get_benchmark("m3")
    cases = m3.function("cases")(mini_sets["m3"], "m3_chat_en")
    needs = m3.function("needs")
    n_full = sum(c.condition == "full" for c in cases)
    n_other = len(cases) - n_full
    assert n_full >= 2 and n_other >= 2, "the mini chat config needs cases of both kinds"
    limit = n_other + 1  # one more than an adapter without teacher forcing can run
    for capabilities, want in ((frozenset(), (n_other, n_full)), (frozenset({"teacher_forcing"}), (limit, 0))):
        chosen, left_out = select_cases(cases, limit=limit, runnable=lambda c, cap=capabilities: needs(c) <= cap)
        assert (len(chosen), left_out) == want
        assert all(needs(c) <= capabilities for c in chosen)
        sampled, _ = select_cases(cases, sample=5, runnable=lambda c, cap=capabilities: needs(c) <= cap,
                                  strata=m3.function("strata"))
        dialogues = {c.event.dialogue_id for c in sampled}
        # Whole dialogues of the cases the adapter can run: no Full case for one that cannot teacher-force.
        assert len(sampled) >= 5 and sampled == [c for c in cases if c.event.dialogue_id in dialogues
                                                 and needs(c) <= capabilities]


def test_run_sample_is_deterministic_and_recorded(mini_sets, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    m3 = str(mini_sets["m3"])
    args = ["run", "--dataset", m3, "--config", "m3_chat_en", "--adapter", "silent", "--sample", "5", "--seed", "1",
            "--no-progress"]
    assert main([*args, "--out", str(tmp_path / "a")]) == 0
    assert main([*args, "--out", str(tmp_path / "b")]) == 0
    cases = get_benchmark("m3").function("cases")(mini_sets["m3"], "m3_chat_en")
    n_full = sum(c.condition == "full" for c in cases)
    n = len(cases) - n_full  # whole dialogues: the mini chat config's one dialogue, less its Full cases
    assert [(c["cases"], c["ok"]) for c in json_lines(capsys.readouterr().out)] == [(n, n), (n, n)]
    a = recs(tmp_path / "a")
    assert a == recs(tmp_path / "b") and len(a) == n >= 5
    assert not [r for r in a if r.endswith("-full")]  # silent cannot teacher-force: no slot spent on Full
    info = json.loads((tmp_path / "a" / "run.json").read_text())
    assert info["selections"] == [{"limit": None, "sample": 5, "seed": 1, "case_ids": None, "n_cases": n,
                                   "left_out_not_runnable": n_full}]
    assert info["n_dataset_cases"] == len(cases)


# ----------------------------------------------------------------------------------------- version and errors

def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    # From this checkout: the version and its commit (tests/test_cli_help.py: an installed copy, the version alone).
    assert re.fullmatch(rf"duplex-eval {re.escape(HARNESS_VERSION)} \(commit [0-9a-f]{{12}}(, with local changes)?\)\n",
                        capsys.readouterr().out)
    assert re.fullmatch(r"\d+\.\d+\.\d+", HARNESS_VERSION)


@pytest.mark.parametrize(("argv", "line"), [
    (["run", "--dataset", "x"], "error: run: the following arguments are required: --adapter, --out"),
    (["build", "--preset"], "error: build: argument --preset: expected one argument"),
    (["frobnicate"], "error: duplex-eval: argument command: invalid choice: 'frobnicate' (choose from 'build', "
                     "'run', 'score', 'report', 'export', 'import', 'text-reference', 'push', 'push-results', "
                     "'push-metric', 'events', "
                     "'demo', 'check-adapter')"),
    (["run", "--dataset", "/nonexistent-cli", "--adapter", "silent", "--out", "o"],
     "error: dataset folder /nonexistent-cli does not exist"),
    (["push", "/tmp", "me/x"], "error: push: give the repo as --repo-id me/x (the only argument after the folder is "
                               "the folder itself): duplex-eval push /tmp --repo-id me/x"),
    (["build"], "error: build: name the benchmark: duplex-eval build BENCHMARK (ifeval, m3, mpe)"),
])
def test_every_error_is_one_error_line(argv: list[str], line: str, capsys: pytest.CaptureFixture[str]) -> None:
    try:
        code = main(argv)
    except SystemExit as exit_:  # argparse's own errors exit from inside parse_args
        code = exit_.code
    assert code == 2
    err = capsys.readouterr().err
    assert [x for x in err.splitlines() if x.startswith("error")] == [line]
    assert err.endswith(line + "\n") and "Traceback" not in err


# ------------------------------------------------------------------------------------ processes and Ctrl-C

def _default_ctrl_c() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _start(argv: list[str]) -> subprocess.Popen:
    """`duplex-eval ARGV` as a user starts it from a terminal: its own process group, which Ctrl-C signals, and
    SIGINT's default action even where the suite itself was started with SIGINT ignored (`cmd &` in a
    non-interactive shell, nohup), which a child would otherwise inherit."""
    env = os.environ | {"HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-m", "eval.cli", *argv], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True, preexec_fn=_default_ctrl_c)


def _ctrl_c_after(proc: subprocess.Popen, out: Path, n: int) -> tuple[str, str]:
    deadline = time.monotonic() + 240
    while len(recs(out)) < n and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert proc.poll() is None, "the run ended before it could be interrupted"
    os.killpg(proc.pid, signal.SIGINT)  # what the terminal does on Ctrl-C
    return proc.communicate(timeout=120)


def _ours(out: Path) -> list[psutil.Process]:
    """Processes still running this test's command (their command line names its run folder)."""
    found = []
    for p in psutil.process_iter(["cmdline"]):
        if str(out) in " ".join(p.info["cmdline"] or []):
            found.append(p)
    return found


def test_ctrl_c_in_one_process_is_one_line_and_keeps_what_is_done(mini_sets, tmp_path: Path) -> None:
    out = tmp_path / "one"
    argv = ["run", "--dataset", str(mini_sets["ifeval"]), "--adapter", "silent", "--out", str(out), "--limit", "40",
            "--no-progress"]
    stdout, stderr = _ctrl_c_after(_start(argv), out, 3)
    lines = [m for m in map(INTERRUPTED.match, stderr.splitlines()) if m]
    assert len(lines) == 1 and lines[0].group(2) is None, stderr[-3000:]
    kept = len(recs(out))
    assert int(lines[0].group(1)) == kept and kept >= 3
    assert "Traceback" not in stderr and stdout == ""
    assert not _ours(out)


def test_a_ctrl_c_a_c_callback_swallows_still_stops_the_run(mini_sets, tmp_path: Path) -> None:
    """SIGINT arriving inside a C callback (soundfile's cffi read of a case's audio, here a ctypes one) raises
    KeyboardInterrupt where the library can only report and drop it: the run stops at its next step all the same,
    with the one interrupted line and no traceback, keeping the two episodes finished before."""
    out = tmp_path / "swallowed"
    argv = ["run", "--dataset", str(mini_sets["ifeval"]), "--adapter", "tests.fake_agents:CtrlCInCallbackAgent",
            "--out", str(out), "--limit", "6", "--no-progress", "--step-timeout", "0"]
    stdout, stderr = _start(argv).communicate(timeout=300)
    lines = [m for m in map(INTERRUPTED.match, stderr.splitlines()) if m]
    assert len(lines) == 1 and int(lines[0].group(1)) == 2 == len(recs(out)), stderr[-3000:]
    assert "Traceback" not in stderr and "Exception ignored" not in stderr and stdout == ""


def test_num_processes_one_summary_one_line_each_on_ctrl_c_no_orphans(mini_sets, tmp_path: Path) -> None:
    out = tmp_path / "two"
    argv = ["run", "--dataset", str(mini_sets["ifeval"]), "--adapter", "silent", "--out", str(out), "--limit", "30",
            "--no-progress", "--num-processes", "2"]
    proc = _start(argv)
    stdout, stderr = _ctrl_c_after(proc, out, 4)
    assert proc.returncode == 130, stderr[-3000:]
    # One line for both processes, with the whole run's count: not one per process.
    lines = [m for m in map(INTERRUPTED.match, stderr.splitlines()) if m]
    assert len(lines) == 1 and lines[0].group(2) == "2", stderr[-3000:]
    kept = len(recs(out))
    assert int(lines[0].group(1)) == kept and stderr.count("episodes kept") == 1
    assert "Traceback" not in stderr and "Error" not in stderr and stdout == ""
    assert not _ours(out)  # neither the launcher nor a worker outlived the command
    # The same command again resumes: one summary for both processes, printed once.
    done = subprocess.run([sys.executable, "-m", "eval.cli", *argv], cwd=ROOT, capture_output=True, text=True,
                          env=os.environ | {"HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json_lines(done.stdout) == [{"cases": 30, "skipped_done": kept, "ok": 30 - kept, "failed": 0,
                                        "failed_kept": 0, "processes": 2}]
    assert done.stderr.count(f"{30 - kept} episodes run, {kept} already done, none failed") == 1
    assert len(recs(out)) == 30
    # Each case ran once, in one of the two processes: the log names every case once.
    ran = [line.split()[4] for line in done.stderr.splitlines() if "duplex_eval.run [" in line]
    assert len(ran) == len(set(ran)) == 30 - kept


def test_num_processes_counts_the_whole_run_on_disk_once(mini_sets, tmp_path: Path) -> None:
    """The Ctrl-C line of `run --num-processes` is the episodes on disk of the cases the processes chose, counted
    once after all stopped: both processes say the same cases (one count, not one per process), and the episodes
    of a process that was killed before it said anything are on disk and counted too."""
    out = tmp_path / "kept"
    cfg = RunConfig(dataset=str(mini_sets["ifeval"]), config="ifeval", adapter="silent", out=str(out), limit=6)
    tally = Tally(launched=True)
    run(cfg, tally)
    ids = [c.case_id for c in tally.cases]
    assert len(ids) == 6 == len(recs(out))
    (out / f"{ids[0]}.rec.json").unlink()  # an episode the rerun runs again is not kept
    both = [{"cases": [ids], "results": [], "interrupted": True, "error": None}] * 2
    assert _interrupted_line([cfg], both, 2) == str(Interrupted(5, 2))
    killed = [None, {"cases": [ids], "results": [], "interrupted": True, "error": None}]
    assert _interrupted_line([cfg], killed, 2) == str(Interrupted(5, 2))
    # No process said which cases it chose (they stopped before choosing): nothing of this run is on disk then,
    # and the line says when processes were killed before they could say.
    before = [{"cases": [[]], "results": [], "interrupted": True, "error": None}] * 2
    assert _interrupted_line([cfg], before, 2) == str(Interrupted(0, 2))
    assert "not in this count" in _interrupted_line([cfg], [None, None], 2)


def _accelerate(argv: list[str]) -> subprocess.Popen:
    """`accelerate launch` of `eval/run.py ARGV` in two CPU processes, as docs/scale.md spells it, started as a
    user starts it from a terminal (its own process group, which Ctrl-C signals)."""
    env = os.environ | {"HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT), "DUPLEX_EVAL_CPU": "1"}
    launch = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2",
              "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no", "--main_process_port",
              str(free_port()), "-m", "eval.run", *argv]
    return subprocess.Popen(launch, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=_default_ctrl_c)


def test_a_plain_accelerate_launch_prints_one_summary_for_all_processes(mini_sets, tmp_path: Path) -> None:
    """`accelerate launch ... eval/run.py`: each process runs its shard, and only the main one prints, for all of
    them: on Ctrl-C one "interrupted; N episodes kept by 2 processes" line with N the episodes on disk (each
    process used to print its own share's count); run to the end, one JSON line with the whole run's counts."""
    out = tmp_path / "plain"
    argv = ["--dataset", str(mini_sets["ifeval"]), "--adapter", "silent", "--out", str(out), "--limit", "24",
            "--no-progress"]
    proc = _accelerate(argv)
    stdout, stderr = _ctrl_c_after(proc, out, 4)
    lines = [m for m in map(INTERRUPTED.match, stderr.splitlines()) if m]
    assert len(lines) == 1 and lines[0].group(2) == "2", stderr[-3000:]
    kept = len(recs(out))
    assert int(lines[0].group(1)) == kept and 4 <= kept < 24 and stderr.count("episodes kept") == 1
    assert stdout == ""
    done = _accelerate(argv)
    stdout, stderr = done.communicate(timeout=600)
    assert done.returncode == 0, stderr[-3000:]
    assert json_lines(stdout) == [{"cases": 24, "skipped_done": kept, "ok": 24 - kept, "failed": 0,
                                   "failed_kept": 0, "processes": 2}]
    assert stderr.count("already done, none failed") == 1 and f"{24 - kept} episodes run, {kept} already done" \
        in stderr
    assert len(recs(out)) == 24 and not _ours(out)


def test_ctrl_c_in_the_demo_ends_its_pool_workers(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    proc = _start(["demo", "--benchmarks", "ifeval", "--adapters", "silent", "--workers", "2", "--out", str(out)])
    deadline = time.monotonic() + 120
    workers: list[psutil.Process] = []
    while len(workers) < 2 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.5)
        workers = psutil.Process(proc.pid).children(recursive=True)
    time.sleep(5)  # a job under way in a worker
    assert proc.poll() is None and len(workers) >= 2
    os.killpg(proc.pid, signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr[-3000:]
    assert stdout.splitlines()[-1] == ("interrupted; finished builds and episodes are kept; rerun the same command "
                                       "to resume"), stdout[-2000:]
    assert "Traceback" not in stderr, stderr[-3000:]
    # multiprocessing's resource tracker, also a child, ends when it sees the demo's end: give it a moment; a worker
    # still running a job would outlive this wait by far
    _, alive = psutil.wait_procs(workers, timeout=15)
    assert not [w.pid for w in alive if w.is_running() and w.status() != psutil.STATUS_ZOMBIE]
