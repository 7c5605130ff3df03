"""`duplex-eval`: build datasets, run adapters, score runs, write reports, or do all of it (demo)."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path
from typing import NoReturn

from dataset_builder.benchmarks import Benchmark, benchmark_for_config, benchmark_names, get_benchmark
from dataset_builder.errors import UsageError
from dataset_builder.m3.schema import DOMAINS as M3_DOMAINS
from dataset_builder.m3.schema import LANGUAGES as M3_LANGUAGES
from dataset_builder.schema import SchemaError
from dataset_builder.speech_gate import HeardGate, SpeechGate
from eval import interrupt
from eval.building import quiet_libraries
from eval.report_site.media import DEFAULT_KBPS as DEFAULT_AUDIO_KBPS
from eval.run import (
    Interrupted,
    RunConfig,
    Tally,
    add_run_arguments,
    comma_list,
    configs_from_args,
    finish,
    kept_on_disk,
    parse_kv,
    run,
    run_and_finish,
)
from metrics.asr import SCORING_ASR
from metrics.intelligibility import SAME_TEXTS

DEFAULT_OUT = Path("out")


def buildable_names() -> list[str]:
    return benchmark_names()


def build_target(name: str) -> Benchmark:
    return get_benchmark(name)


def heard_gate() -> HeardGate:
    """The build's heard gate (M3's backchannels): Silero under the events VAD, at every placement."""
    from metrics.m3.heard import SileroHeardGate

    return SileroHeardGate()


def speech_gate(cache_dir: Path | None) -> SpeechGate:
    """The build's speech gate: the default ASR listens to each turn (its transcripts cached beside the clips)."""
    from metrics.intelligibility import AsrSpeechGate

    return AsrSpeechGate(cache_dir=cache_dir)


def build_selection(a: argparse.Namespace) -> tuple[Benchmark, tuple[str, ...] | None]:
    """What `build` makes: `build BENCHMARK` and `build --config NAME[,NAME...]` (as `run` takes it: benchmarks or
    their configs) name one benchmark and, optionally, which of its configs."""
    if a.configs is not None:  # the one spelling is --config, as `run` has it
        raise UsageError(f"build: give the configs as --config {a.configs} (there is no --configs): duplex-eval "
                         f"build --config {a.configs}")
    names = comma_list([a.benchmark, *(a.config or [])])
    if not names:
        raise UsageError(f"build: name the benchmark: duplex-eval build BENCHMARK ({', '.join(buildable_names())})")
    benches: dict[str, Benchmark] = {}
    configs: list[str] = []
    for name in names:  # a benchmark stands for all its configs ("ifeval" is both: the benchmark)
        bench = build_target(name) if name in buildable_names() else benchmark_for_config(name)
        if name not in buildable_names():
            configs.append(name)
        benches.setdefault(bench.name, bench)
    if len(benches) > 1:
        raise UsageError(f"build: one benchmark at a time; {', '.join(names)} name {', '.join(benches)}")
    return next(iter(benches.values())), tuple(dict.fromkeys(configs)) or None


def cmd_build(a: argparse.Namespace) -> int:
    from eval.building import build_options, build_quietly

    bench, configs = build_selection(a)
    if a.preset not in bench.presets:
        raise UsageError(f"--preset {a.preset!r}: {bench.name} has presets {list(bench.presets)}")
    out = Path(a.out or DEFAULT_OUT / "datasets" / f"duplex-{bench.name}")
    if a.diagnostics_only and a.out:
        out = _hub_view(a.out)
    if a.diagnostics_limit is not None and a.diagnostics_limit < 1:
        raise UsageError(f"--diagnostics-limit must be >= 1, got {a.diagnostics_limit}")
    if not a.diagnostics_only:
        options = build_options(a, configs)
        _, summary = build_quietly(bench, out, options)
        print("\n".join(summary))
        if a.scripts_only:
            print(f"scripts written to {out / 'scripts.jsonl'} (no audio)")
        else:
            for config in options.configs or bench.configs:
                print(f"dataset written to {out} (load with datasets.load_dataset({str(out.resolve())!r}, "
                      f"{config!r}, split='test'))")
    if (a.diagnostics or a.diagnostics_only) and bench.diagnostics:  # the benchmark's own
        print(bench.function("diagnostics")(out))
    elif a.diagnostics or a.diagnostics_only:
        from metrics.build_audit import DIAGNOSTICS_FILE, audit, format_audit

        result = audit(out, bench.configs, audio=not a.scripts_only, limit=a.diagnostics_limit,
                       same_texts=a.diagnostics_texts, progress=a.progress)
        print(format_audit(result))
        print(f"diagnostics written to {out / DIAGNOSTICS_FILE}")
    return 0


