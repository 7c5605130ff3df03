"""Japanese speech in and out: Kokoro TTS speed, whisper base CER on its speech, and the VAD on its clips.

    .venv/bin/python benchmarks/bench_ja_speech.py [--workers 1,2] [--out DIR]

Every sentence of `ja_sentences.txt` (12 natural sentences) is spoken in each of the five Kokoro voices through a
`WorkerPool` of each size in --workers (spawned, one ONNX thread each, as builds run), after one warm-up clip per
worker, so the model load is not timed. Then, in this process: whisper base (`asr_for_language("ja")`)
transcribes every clip, scored by written and reading CER (`metrics.cer_ja`, pooled per voice); Silero VAD with
the M3 extractor's parameters finds each clip's speech spans, joined into IPUs at silences > 0.5 s as M3 does
(each clip should be one IPU whose edges sit near the clip's); and backchannel tokens are timed per voice.
Prints markdown tables and writes them with the raw numbers to OUT/bench-ja-speech.json. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

_ENGINE: Any = None  # the backend, in each pool worker
SENTENCES = Path(__file__).with_name("ja_sentences.txt")
BC_TOKENS = ("うん", "へえ", "うんうん", "なるほど", "たしかに", "そうですね")
IPU_SPLIT_S = 0.5  # M3: a silence longer than this splits an IPU


def _start_engine(backend: Any) -> None:
    global _ENGINE
    _ENGINE = backend


def _speak(item: tuple[str, str]) -> tuple[Any, float]:
    """One clip and the worker's CPU seconds for it (unlike wall time, hardly moved by other jobs on the host)."""
    cpu0 = time.process_time()
    audio = _ENGINE.synthesize(*item)
    return audio, time.process_time() - cpu0


def bench_tts(backend: Any, items: list[tuple[str, str]], workers: int) -> tuple[list[Any], dict[str, float]]:
    from dataset_builder.audio import SESSION_SR
    from dataset_builder.pool import WorkerPool

    with WorkerPool(workers, _start_engine, (backend,)) as pool:
        for f in [pool.submit(_speak, ("はい。", backend.assistant_voice)) for _ in range(workers)]:
            f.result()  # warm-up: each worker (most likely) loads the model once
        t0 = time.perf_counter()
        results = list(pool.ordered_map(_speak, items, window=len(items)))
        wall = time.perf_counter() - t0
    audio_s = sum(a.size for a, _ in results) / SESSION_SR
    cpu = sum(c for _, c in results)
    return [a for a, _ in results], {"workers": workers, "audio_s": round(audio_s, 2), "wall_s": round(wall, 2),
                                     "cpu_s": round(cpu, 2), "x_real_time": round(audio_s / wall, 2),
                                     "x_real_time_per_cpu_s": round(audio_s / cpu, 2)}


