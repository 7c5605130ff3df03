"""What `duplex-eval build` and the demo's builds share, so `build mpe --preset mini` and `make demo` write the same
bytes from the same clip cache (docs/quickstart.md): the options a command line gives (speech gate included), and
a quiet build whose statistics go to the dataset folder's build-info.json, with a summary of a few lines."""

from __future__ import annotations

import argparse
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from dataset_builder.atomic import atomic_write_json
from dataset_builder.benchmarks import Benchmark
from dataset_builder.build import BuildOptions

BUILD_INFO = "build-info.json"  # the build's statistics (counts, the speech gate's report), beside its card
BUILD_LOG = "duplex_eval.build"  # the builders' logger: its INFO lines are the summary


def build_options(a: argparse.Namespace, configs: tuple[str, ...] | None) -> BuildOptions:
    """The options of `duplex-eval build` as parsed from its command line; the TTS clip cache (and the speech
    gate's transcripts in it) in the one default place unless --cache-dir or --no-cache says otherwise."""
    from dataset_builder.tts.cache import default_cache_dir
    from eval.cli import heard_gate, speech_gate
    from eval.run import parse_kv

    cache_dir = None if a.no_cache else Path(a.cache_dir or default_cache_dir())
    return BuildOptions(preset=a.preset, seed=a.seed, tts=a.tts, tts_args=parse_kv(a.tts_arg, "--tts-arg"), n=a.n,
                        cache_dir=cache_dir,
                        speech_gate=None if a.no_speech_gate or a.scripts_only else speech_gate(cache_dir),
                        heard_gate=None if a.scripts_only else heard_gate(),
                        progress=a.progress, scripts_only=a.scripts_only, workers=a.workers,
                        writer=a.writer, writer_args=parse_kv(a.writer_arg, "--writer-arg"),
                        stats=Path(a.stats) if a.stats else None, configs=configs)


def quiet_libraries() -> None:
    """No library's own chatter in the commands' output: faster-whisper logs a line per transcribed clip at INFO
    ("Processing audio with duration ..."); `datasets` bars are turned off where the parquet is written."""
    logging.getLogger("faster_whisper").setLevel(logging.WARNING)


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@contextmanager
def _held_log() -> Iterator[list[str]]:
    """The builders' INFO lines ("built 40 MPE cases ...", the speech gate's counts), held back for the summary
    instead of printed as they come; warnings still print at once."""
    logger = logging.getLogger(BUILD_LOG)
    held = _Lines()
    propagate, level = logger.propagate, logger.level
    logger.addHandler(held)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    warn = logging.StreamHandler()
    warn.setLevel(logging.WARNING)
    logger.addHandler(warn)
    try:
        yield held.lines
    finally:
        logger.removeHandler(held)
        logger.removeHandler(warn)
        logger.propagate, logger.level = propagate, level


def build_quietly(bench: Benchmark, out: Path, options: BuildOptions) -> tuple[dict[str, Any], list[str]]:
    """Build `bench` into `out`; its statistics written to OUT/build-info.json, and the summary lines: what was
    built, in how long, what the speech gate found."""
    quiet_libraries()
    with _held_log() as lines:
        info = bench.function("build")(out, options)
    atomic_write_json(Path(out) / BUILD_INFO, info)
    lines.append(f"build statistics: {Path(out) / BUILD_INFO}")
    return info, lines