def _hub_view(spec: str) -> Path:
    """`build --diagnostics-only --out ORG/NAME[@REV]`: the Hub dataset repo (docs/release.md) audited through a
    local folder of links to its cached files, where diagnostics.json is written (the HF cache is never written
    to); a local folder as it is."""
    from dataset_builder.hub_source import dataset_folder, hub_origin, local_view

    folder = dataset_folder(spec)
    origin = hub_origin(folder)
    if folder == spec or origin is None:
        return Path(folder)
    view = DEFAULT_OUT / "hub" / f"{origin['repo_id'].replace('/', '--')}@{origin['revision'][:12]}"
    print(f"auditing Hub dataset {spec} (commit {origin['revision'][:12]}) through {view}")
    return local_view(folder, view)


def cmd_run(a: argparse.Namespace) -> int:
    from eval.launch import worker_rank

    cfgs = configs_from_args(a)  # its errors once, here, before any process is started
    if worker_rank() is not None:  # one of the processes `--num-processes` started
        return _worker_run(cfgs)
    if a.num_processes > 1:
        return _launched_run(a, cfgs)
    code = 0
    for cfg in cfgs:
        if len(cfgs) > 1:
            print(f"== {cfg.config}: {cfg.out}", flush=True)
        code = max(code, run_and_finish(cfg))  # under a plain `accelerate launch`: one summary, the main process's
    return code


def _worker_run(cfgs: list[RunConfig]) -> int:
    """A launched process: its counts go to the launching process, which prints one summary. Exit 0 whatever
    happened (accelerate's launcher would print a traceback for any other status); the status travels too."""
    from eval.launch import register_worker, write_worker_result

    # The launching process passes Ctrl-C on as SIGINT: heard here even where the shell started us ignoring it.
    interrupt.install(even_if_ignored=True)
    # "cases": each config's case ids, the whole run's, once this process has chosen them: what the launching
    # process counts on disk after every process has stopped.
    result: dict = {"results": [], "cases": [], "interrupted": False, "error": None}
    try:
        if not register_worker():
            raise Interrupted(0)
        for cfg in cfgs:
            tally = Tally(launched=True)
            try:
                counts = run(cfg, tally)
            finally:
                result["cases"].append([c.case_id for c in tally.cases])
            result["results"].append({"config": cfg.config, "out": cfg.out, "counts": counts})
    except Interrupted:  # the launching process says it once, for every process
        result["interrupted"] = True
    except (SchemaError, UsageError, FileNotFoundError, RuntimeError) as err:
        result["error"] = str(err)
    write_worker_result(result)
    return 0


def _interrupted_line(cfgs: list[RunConfig], results: list[dict | None], n: int) -> str:
    """The one Ctrl-C line of `run --num-processes`: the whole run's episodes on disk, counted here once every
    process has stopped. The processes choose the same cases and wait for each other before any writes an episode,
    so one that said which cases it chose speaks for all; a process that was killed before saying anything still
    has its episodes counted."""
    kept = 0
    for i, cfg in enumerate(cfgs):
        ids = next((res["cases"][i] for res in results if res and len(res["cases"]) > i and res["cases"][i]), [])
        kept += kept_on_disk(cfg, ids)
    if all(res is None for res in results):
        return (f"{Interrupted(kept, n)} (no process of {n} said which cases it runs before it stopped: their "
                "episodes are on disk, not in this count)")
    return str(Interrupted(kept, n))


def _launched_run(a: argparse.Namespace, cfgs: list[RunConfig]) -> int:
    """`run --num-processes N`: launch N processes through accelerate, then one combined summary."""
    from eval.launch import launch

    n = a.num_processes
    code, interrupted, results = launch(a.argv, n)
    if interrupted:
        print(_interrupted_line(cfgs, results, n), file=sys.stderr)
        return 130
    errors = list(dict.fromkeys(res["error"] for res in results if res and res["error"]))
    if errors:
        raise UsageError("; ".join(errors))
    if any(res is None for res in results):
        missing = [str(rank + 1) for rank, res in enumerate(results) if res is None]
        raise RuntimeError(f"process(es) {', '.join(missing)} of {n} ended without a result (the launcher exited "
                           f"with status {code}; its output above says why)")
    status = 0
    for i, cfg in enumerate(cfgs):
        if len(cfgs) > 1:
            print(f"== {cfg.config}: {cfg.out}", flush=True)
        total: dict[str, int] = {}
        for res in results:
            for key, value in res["results"][i]["counts"].items():  # type: ignore[index]
                total[key] = total.get(key, 0) + value
        status = max(status, finish(total | {"processes": n}))
    return status


def _score(run_dir: Path, a: argparse.Namespace) -> dict:
    from metrics.asr import get_asr
    from metrics.judges import get_judge
    from metrics.scoring import score_run_dir

    overrides = parse_kv(a.param, "--param")
    asr = None if a.reuse else get_asr(a.asr, **parse_kv(a.asr_arg, "--asr-arg"))
    judge_args = parse_kv(a.judge_arg, "--judge-arg")
    if a.judge == "openai":
        # Judge calls are cached by content hash in the run folder, so a rescore resumes where it stopped.
        judge_args.setdefault("cache_dir", str(run_dir / "judge-cache"))
    judge = None if a.reuse else get_judge(a.judge, **judge_args)
    return score_run_dir(run_dir, asr=asr, judge=judge, overrides=overrides, reuse_measurements=a.reuse,
                         progress=a.progress)


