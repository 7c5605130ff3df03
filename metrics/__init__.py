"""Measurement layer: VAD spans, ASR, content judges, text normalisation and statistics.

Imports `dataset_builder` only — never `adapters` or `eval` — so a released recording can be scored alone.
Heavy backends (Silero, whisper, Qwen3-ASR) load lazily on first use.
"""

from pathlib import Path

_HERE = Path(__file__).resolve().parent


def metric_dir(name: str) -> str:
    """The absolute folder of an evaluate-style metric module, for `evaluate.load(metric_dir("duplex_mpe"))` from
    any working directory."""
    folder = _HERE / name
    if not (folder / f"{name}.py").is_file():
        known = sorted(p.name for p in _HERE.iterdir() if (p / f"{p.name}.py").is_file())
        raise FileNotFoundError(f"no metric module {name!r} under {_HERE}; known: {known}")
    return str(folder)