def vad_check(audio: Any) -> dict[str, float]:
    from dataset_builder.audio import SESSION_SR
    from metrics.vad import SileroVAD, VADParams

    # The M3 extractor's parameters (metrics/m3/extract.py EVENTS_VAD), spelled out so this script does not
    # depend on a module still being written.
    spans = SileroVAD(VADParams(threshold=0.5, neg_threshold=0.35, min_speech_ms=100, merge_gap_ms=100,
                                min_silence_ms=0)).spans(audio, SESSION_SR)
    dur = audio.size / SESSION_SR
    gaps = [b.start_s - a.end_s for a, b in zip(spans, spans[1:], strict=False)]
    return {"spans": len(spans), "ipus": (1 + sum(g > IPU_SPLIT_S for g in gaps)) if spans else 0,
            "lead_s": round(spans[0].start_s, 3) if spans else dur, "tail_s": round(dur - spans[-1].end_s, 3)
            if spans else dur, "max_gap_s": round(max(gaps, default=0.0), 3),
            "speech_s": round(sum(s.end_s - s.start_s for s in spans), 3)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--workers", default="1,2", help="pool sizes to time, comma-separated; default 1,2")
    p.add_argument("--out", default=None, help="where bench-ja-speech.json goes (default: a temporary folder)")
    a = p.parse_args(argv)
    from dataset_builder.audio import SESSION_SR
    from dataset_builder.tts.kokoro_backend import VOICES, KokoroTTS
    from metrics.asr import asr_for_language
    from metrics.cer_ja import character_errors
    from metrics.intelligibility import WordErrors

    out = Path(a.out or tempfile.mkdtemp(prefix="bench-ja-"))
    out.mkdir(parents=True, exist_ok=True)
    sentences = [s.strip() for s in SENTENCES.read_text(encoding="utf-8").splitlines() if s.strip()]
    backend = KokoroTTS()
    items = [(s, v) for v in VOICES for s in sentences]
    speed = []
    clips: list[Any] = []
    for w in (int(x) for x in a.workers.split(",")):
        clips, row = bench_tts(backend, items, w)
        speed.append(row)
    print(f"Kokoro ({backend.name}), {len(items)} clips, {speed[0]['audio_s']} s of speech\n")
    print("| workers | wall s | x real time | CPU s | x real time per CPU s |\n|---|---|---|---|---|")
    for r in speed:
        print(f"| {r['workers']} | {r['wall_s']} | {r['x_real_time']} | {r['cpu_s']} | {r['x_real_time_per_cpu_s']} |")

    asr = asr_for_language("ja")
    t0 = time.perf_counter()
    transcripts = [asr.transcribe(c, SESSION_SR) for c in clips]
    asr_wall = time.perf_counter() - t0
    per_voice: dict[str, dict[str, WordErrors]] = {v: {"written": WordErrors(), "reading": WordErrors()}
                                                   for v in VOICES}
    rows = []
    for (text, voice), clip, heard in zip(items, clips, transcripts, strict=True):
        written, reading = character_errors(text, heard), character_errors(text, heard, reading=True)
        per_voice[voice]["written"] += written
        per_voice[voice]["reading"] += reading
        rows.append({"voice": voice, "text": text, "transcript": heard, "written_errors": written.errors,
                     "reading_errors": reading.errors, **vad_check(clip)})
    total = {k: sum((pv[k] for pv in per_voice.values()), WordErrors()) for k in ("written", "reading")}
    clip_s = sum(c.size for c in clips) / SESSION_SR
    print(f"\n{asr.name}: {clip_s / asr_wall:.2f}x real time in this process\n")
    print("| voice | written CER | reading CER |\n|---|---|---|")
    for v, pv in [*per_voice.items(), ("all", total)]:
        print(f"| {v} | {pv['written'].rate:.3f} | {pv['reading'].rate:.3f} |")

    ipus = [r["ipus"] for r in rows]
    vad = {"clips": len(rows), "one_ipu": sum(n == 1 for n in ipus), "max_ipus": max(ipus),
           "lead_median_s": statistics.median(r["lead_s"] for r in rows), "lead_max_s": max(r["lead_s"] for r in rows),
           "tail_median_s": statistics.median(r["tail_s"] for r in rows), "tail_max_s": max(r["tail_s"] for r in rows),
           "max_internal_gap_s": max(r["max_gap_s"] for r in rows)}
    print(f"\nSilero VAD (M3 extractor parameters): {vad}")

    bcs = {}
    for token in BC_TOKENS:
        bcs[token] = {v: round(backend.synthesize(token, v).size / SESSION_SR, 3) for v in VOICES}
    print("\nBackchannel clip lengths, s (edges of 0.05 s included):")
    print("| token | " + " | ".join(VOICES) + " |\n|---|" + "---|" * len(VOICES))
    for token, lengths in bcs.items():
        print(f"| {token} | " + " | ".join(str(lengths[v]) for v in VOICES) + " |")

    result = {"tts": backend.name, "asr": asr.name, "speed": speed, "asr_x_real_time": round(clip_s / asr_wall, 2),
              "cer": {v: {k: {"rate": round(e.rate, 4), "errors": e.errors, "chars": e.ref_words}
                          for k, e in pv.items()} for v, pv in [*per_voice.items(), ("all", total)]},
              "vad": vad, "bc_lengths_s": bcs, "clips": rows}
    path = out / "bench-ja-speech.json"
    path.write_text(json.dumps(result, ensure_ascii=False, indent=1), encoding="utf-8")
    print(f"\nwrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