def print_result(run_dir: Path, result: dict) -> None:
    """Run health and failures first (a broken set-up must not hide behind a table), then the tables."""
    from metrics.feasibility import feasibility_lines
    from metrics.scoring import result_tables
    from metrics.tables import coverage_of, provenance

    print(f"== {run_dir}  benchmark={result['benchmark']}  adapter={result['adapter']}  "
          f"episodes={result['n_episodes']}  failed={result['n_failed']}  covers {coverage_of(result)['text']}")
    for flag in result.get("health", {}).get("flags", []):
        print(f"HEALTH {flag}")
    for line in feasibility_lines(result.get("feasibility")):  # docs/scale.md: could it have held a live call?
        print(f"LIVE {line}")
    for f in result["failed_episodes"]:
        counted = (f"counted as failed in {f['windows']} windows" if f.get("windows") is not None
                   else "windows unknown, NOT counted")
        print(f"FAILED {f['case_id']} ({f['status']}; {counted}): {f['reason']}")
    for title, text in result_tables({result["adapter"]: result}):
        print(f"-- {title}\n{text}")
    print(provenance(result))
    print(f"scores: {result.get('scores_file', Path(run_dir) / 'scores.json')}")


def cmd_score(a: argparse.Namespace) -> int:
    for run_dir in a.run_dirs:
        print_result(Path(run_dir), _score(Path(run_dir), a))
    if a.sweep:
        # DSB-IFEval's threshold sweep (docs/benchmarks/ifeval.md): from the measurements just stored, across the runs
        # given.
        from metrics.ifeval.sweep import sweep_runs

        print(f"-- threshold sweep\n{sweep_runs([Path(r) for r in a.run_dirs])}")
    return 0


def cmd_report(a: argparse.Namespace) -> int:
    from eval.report import write_report

    path = write_report([Path(r) for r in a.run_dirs], Path(a.out), max_plots=a.max_plots,
                        allow_stale=a.allow_stale, audio_kbps=a.audio_kbps, progress=True)
    from eval.report_site.site import site_bytes

    print(f"report: {path} ({site_bytes(path.parent) / 1e6:.1f} MB; tables in {path.parent / 'summary.md'})")
    return 0


def cmd_export(a: argparse.Namespace) -> int:
    if a.benchmark == "fdb":
        from metrics.m3.fdb_export import describe, export_fdb

        print("\n".join(describe(export_fdb(Path(a.run_dir), Path(a.out)))))
        return 0
    from metrics.asr import get_asr
    from metrics.m3.export import export_run

    summary = export_run(Path(a.run_dir), Path(a.out), asr=get_asr(a.asr, **parse_kv(a.asr_arg, "--asr-arg")),
                         overrides=parse_kv(a.param, "--param"))
    print(f"exported {summary['episodes']} episode(s) per condition to {summary['out']} (the M3 authors' layout: "
          f"{{condition}}/metadata.jsonl, audio/, asr/): the episodes scored under rules={summary['rules']}")
    if summary["compare_with"]:
        print(f"their timing summary of each condition folder is {summary['compare_with']}'s, cell for cell")
    else:
        print("their evaluation applies the authors' rules: export with --param rules=authors to compare its "
              "summary with scores-rules=authors.json")
    for f in summary["left_out"]:
        print(f"LEFT OUT {f['case_id']} ({f['status']}): {f['reason']}")
    for lang, why in summary["untranscribed"].items():
        print(f"NO TEXT {lang}: {why}")
    return 0


def cmd_import(a: argparse.Namespace) -> int:
    if a.benchmark == "fdb":
        from dataset_builder.importers.fdb_v1 import import_fdb

        s = import_fdb(Path(a.data_dir), Path(a.out), language=a.language or "en", domain=a.domain or "chat")
        events = ", ".join(f"{n} {t}" for t, n in s["events"].items() if n)
        print(f"imported {s['rows']} event(s) ({events}) from {s['samples']} Full-Duplex-Bench v1 sample(s) of "
              f"{s['source']} as {s['config']} in {a.out}")
        for what, n in s["skipped"].items():
            print(f"  skipped: {what}: {n}")
        print(f"run it: duplex-eval run --dataset {a.out} --config {s['config']} --adapter ADAPTER --out RUN_DIR")
        return 0
    from dataset_builder.importers.m3_authors import import_m3

    s = import_m3(Path(a.data_dir), Path(a.out), user_channel=a.user_channel, split=a.split, language=a.language,
                  domain=a.domain)
    events = ", ".join(f"{n} {t}" for t, n in s["events"].items())
    print(f"imported {s['rows']} event(s) ({events}) from {s['dialogues']} dialogue(s) of {s['source']} "
          f"({s['split']}, user on channel {s['user_channel']}) as {s['config']} in {a.out}")
    for what, n in [*(("skipped: " + k, v) for k, v in s["skipped"].items()),
                    *(("ignored: " + k, v) for k, v in s["ignored"].items())]:
        print(f"  {what}: {n}")
    if s["untranscribed_rows"]:
        print(f"  rows without a full transcript (no txt_align words): {s['untranscribed_rows']}")
    print(f"run it: duplex-eval run --dataset {a.out} --config {s['config']} --adapter ADAPTER --out RUN_DIR")
    return 0


