"""The native libraries' pinned settings (dataset_builder.numerics): what whisper and piper compute with."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from dataset_builder.numerics import ORT_THREADS, ctranslate2_env, pin_ctranslate2, runtime_record

REPO = Path(__file__).resolve().parent.parent
AVX2 = "avx2" in Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else False


def test_ctranslate2_is_pinned_to_onednn_and_avx2() -> None:
    expected = {"CT2_USE_MKL": "0"}
    if AVX2:
        expected |= {"CT2_FORCE_CPU_ISA": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"}
    assert ctranslate2_env() == expected


def test_a_setting_the_user_made_is_kept_and_recorded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CT2_USE_MKL", "1")
    monkeypatch.delenv("CT2_FORCE_CPU_ISA", raising=False)
    settings = pin_ctranslate2()
    assert settings["CT2_USE_MKL"] == "1" and os.environ["CT2_USE_MKL"] == "1"
    assert settings["CT2_FORCE_CPU_ISA"] == ("AVX2" if AVX2 else "")
    record = runtime_record()
    assert record["ctranslate2_env"] == settings and record["ort_threads"] == ORT_THREADS == 1
    assert record["ctranslate2"] and record["onnxruntime"] and record["cpu"]


def test_whisper_loads_with_the_pinned_kernels() -> None:
    """CTranslate2 says what it chose when verbose: oneDNN, not MKL, whatever the CPU's vendor; AVX2 where the CPU
    has it. Run in a fresh process with none of the variables set, since CTranslate2 reads them once."""
    env = {k: v for k, v in os.environ.items() if k not in ctranslate2_env()} | {"CT2_VERBOSE": "1",
                                                                                "PYTHONPATH": str(REPO)}
    code = "from metrics.asr import FasterWhisperASR; FasterWhisperASR()._load()"
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Use Intel MKL: false" in done.stderr
    assert "GEMM_S8 backend: DNNL" in done.stderr
    if AVX2:
        assert "Selected ISA: AVX2" in done.stderr


def _no_setup() -> None:
    pass


def _speak_in_worker(text: str) -> np.ndarray:
    from dataset_builder.tts.piper_backend import PiperTTS

    tts = PiperTTS()
    return tts.synthesize(text, tts.assistant_voice)


def test_piper_speaks_the_same_bytes_in_a_build_worker_and_in_this_process(piper) -> None:
    """An agent's voice in the runner's process and a dataset clip in a build worker (one native thread) are the
    same samples: the session is pinned to one thread in both. With the session piper makes by itself (sized to
    the cores) a 2-core machine differed in the last bits of this very sentence (up to 1.5e-6)."""
    from dataset_builder.pool import WorkerPool
    from dataset_builder.tts.piper_backend import _load_voice

    assert _load_voice().session.get_session_options().intra_op_num_threads == ORT_THREADS
    text = "The answer is 42."
    with WorkerPool(1, _no_setup) as pool:
        in_worker = pool.submit(_speak_in_worker, text).result()
    here = piper.synthesize(text, piper.assistant_voice)
    assert here.dtype == np.float32 and here.size > 10_000
    assert np.array_equal(here, in_worker)
