"""The native libraries' settings that decide float results, pinned in one place (docs/testing.md, "Same numbers
on another machine").

The same audio can give other numbers on another machine because the native libraries pick their kernels by CPU:

- CTranslate2 (faster-whisper, the default ASR) multiplies with Intel MKL on Intel CPUs and with oneDNN elsewhere,
  each through kernels chosen by instruction set (AVX2, AVX-512, VNNI), and its own kernels (softmax, layer norm)
  likewise. int8 whisper decodes greedily, so two kernels that round one product differently can flip a word where
  two tokens are nearly tied. Pinned: oneDNN on every CPU (`CT2_USE_MKL=0`), and where the CPU has AVX2 (every x86
  CPU since 2013-2015) CTranslate2's and oneDNN's kernels capped at AVX2 (`CT2_FORCE_CPU_ISA`,
  `ONEDNN_MAX_CPU_ISA`), so an AVX-512 machine runs the AVX2 kernels an AVX2-only machine runs. The thread count
  and the compute type are the ASR's own arguments (`metrics.asr.FasterWhisperASR`), fixed there.
- ONNX Runtime (piper TTS, Silero VAD) sizes its thread pool to the machine's physical cores, and its float results
  change with the thread count (piper through 1 thread and through 2 differ in the last bit of some samples).
  Pinned: `ORT_THREADS` intra-op threads and sequential execution for every session made here. ONNX Runtime has
  no switch for its kernels' instruction set; that part can still differ on a CPU with AVX-512.

A variable already set in the environment is kept (the user's choice) and recorded as what ran.
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
from functools import cache
from typing import Any

# One intra-op thread per ONNX Runtime session, as the build's worker processes use (`dataset_builder.pool`), so a
# clip spoken in a worker and the same clip spoken by an agent in the runner's process are the same bytes.
ORT_THREADS = 1


@cache
def _cpu_flags() -> frozenset[str]:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("flags"):
                    return frozenset(line.partition(":")[2].split())
    except OSError:
        pass
    return frozenset()


@cache
def cpu_name() -> str:
    """The CPU's model name where the OS says it (Linux), else the machine type."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.partition(":")[2].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def ctranslate2_env() -> dict[str, str]:
    """The environment CTranslate2 is pinned with on this CPU."""
    env = {"CT2_USE_MKL": "0"}
    if "avx2" in _cpu_flags():  # forcing an instruction set the CPU lacks is an error in CTranslate2
        env |= {"CT2_FORCE_CPU_ISA": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"}
    return env


def pin_ctranslate2() -> dict[str, str]:
    """Set `ctranslate2_env()` (keeping any of it the user has set) before the first model loads: CTranslate2 and
    oneDNN read these once, when the first model is created. Returns the settings in force."""
    for name, value in ctranslate2_env().items():
        os.environ.setdefault(name, value)
    return ctranslate2_settings()


def ctranslate2_settings() -> dict[str, str]:
    """The pinning variables as they are in this process's environment ("" where unset)."""
    return {name: os.environ.get(name, "") for name in ("CT2_USE_MKL", "CT2_FORCE_CPU_ISA", "ONEDNN_MAX_CPU_ISA")}


def ort_session_options(threads: int = ORT_THREADS) -> Any:
    """ONNX Runtime session options with a fixed thread count and sequential execution."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
    return options


def runtime_record() -> dict[str, Any]:
    """What a result records about the machine and native libraries that computed it."""
    versions = {}
    for package in ("ctranslate2", "onnxruntime"):
        try:
            versions[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            versions[package] = None
    return {"cpu": cpu_name(), "ctranslate2_env": ctranslate2_settings(), "ort_threads": ORT_THREADS, **versions}