def cmd_text_reference(a: argparse.Namespace) -> int:
    from dataset_builder.hf_dataset import list_cases
    from eval.text_reference import get_decider, text_reference
    from metrics.tables import cell

    out = Path(a.out)
    kwargs = parse_kv(a.decider_arg, "--decider-arg")
    if a.decider == "openai":
        kwargs.setdefault("cache_dir", str(out / "judge-cache"))
    from dataset_builder.hub_source import dataset_folder

    res = text_reference(list_cases(dataset_folder(a.dataset), a.config), get_decider(a.decider, **kwargs), out)
    kind = "heuristic" if res["heuristic"] else "model"
    print(f"transcript-conditioned reference, decider {res['decider']} ({kind}), {res['n_cases']} cases")
    for cond, block in [("overall", res["scores"]), *res["by_condition"].items()]:
        print(f"{cond:>9}: " + "  ".join(f"{k}={cell(v)}" for k, v in block.items()))
    p = res["paired"]
    if p["n_pairs"]:
        print(f"paired explicit-implicit response: diff={p['difference']:+.3f} over {p['n_pairs']} pairs, "
              f"exact McNemar p={p['mcnemar_p']:.3g}")
    print(f"written: {out / 'text_reference.json'}")
    return 0


def cmd_push(a: argparse.Namespace) -> int:
    from dataset_builder.hf_dataset import describe_upload, push_to_hub

    repo_id = a.repo_id
    if a.dry_run:
        print(describe_upload(Path(a.folder), repo_id, private=a.private))
        return 0
    url = push_to_hub(Path(a.folder), repo_id, token_env=a.token_env, private=a.private)
    print(f"pushed {a.folder} to {url}")
    return 0


def cmd_push_metric(a: argparse.Namespace) -> int:
    from metrics.hub_metric import describe, push, space_files

    files = space_files(a.name, a.space, package=a.package)
    if a.dry_run:
        print(describe(files, a.space))
        print("\ndry run: nothing uploaded")
        return 0
    url = push(files, a.space, token_env=a.token_env, private=a.private)
    print(f"pushed metric {a.name} to Space {a.space}: {url}")
    return 0


def cmd_push_results(a: argparse.Namespace) -> int:
    from eval.hub_results import describe, push, results_files, write_folder

    files = results_files([Path(r) for r in a.run_dirs], a.repo_id, Path(a.report) if a.report else None,
                          allow_partial=a.allow_partial)
    if a.dry_run:
        folder = Path(a.out or DEFAULT_OUT / "push-results" / a.repo_id.replace("/", "--"))
        print(describe(files, write_folder(files, folder), a.repo_id))
        return 0
    url = push(files, a.repo_id, token_env=a.token_env, private=a.private)
    print(f"pushed {len(a.run_dirs)} run(s) to dataset repo {a.repo_id}: {url}")
    return 0


def cmd_events(a: argparse.Namespace) -> int:
    from metrics.m3.extract import events_command

    print(events_command(a.dialogues, user_channel=a.user_channel, words=a.words, stats_out=a.stats_out))
    return 0


def cmd_demo(a: argparse.Namespace) -> int:
    from eval.demo import demo

    return demo(Path(a.out), preset=a.preset, adapters=comma_list(a.adapters),
                benchmarks=comma_list(a.benchmarks) or None, workers=a.workers or None)


def cmd_check_adapter(a: argparse.Namespace) -> int:
    from eval.conformance import check_adapter, failed, format_results, results_json

    results = check_adapter(a.adapter, parse_kv(a.adapter_arg, "--adapter-arg"), seed=a.seed, atol=a.atol,
                            out_dir=Path(a.out) if a.out else None)
    print(f"== check-adapter {a.adapter}")
    print(format_results(results))
    if a.json:
        Path(a.json).write_text(json.dumps(results_json(results), indent=2) + "\n")
    return 1 if failed(results) else 0


def add_score_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--asr", default=SCORING_ASR,
                   help=f"ASR backend ({SCORING_ASR}, the default; whisper-tiny-en, faster; whisper-base with "
                        "--asr-arg language=CODE; qwen3-asr; openai)")
    p.add_argument("--asr-arg", action="append", default=[], metavar="K=V",
                   help="ASR constructor arg, e.g. model=Qwen/Qwen3-ASR-1.7B device=cuda (qwen3-asr), "
                        "base_url=http://HOST:PORT model=NAME max_concurrency=8 (openai)")
    p.add_argument("--judge", default="heuristic", help="judge backend (heuristic, openai)")
    p.add_argument("--judge-arg", action="append", default=[], metavar="K=V",
                   help="judge constructor arg, e.g. base_url=http://127.0.0.1:8000 model=qwen max_concurrency=8")
    p.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                   help="threshold override, e.g. t_onset_window_s=3 yield_tolerance_s=0.5 (written to its own "
                        "scores file)")
    p.add_argument("--no-progress", dest="progress", action="store_false", help="no progress line on stderr")
    p.add_argument("--reuse", action="store_true",
                   help="re-apply thresholds to stored measurements.jsonl (no VAD/ASR/judge)")
    p.add_argument("--sweep", action="store_true",
                   help="DSB-IFEval: after scoring, recompute IAS under the 180 threshold configurations from the "
                        "stored measurements and print Kendall's tau of the Entailment-Gap ranking of the given "
                        "runs against the default")


