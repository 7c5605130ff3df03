"""How well the default ASR understands the TTS voice bank: "Aria" recognition and per-voice word error rate on
the sentence sample `dataset_builder/tts/aria_sentences.jsonl` (200 sentences saying "Aria" at the start,
after a greeting, at the end, mid-sentence and as "Aria's"; half marked `tune`, the half that pronunciation
choices were made on, half `held`, never looked at while choosing).

    .venv/bin/python benchmarks/bench_speech.py [--voices V1,V2] [--split held] [--out FILE.json]

Every sentence is spoken by every human voice of the backend; transcripts are cached on disk by audio digest
(the speech gate's cache), so a re-run after a change re-transcribes only clips whose audio changed.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dataset_builder.audio import SESSION_SR  # noqa: E402
from dataset_builder.progress import Progress  # noqa: E402
from dataset_builder.tts import get_tts  # noqa: E402
from dataset_builder.tts.cache import CachedTTS, default_cache_dir  # noqa: E402
from metrics.intelligibility import (  # noqa: E402
    AsrSpeechGate,
    TurnResult,
    format_audio_diagnostics,
    summarise,
    word_errors,
)

SAMPLE = Path(__file__).resolve().parents[1] / "dataset_builder" / "tts" / "aria_sentences.jsonl"


def load_sample(split: str | None = None) -> list[dict[str, str]]:
    rows = [json.loads(line) for line in SAMPLE.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [r for r in rows if split in (None, r["split"])]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tts", default="piper")
    p.add_argument("--voices", default=None, help="comma-separated voice ids (default: the backend's human voices)")
    p.add_argument("--split", choices=["tune", "held"], default=None, help="one half only (default: both)")
    p.add_argument("--cache-dir", default=str(default_cache_dir()))
    p.add_argument("--threads", type=int, default=2, help="ASR threads")
    p.add_argument("--limit", type=int, default=None, help="the first N sentences of each half only")
    p.add_argument("--out", default=None, help="also write the numbers as JSON here")
    a = p.parse_args(argv)
    backend = get_tts(a.tts)
    tts = CachedTTS(backend, Path(a.cache_dir))
    gate = AsrSpeechGate(cache_dir=a.cache_dir, threads=a.threads)
    voices = a.voices.split(",") if a.voices else backend.voices()
    rows = load_sample(a.split)
    if a.limit:
        rows = [r for half in ("held", "tune") for r in [r for r in rows if r["split"] == half][: a.limit]]
    else:  # the held-out half first: the number that matters most is there first if the run is cut short
        rows = sorted(rows, key=lambda r: r["split"] != "held")
    bar = Progress("speech sample", len(rows) * len(voices), enabled=True)
    t0 = time.perf_counter()
    results: dict[str, list[TurnResult]] = {"tune": [], "held": []}
    for r in rows:  # every voice speaks a sentence before the next: a partial run is balanced across voices
        for voice in voices:
            transcript = gate.transcribe(tts.synthesize(r["text"], voice), SESSION_SR)
            results[r["split"]].append(TurnResult(r["id"], r["split"], r["position"], voice, r["text"], transcript,
                                                  word_errors(r["text"], transcript)))
            bar.advance(note=voice)
    report = {"tts": backend.name, "voices": voices, "seconds": round(time.perf_counter() - t0, 1)}
    for split in ("tune", "held", "all"):
        turns = results["tune"] + results["held"] if split == "all" else results[split]
        if not turns:
            continue
        report[split] = summarise(turns, asr_name=gate.name, n_cases=len({t.case_id for t in turns}))
        print(f"== {split} ({len(turns)} clips; by label = sentence position)")
        print(format_audio_diagnostics(report[split]))
    if a.out:
        Path(a.out).write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
