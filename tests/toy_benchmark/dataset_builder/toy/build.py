"""`build toy`: the questions spoken by the project's TTS, written as the `toy` config with its card."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dataset_builder.toy.rows import BENCHMARK, toy_features

from dataset_builder.audio import wav_bytes
from dataset_builder.build import BuildOptions
from dataset_builder.hf_dataset import write_card, write_config
from dataset_builder.tts.base import get_tts
from dataset_builder.tts.cache import CachedTTS

# (question, answer): short, so a case runs in a few seconds.
QUESTIONS = (("What time is it?", "It is noon."), ("Where is the station?", "Next to the park."))
PRESETS = {"mini": len(QUESTIONS)}
CARD = Path(__file__).with_name("card.md")


def build(out_dir: Path, options: BuildOptions) -> dict[str, Any]:
    n = options.size(PRESETS)
    if n > len(QUESTIONS):
        raise ValueError(f"the toy has {len(QUESTIONS)} questions, asked for {n}")
    backend = get_tts(options.tts, **options.tts_args)
    tts = CachedTTS(backend, options.cache_dir) if options.cache_dir else backend
    voice = backend.voices()[0]
    rows = [{"case_id": f"toy-{i:02d}", "benchmark": BENCHMARK, "question": q, "answer": a, "voice": voice,
             "tts_backend": backend.name,
             "audio": {"bytes": wav_bytes(tts.synthesize(q, voice)), "path": f"toy-{i:02d}.wav"}}
            for i, (q, a) in enumerate(QUESTIONS[:n])]
    out_dir = Path(out_dir)
    features = toy_features()
    write_config(out_dir, BENCHMARK, rows, features)
    write_card(out_dir, {BENCHMARK: {"features": features}}, template=CARD, context={"n_cases": n},
               metadata={"pretty_name": "Toy benchmark (duplex-eval test fixture)"})
    return {"benchmark": BENCHMARK, "configs": {BENCHMARK: n}, "tts_backend": backend.name}