def _add_build(p: argparse.ArgumentParser) -> None:
    """`build BENCHMARK`: the dataset's size, voices, writer and cache, and the audit after it."""
    p.add_argument("benchmark", nargs="?", default=None, metavar="BENCHMARK",
                   help=f"the benchmark to build ({', '.join(buildable_names())}); or --config")
    p.add_argument("--config", action="append", default=None, metavar="NAME[,NAME...]",
                   help="as `run --config`: the benchmark, or which of its configs to build, comma-separated or "
                        "the flag again (m3: --config m3_chat_en,m3_task_en)")
    p.add_argument("--preset", default="mini", help="size preset (mpe: mini, full)")
    p.add_argument("--n", "--n-pairs", dest="n", type=int, default=None,
                   help="override the preset's size (mpe: scenario pairs)")
    p.add_argument("--seed", type=int, default=0,
                   help="seed of every draw the build makes (scenes, voices, timings; default %(default)s): the same "
                        "seed and options build the same bytes")
    p.add_argument("--tts", default="piper", help="TTS backend: piper (default), espeak, http")
    p.add_argument("--tts-arg", action="append", default=[], metavar="K=V",
                   help="TTS backend arg, e.g. base_url=http://127.0.0.1:8880 model=kokoro (for --tts http)")
    p.add_argument("--writer", default="template",
                   help="who writes the text (mpe scenes, m3 dialogues): template (the composer's phrase banks, "
                        "default) or openai (an LLM rewrites each pair or dialogue; every rewrite passes the same "
                        "checks or is asked for again)")
    p.add_argument("--writer-arg", action="append", default=[], metavar="K=V",
                   help="writer arg, e.g. base_url=http://127.0.0.1:8000 model=qwen (for --writer openai; the API "
                        "key is read from $OPENAI_API_KEY or the variable api_key_env names)")
    p.add_argument("--no-progress", dest="progress", action="store_false", help="no progress line on stderr")
    p.add_argument("--no-speech-gate", action="store_true",
                   help="do not let the default ASR check each turn (by default a turn whose addressed name, "
                        '"Aria" or numbers it cannot recover is re-spoken slower or reported, and the build prints '
                        "per-voice word error rate)")
    p.add_argument("--workers", type=int, default=None, metavar="N",
                   help="synthesis processes (default: one per core); the output is "
                        "byte-identical whatever N")
    p.add_argument("--stats", default=None, metavar="FILE",
                   help="m3: sample PAUSE/SHIFT/BC/barge-in timings from this TimingStats JSON (`duplex-eval events "
                        "... --stats-out`; what it did not measure comes from the shipped defaults)")
    p.add_argument("--configs", default=None, help=argparse.SUPPRESS)  # refused with the --config hint
    p.add_argument("--out", default=None, help="dataset folder (default out/datasets/duplex-<benchmark>)")
    p.add_argument("--cache-dir", default=None,
                   help="TTS clip cache (default $DUPLEX_EVAL_CACHE/tts or ~/.cache/duplex-eval/tts)")
    p.add_argument("--no-cache", action="store_true",
                   help="synthesise every clip afresh: neither read nor write the TTS clip cache (nor the speech "
                        "gate's transcripts kept beside it)")
    p.add_argument("--scripts-only", action="store_true",
                   help="write OUT/scripts.jsonl (one validated script per line) and no audio: seconds, no TTS")
    p.add_argument("--diagnostics", action="store_true",
                   help="after building, print and write OUT/diagnostics.json: distinct texts, repeated sentences, "
                        "distinct-n, per-attribute word differences; with audio also ASR word error rate per "
                        "voice and the 'Aria' recognition rate (text only with --scripts-only)")
    p.add_argument("--diagnostics-only", action="store_true",
                   help="do not build: audit the existing folder --out (its parquet, else its scripts.jsonl), or "
                        "the Hub dataset repo --out ORG/NAME[@REV] when no local folder has that name")
    p.add_argument("--diagnostics-limit", type=int, default=None, metavar="N",
                   help="ASR only the first N cases (default: all; the default ASR hears about 10x faster than "
                        "real time per CPU core: on 2 cores the mini set's 12 cases take about 1 min)")
    p.add_argument("--diagnostics-texts", type=int, default=SAME_TEXTS, metavar="N",
                   help="compare the voices on the first N distinct turn texts, each spoken by every voice "
                        "(default %(default)s: 500 clips, ~4.5 min; 0: judge the voice ratio on the set's own "
                        "audio)")
    p.set_defaults(func=cmd_build)


