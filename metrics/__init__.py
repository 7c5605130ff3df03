"""Measurement layer: VAD spans, ASR, content judges, text normalisation and statistics.

Imports `dataset_builder` only — never `adapters` or `eval` — so a released recording can be scored alone.
Heavy backends (Silero, whisper, Qwen3-ASR) load lazily on first use.
"""

from pathlib import Path

# The `evaluate` modules (Hugging Face metric scripts over stored measurements), one folder each:
# <name>/<name>.py and its card <name>/README.md. The benchmarks' own scorers are metrics/<benchmark>/.
EVALUATE_MODULES = Path(__file__).resolve().parent / "evaluate_modules"


def metric_names() -> list[str]:
    """The names of the `evaluate` modules, sorted."""
    return sorted(p.name for p in EVALUATE_MODULES.iterdir() if (p / f"{p.name}.py").is_file())


def metric_dir(name: str) -> str:
    """The absolute folder of an evaluate-style metric module, for `evaluate.load(metric_dir("duplex_mpe"))` from
    any working directory."""
    folder = EVALUATE_MODULES / name
    if not (folder / f"{name}.py").is_file():
        raise FileNotFoundError(f"no metric module {name!r} under {EVALUATE_MODULES}; known: {metric_names()}")
    return str(folder)
