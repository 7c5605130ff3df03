"""Measurement layer: VAD spans, ASR, content judges, text normalisation and statistics.

Imports `dataset_builder` only — never `adapters` or `eval` — so a released recording can be scored alone.
Heavy backends (Silero, whisper, Qwen3-ASR) load lazily on first use.
"""