def _add_run(p: argparse.ArgumentParser) -> None:
    """`run`: the runner's own arguments (eval.run), and how many processes share the cases."""
    add_run_arguments(p)
    p.add_argument("--num-processes", type=int, default=1, metavar="N",
                   help="share the cases among N processes, launched through accelerate (gloo on CPU, one GPU each "
                        "when there are N); one combined summary; Ctrl-C stops every process, keeping what is done "
                        "(default %(default)s)")
    p.set_defaults(func=cmd_run)


def _add_score(p: argparse.ArgumentParser) -> None:
    """`score RUN_DIR...`."""
    p.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="run folders written by `duplex-eval run`")
    add_score_arguments(p)
    p.set_defaults(func=cmd_score)


def _add_report(p: argparse.ArgumentParser) -> None:
    """`report RUN_DIR...`: the HTML report."""
    p.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="scored run folders (each with its scores.json)")
    p.add_argument("--out", default=str(DEFAULT_OUT / "report"), metavar="DIR",
                   help="the report's folder: index.html, summary.md and a page per episode (default %(default)s)")
    p.add_argument("--max-plots", type=int, default=None, metavar="N",
                   help="timeline figure and audio for the first N episodes of each run only (default: every "
                        "episode; every episode gets its page either way)")
    p.add_argument("--audio-kbps", type=float, default=DEFAULT_AUDIO_KBPS,
                   help="bitrate of the stereo Opus audio on the episode pages (default %(default)g)")
    p.add_argument("--allow-stale", action="store_true",
                   help="show runs whose scores no longer match their folder, marked STALE, instead of refusing")
    p.set_defaults(func=cmd_report)


def _add_export(p: argparse.ArgumentParser) -> None:
    """`export {m3,fdb} RUN_DIR`: a run in a peer benchmark's own layout."""
    p.add_argument("benchmark", choices=("m3", "fdb"),
                   help="whose layout: m3 (the M3-DuplexBench authors' evaluation) or fdb (Full-Duplex-Bench v1)")
    p.add_argument("run_dir", metavar="RUN_DIR", help="the run folder to export (m3: scored)")
    p.add_argument("--out", required=True, help="m3: folder for {condition}/metadata.jsonl, audio/ and asr/; fdb: "
                                                "for {condition}/{task}/{case_id}/input.wav, output.wav, task file")
    p.add_argument("--asr", default=SCORING_ASR, help="m3: ASR of the model's utterances (their ASR JSON's "
                                                            "text; default %(default)s); fdb leaves the ASR to their "
                                                            "own script")
    p.add_argument("--asr-arg", action="append", default=[], metavar="K=V",
                   help="ASR constructor arg, as for score (e.g. language=ja)")
    p.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                   help="m3: the rule set whose scored episodes are exported, as for score (rules=authors to "
                        "compare with their evaluation; the paper's rules by default)")
    p.set_defaults(func=cmd_export)


def _add_import(p: argparse.ArgumentParser) -> None:
    """`import {m3,fdb} DATA_DIR`: a peer benchmark's released data as a dataset config."""
    p.add_argument("benchmark", choices=("m3", "fdb"),
                   help="whose data: m3 (the M3-DuplexBench authors' release) or fdb (Full-Duplex-Bench v1 samples)")
    p.add_argument("data_dir", metavar="DATA_DIR", help="the released data's folder")
    p.add_argument("--out", required=True, help="dataset folder to write data/m3_<domain>_<lang>/ and the card into")
    p.add_argument("--user-channel", type=int, default=0, choices=(0, 1),
                   help="m3: the channel of the party the harness plays (the other is the model's)")
    p.add_argument("--split", default="test", help="m3: reads DATA_DIR/<split>.jsonl (default %(default)s)")
    p.add_argument("--language", default=None, choices=M3_LANGUAGES,
                   help="default: m3 from a path .../data/<lang>/<domain>/...; fdb en")
    p.add_argument("--domain", default=None, choices=M3_DOMAINS, help="default: m3 from the path, as --language; "
                                                                       "fdb chat")
    p.set_defaults(func=cmd_import)


def _add_text_reference(p: argparse.ArgumentParser) -> None:
    """`text-reference`: the transcript-conditioned reference."""
    p.add_argument("--dataset", required=True,
                   help="Duplex-MPE dataset folder (as written by `duplex-eval build mpe`), or a Hub dataset repo "
                        "ORG/NAME[@REV], as for run")
    p.add_argument("--config", default="mpe", help="the dataset config whose scripts are read (default %(default)s)")
    p.add_argument("--decider", default="policy", help="policy (heuristic, the default) or openai")
    p.add_argument("--decider-arg", action="append", default=[], metavar="K=V",
                   help="e.g. base_url=http://127.0.0.1:8000 model=qwen")
    p.add_argument("--out", required=True, metavar="DIR",
                   help="folder for text_reference.json (and the openai decider's judge-cache/)")
    p.set_defaults(func=cmd_text_reference)


