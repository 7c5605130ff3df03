"""What every benchmark's builder shares: its options, the TTS it speaks through, and its scripts as JSONL.

Each benchmark's own builder (`dataset_builder/<bench>/build.py:build`, named in the benchmark registry) turns
these options into a dataset folder; `duplex-eval build <bench>` dispatches to it. With `scripts_only` a builder
writes only `scripts.jsonl` (its validated scripts, one JSON object per line) and synthesises nothing, so anyone
can audit the text in seconds (`dataset_builder.diagnostics`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dataset_builder.atomic import atomic_write_text
from dataset_builder.errors import UsageError
from dataset_builder.schema import SchemaError, Script
from dataset_builder.speech_gate import HeardGate, SpeechGate
from dataset_builder.tts import TTSBackend, get_tts
from dataset_builder.tts.cache import CachedTTS


@dataclass(frozen=True)
class BuildOptions:
    preset: str = "mini"
    seed: int = 0
    tts: str = "piper"
    tts_args: dict[str, Any] = field(default_factory=dict)  # backend constructor args (`--tts-arg K=V`)
    n: int | None = None  # overrides the preset's size (MPE: scenario pairs)
    cache_dir: Path | None = None
    progress: bool = False  # a progress line with counts and time left, on stderr
    scripts_only: bool = False  # write out/scripts.jsonl only: no TTS, no audio, no parquet
    workers: int | None = None  # synthesis processes (`--workers`); None: one per core
    # Listens to every synthesised turn and re-speaks the ones it cannot understand (dataset_builder.speech_gate);
    # the CLI passes metrics.intelligibility.AsrSpeechGate unless --no-speech-gate. Must be picklable (workers).
    speech_gate: SpeechGate | None = None
    # M3: the VAD that must hear every backchannel clip wherever it is placed (dataset_builder.speech_gate
    # `HeardGate`); the CLI passes metrics.m3.heard.SileroHeardGate. Must be picklable (workers).
    heard_gate: HeardGate | None = None
    writer: str = "template"  # who writes the scene text (`--writer`; MPE: dataset_builder/mpe/writer.py)
    writer_args: dict[str, Any] = field(default_factory=dict)  # writer constructor args (`--writer-arg K=V`)
    stats: Path | None = None  # M3: timing statistics to sample from (`--stats`, `duplex-eval events --stats-out`)
    configs: tuple[str, ...] | None = None  # build only these of the benchmark's configs (`--configs`); None: all

    def __post_init__(self) -> None:
        if self.workers is not None and self.workers < 1:
            raise UsageError(f"--workers must be >= 1, got {self.workers}")

    def size(self, presets: dict[str, int]) -> int:
        """The number of units to build: `n` if given, else the preset's."""
        if self.n is not None:
            if self.n < 1:
                raise UsageError(f"--n must be >= 1, got {self.n}")
            return self.n
        if self.preset not in presets:
            raise UsageError(f"unknown preset {self.preset!r}; known: {sorted(presets)}")
        return presets[self.preset]


def tts_backend(options: BuildOptions) -> TTSBackend:
    """The chosen backend, uncached. Constructors load no model, so scripts-only can ask it for its name and
    voices (the speaker->voice map is part of a script) without synthesising anything."""
    return get_tts(options.tts, **options.tts_args)


def unit_tts(backend: TTSBackend, cache_dir: Path | None) -> TTSBackend:
    """What one unit of work (a pair of scripts, in a worker) synthesises through. With a cache folder: the disk
    cache, whose memory memo lives only as long as the unit, so a pair's shared clips are synthesised once and a
    long build's memory stays flat. Workers share the folder; its writes are atomic, so concurrent writers of one
    clip leave one whole file. Without one: the backend itself."""
    return CachedTTS(backend, cache_dir) if cache_dir else backend


# What a build costs, for the progress line's first estimate (benchmarks/README.md (e), `bench_build.py
# --speech-gate` on 2 cores): CPU seconds per clip synthesised (piper), and per clip also checked by the speech
# gate (whisper, and the re-spoken attempts of the turns it misses); seconds per case placed and written once every
# clip is at hand; the workers' start-up (spawn, imports, model load).
SYNTH_CPU_S = 0.38
GATED_SYNTH_CPU_S = 1.27
CASE_S = 0.05
START_S = 5.0


def uncached_clips(backend: TTSBackend, cache_dir: Path | None, clips: Iterable[tuple[str, str]]) -> int:
    """How many of the (text, voice) clips the cache does not hold yet: what the build will synthesise."""
    clips = list(clips)
    if cache_dir is None:
        return len(clips)
    cache = CachedTTS(backend, cache_dir)
    return sum(not cache.path_for(text, voice).is_file() for text, voice in clips)


def build_estimate_s(missing_clips: int, cases: int, workers: int, gated: bool) -> float:
    """A build's expected wall seconds on an idle machine, before it starts (see the constants above)."""
    per_clip = GATED_SYNTH_CPU_S if gated else SYNTH_CPU_S
    return START_S + missing_clips * per_clip / max(workers, 1) + cases * CASE_S


SCRIPTS_FILE = "scripts.jsonl"


def write_scripts(out_dir: Path, scripts: Iterable[Script]) -> Path:
    """`out_dir/scripts.jsonl`, written atomically: each script validated, then `Script.to_dict()` on one line."""
    lines = []
    for script in scripts:
        script.validate()
        lines.append(json.dumps(script.to_dict(), ensure_ascii=False) + "\n")
    path = Path(out_dir) / SCRIPTS_FILE
    atomic_write_text(path, "".join(lines))
    return path


def read_scripts(path: Path) -> list[Script]:
    """The scripts of a `scripts.jsonl`, each validated; a bad line is a SchemaError naming the file and line
    (as its row, counted from 1)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist (write it with `duplex-eval build <bench> --scripts-only`)")
    scripts = []
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as err:
            raise SchemaError(f"not JSON ({err.msg})", source=str(path), row=i) from None
        scripts.append(Script.from_dict(data, source=str(path), row=i))
    return scripts