def _hub_upload_flags(p: argparse.ArgumentParser, dry_run_help: str) -> None:
    """--dry-run, --token-env and --private, as every command that uploads to the Hub takes them."""
    p.add_argument("--dry-run", action="store_true", help=dry_run_help)
    p.add_argument("--token-env", default="HF_TOKEN",
                   help="the environment variable holding the Hub token (default %(default)s)")
    p.add_argument("--private", action="store_true", help="create the repo private")


class _RepoAsFlag(argparse.Action):
    """`push FOLDER ORG/NAME`: refused as argparse refuses, naming the one way to give the repo (--repo-id, as
    push-results and push-metric take theirs), before argparse would only say that --repo-id is missing."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object,
                 option_string: str | None = None) -> None:
        if values is None:  # the optional positional left out: argparse hands it its default
            return
        folder = getattr(namespace, "folder", "FOLDER")
        parser.error(f"give the repo as --repo-id {values} (the only argument after the folder is the folder "
                     f"itself): duplex-eval push {folder} --repo-id {values}")


def _add_push(p: argparse.ArgumentParser) -> None:
    """`push FOLDER`: a dataset folder to the Hub."""
    p.add_argument("folder", metavar="FOLDER", help="a dataset folder written by `duplex-eval build`")
    p.add_argument("repo", nargs="?", default=None, action=_RepoAsFlag, help=argparse.SUPPRESS)
    p.add_argument("--repo-id", required=True, metavar="ORG/NAME", help="the Hub dataset repo, e.g. my-org/duplex-mpe")
    _hub_upload_flags(p, "list every file, its size and its path in the repo, and the configs load_dataset will "
                         "see; upload nothing (no token needed)")
    p.set_defaults(func=cmd_push)


def _add_push_results(p: argparse.ArgumentParser) -> None:
    """`push-results RUN... --repo-id ORG/NAME`: scored runs as a Hub results dataset (docs/release.md)."""
    p.add_argument("run_dirs", nargs="+", metavar="RUN", help="scored run folders (each with its scores.json)")
    p.add_argument("--repo-id", required=True, metavar="ORG/NAME",
                   help="the Hub dataset repo, e.g. my-org/duplex-eval-results")
    p.add_argument("--report", default=None, metavar="DIR",
                   help="also upload this HTML report folder (written by `duplex-eval report`) as report/")
    p.add_argument("--out", default=None, metavar="DIR",
                   help="--dry-run's folder (default out/push-results/ORG--NAME)")
    p.add_argument("--allow-partial", action="store_true",
                   help="publish a partial run (fewer episodes than its dataset has cases: --limit, --sample, "
                        "--case, or unfinished), marked PARTIAL in the card and results.jsonl; refused otherwise")
    _hub_upload_flags(p, "write the folder that would be uploaded (to --out) and list its files; upload nothing "
                         "(no token needed)")
    p.set_defaults(func=cmd_push_results)


def _add_push_metric(p: argparse.ArgumentParser) -> None:
    """`push-metric NAME`: an evaluate module to a Hub metric Space."""
    p.add_argument("name", help="a module folder under metrics/, e.g. fresh_onset_rate")
    p.add_argument("--space", required=True, metavar="ORG/NAME", help="the Space; its script is NAME.py")
    p.add_argument("--package", default=None, metavar="REQUIREMENT",
                   help="declare the scoring code as this pip requirement (e.g. 'duplex-eval @ "
                        "git+https://github.com/ORG/duplex-eval@COMMIT') instead of copying its files into the Space")
    _hub_upload_flags(p, "print every file the Space would receive (destination, source, the generated app.py, "
                         "requirements.txt and README.md) and upload nothing")
    p.set_defaults(func=cmd_push_metric)


def _add_events(p: argparse.ArgumentParser) -> None:
    """`events DIALOGUE.wav...`: M3 events of two-channel dialogues."""
    p.add_argument("dialogues", nargs="+", metavar="DIALOGUE.wav", help="2-channel WAV, one party per channel")
    p.add_argument("--user-channel", type=int, default=0, choices=(0, 1),
                   help="the channel whose events are evaluated (the other is the system)")
    p.add_argument("--words", action="append", default=[], metavar="TXT_ALIGN",
                   help="word timestamps (channel<TAB>start<TAB>end<TAB>word a line) instead of the VAD; once "
                        "per dialogue, in order")
    p.add_argument("--stats-out", default=None, metavar="FILE",
                   help="write the timing statistics pooled over the dialogues (TimingStats JSON) for the M3 "
                        "build to sample from")
    p.set_defaults(func=cmd_events)


def _add_demo(p: argparse.ArgumentParser) -> None:
    """`demo`: the README's main job."""
    p.add_argument("--out", default=str(DEFAULT_OUT), metavar="DIR",
                   help="folder for everything the demo writes: datasets/, runs/ and report/ (default %(default)s)")
    p.add_argument("--preset", default="mini",
                   help="size preset of each benchmark's set (default %(default)s; full: the paper-sized sets)")
    p.add_argument("--benchmarks", default="",
                   help=f"comma-separated benchmarks (default: all, Duplex-MPE first: {', '.join(benchmark_names())})")
    p.add_argument("--adapters", default="silent,oracle,cascade", metavar="NAME[,NAME...]",
                   help="comma-separated adapters run on every benchmark (default %(default)s)")
    p.add_argument("--workers", type=int, default=0, metavar="N",
                   help="jobs (builds, runs) at once, each in its own process (default: one per core, at most 2)")
    p.set_defaults(func=cmd_demo)


def _add_check_adapter(p: argparse.ArgumentParser) -> None:
    """`check-adapter NAME_OR_PATH`: the protocol conformance checks."""
    p.add_argument("adapter", metavar="NAME_OR_PATH", help="registered adapter name, module:Class or file.py:Class")
    p.add_argument("--adapter-arg", action="append", default=[], metavar="K=V", help="adapter constructor arg")
    p.add_argument("--seed", type=int, default=0, help="the seed every reset gets")
    p.add_argument("--atol", type=float, default=0.0,
                   help="largest sample difference two runs that must match may show (default 0: identical)")
    p.add_argument("--out", default=None, help="keep the episode check's recording in this folder")
    p.add_argument("--json", default=None, metavar="FILE", help="also write the results as JSON")
    p.set_defaults(func=cmd_check_adapter)


class Parser(argparse.ArgumentParser):
    """argparse, with its own mistakes said as every other error of the CLI is: one `error: ...` line (the usage
    line before it, as argparse prints it), exit status 2."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(2, f"error: {self.prog.split()[-1]}: {message}\n")


class _Version(argparse.Action):
    """--version: the version, and the git commit when run from a checkout (asked only when given: it runs git)."""

    def __init__(self, option_strings: list[str], dest: str, **kwargs: object) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS,
                         help="print the version (and the git commit, when run from a checkout) and exit")

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object,
                 option_string: str | None = None) -> NoReturn:
        from eval.orchestrator import version_text

        print(version_text())  # on stdout, as argparse's own version action prints
        parser.exit(0)


def parser() -> argparse.ArgumentParser:
    p = Parser(prog="duplex-eval", description=__doc__)
    p.add_argument("--version", action=_Version)
    sub = p.add_subparsers(dest="command", required=True, parser_class=Parser)
    b = sub.add_parser("build", help="build a benchmark dataset folder")
    _add_build(b)
    r = sub.add_parser("run", help="run an adapter over a dataset (resumable)")
    _add_run(r)
    s = sub.add_parser("score", help="score run folders; writes RUN_DIR/scores.json")
    _add_score(s)
    rp = sub.add_parser("report", help="HTML report with per-episode timeline plots and audio")
    _add_report(rp)
    ex = sub.add_parser("export", help="export a run to a peer benchmark's own layout (m3: the M3-DuplexBench "
                                       "authors' evaluation, of a scored run; fdb: Full-Duplex-Bench v1's sample "
                                       "folders, of an M3 run)")
    _add_export(ex)
    im = sub.add_parser("import", help="import a peer benchmark's released data as a dataset config (m3: the "
                                       "M3-DuplexBench authors' layout, {split}.jsonl + audio/ + txt_align/; fdb: "
                                       "Full-Duplex-Bench v1 sample folders, {ID}/input.wav + task file)")
    _add_import(im)
    tr = sub.add_parser("text-reference", help="transcript-conditioned reference: respond/silent from text")
    _add_text_reference(tr)
    pu = sub.add_parser("push", help="upload a built dataset folder to the Hub (token from $HF_TOKEN)")
    _add_push(pu)
    pr = sub.add_parser("push-results", help="upload scored runs as a Hub results dataset whose card a "
                                             "leaderboard can read (token from $HF_TOKEN)")
    _add_push_results(pr)
    pm = sub.add_parser("push-metric", help="upload an evaluate module (metrics/NAME/) as a Hub metric Space "
                                             "(token from $HF_TOKEN)")
    _add_push_metric(pm)
    ev = sub.add_parser("events", help="M3 events (SHIFT/PAUSE/BC/BARGE_IN) of 2-channel dialogue WAVs")
    _add_events(ev)
    d = sub.add_parser("demo", help="build each benchmark's mini set, run silent/oracle/cascade, score, report")
    _add_demo(d)
    ca = sub.add_parser("check-adapter", help="protocol conformance checks of an adapter (your own model too); "
                                              "exit status 1 if any check fails")
    _add_check_adapter(ca)
    return p


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    quiet_libraries()
    argv = sys.argv[1:] if argv is None else list(argv)
    a = parser().parse_args(argv)
    a.argv = argv  # `run --num-processes` launches the same command in each process
    interrupt.install()
    try:
        return int(a.func(a))
    except (SchemaError, UsageError, FileNotFoundError, RuntimeError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except Interrupted as err:  # Ctrl-C in a run: what is on disk is kept
        if not err.quiet:  # another process of the same run says it
            print(str(err), file=sys.stderr)
        return 130
    except KeyboardInterrupt:
        print(f"interrupted ({a.command})", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
