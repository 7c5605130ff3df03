"""How often the offline ASR makes a perfect model's spoken answer score wrong, per backend and setting.

Two sets, both spoken by the project's piper TTS and heard the way the scorer hears a model:

- oracle answers: the Duplex-MPE gold answers of pairs 0..N-1 (explicit script; distinct question/gold only),
  each said as the oracle agent says it ("The answer is 4:30."), in the assistant voice or, with
  `--oracle-voices K`, in the first K voices of the bank in turn (answer i in voice i mod K), put between 0.5 s of
  silence, cut by the scorer's VAD, padded like every span the scorer gives the ASR (`metrics.scoring.asr_spans`),
  transcribed, and judged by the heuristic judge (metrics/answer_match.py). Every "incorrect" is a misjudgement.
- hard numbers: clock times, "one hundred eighty", codes read digit by digit, money and ordinals, each said in
  several voices (the assistant's and user voices of the bank); the share judged correct.

    .venv/bin/python benchmarks/bench_asr.py                          # 1,000 pairs, the default settings list
    .venv/bin/python benchmarks/bench_asr.py --pairs 300 --settings tiny:int8:1,base:float32:5 --out asr.json
    .venv/bin/python benchmarks/bench_asr.py --pairs 1200 --oracle-voices 3 --settings default --out asr.json
    .venv/bin/python benchmarks/bench_asr.py --rejudge asr.json   # the stored transcripts, judged again

The JSON keeps every transcript (written as they come, so a run cut short keeps them, and `--resume` carries on
from them), so `--rejudge` judges them again with the current answer rule
(metrics/answer_match.py) without the ASR: the ASR is deterministic (greedy, temperature 0, pinned threads), so
this equals running the bench again.

A setting is MODEL:COMPUTE_TYPE:BEAM_SIZE with MODEL `tiny` (whisper tiny.en, `whisper-tiny-en`) or `base`
(multilingual whisper base told "en", `whisper-base`), or `default`: the scorers' ASR as they build it
(`metrics.asr.scoring_asr`, `SCORING_ASR`). The real-time factor is transcription seconds over the
seconds of audio given to the ASR (2 threads, as the scorer runs it), on whatever else the machine is doing.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from adapters.base import AssistantVoice  # noqa: E402
from adapters.oracle_mpe import answer_sentence  # noqa: E402
from dataset_builder.audio import SESSION_SR  # noqa: E402
from dataset_builder.mpe.generator import generate_pair  # noqa: E402
from dataset_builder.progress import Progress  # noqa: E402
from dataset_builder.tts import get_tts  # noqa: E402
from dataset_builder.tts.cache import CachedTTS, default_cache_dir  # noqa: E402
from metrics.asr import SCORING_ASR, FasterWhisperASR, WhisperBaseASR, scoring_asr  # noqa: E402
from metrics.judges import HeuristicJudge  # noqa: E402
from metrics.scoring import ASR_PAD_S, asr_spans, spans_audio  # noqa: E402
from metrics.vad import SileroVAD, VADParams  # noqa: E402

SILENCE_S = 0.5
DEFAULT_SETTINGS = "tiny:int8:1,tiny:float32:1,tiny:int8:5,base:int8:1,base:float32:1,base:int8:5"

# (question, gold, aliases, what is said): the readings whisper is known to trip on, in the dataset's forms: tiny.en's
# ("4:30" -> "for 30") and base's (compound numbers written as digit groups, "189" -> "10089"; "78" -> "178").
HARD: list[tuple[str, str, list[str], str]] = [
    ("A ride starts at 4:00 and takes 30 minutes. At what time does it end?", "4:30", ["4 30", "half past four"],
     "4:30"),
    ("A film starts at 7:50 and lasts 25 minutes. At what time does it end?", "8:15", ["8 15"], "8:15"),
    ("A roast goes in at 9:00 and needs 1 hour and 5 minutes. At what time is it ready?", "10:05", ["10 05"],
     "10:05"),
    ("A class starts at 11:20 and takes 1 hour and 25 minutes. At what time does it end?", "12:45", ["12 45"],
     "12:45"),
    ("A walk starts at 1:30 and takes 40 minutes. At what time does it end?", "2:10", ["2 10"], "2:10"),
    ("A shift starts at 6:15 and takes 2 hours. At what time does it end?", "8:15", ["8 15"], "8:15"),
    ("The bus leaves at 3:00 and the trip takes 1 hour. At what time does it arrive?", "4:00", ["4 o'clock"],
     "4:00"),
    ("3 hours: how many minutes is that?", "180", ["180 minutes", "one hundred eighty minutes"], "180"),
    ("3 hours: how many minutes is that?", "180", ["180 minutes", "one hundred eighty minutes"], "180 minutes"),
    ("2 hours: how many minutes is that?", "120", ["120 minutes"], "120"),
    ("7 hours: how many minutes is that?", "420", ["420 minutes"], "420"),
    ("8 hours: how many minutes is that?", "480", ["480 minutes"], "480"),
    ("What was the wifi code, as stated earlier in the conversation?", "4735", ["4 7 3 5", "four seven three five"],
     "4 7 3 5"),
    ("What was the building door code, as stated earlier in the conversation?", "8814",
     ["8 8 1 4", "eight eight one four"], "8 8 1 4"),
    ("What was the gate code, as stated earlier in the conversation?", "2409", ["2 4 0 9", "two four oh nine"],
     "2 4 0 9"),
    ("What was the exam room number, as stated earlier in the conversation?", "147", ["room 147", "one four seven"],
     "147"),
    ("What was the taxi bay, as stated earlier in the conversation?", "C14", ["C 14", "C fourteen"], "C14"),
    ("The cottage came to 117 dollars, split evenly between 3 people. How much does each person pay?", "39",
     ["$39", "39 dollars"], "39"),
    ("Revision guides cost 20 dollars each and 8 are needed. What is the total cost in dollars?", "160",
     ["$160", "160 dollars"], "$160"),
    ("Tickets cost 35 dollars each and 5 are needed. What is the total cost in dollars?", "175",
     ["$175", "175 dollars"], "175 dollars"),
    ("Which floor is the office on, as stated earlier in the conversation?", "3rd floor", ["third floor"],
     "the 3rd floor"),
    ("Which row were the seats in, as stated earlier in the conversation?", "21st row", ["twenty-first row"],
     "the 21st row"),
    ("What was the function room number, as stated earlier in the conversation?", "189",
     ["room 189", "room one hundred eighty-nine", "one eight nine", "one hundred eighty-nine", "one eighty-nine"],
     "189"),
    ("Pies cost 21 dollars each and 9 are needed. What is the total cost in dollars?", "189",
     ["$189", "189 dollars", "one hundred eighty-nine dollars"], "189"),
    ("What was the building door code, as stated earlier in the conversation?", "1529",
     ["1 5 2 9", "one five two nine"], "1529"),
    ("What was the hall door code, as stated earlier in the conversation?", "1546", ["1 5 4 6", "one five four six"],
     "1546"),
    ("What was my locker number, as stated earlier in the conversation?", "78",
     ["locker 78", "locker seventy-eight", "seven eight", "seventy-eight"], "78"),
]


@dataclass(frozen=True)
class Item:
    question: str
    gold: str
    aliases: tuple[str, ...]
    said: str  # the sentence spoken
    voice: str


def oracle_items(n_pairs: int, seed: int, voices: list[str], bank: list[str]) -> list[Item]:
    """The distinct (question, gold, aliases) of pairs 0..n_pairs-1, the k-th said in voices[k % len(voices)]."""
    seen: dict[tuple[str, str, tuple[str, ...]], Item] = {}
    for i in range(n_pairs):
        s, _ = generate_pair(i, seed, bank)
        key = (s.question, s.gold_answer, tuple(s.gold_aliases))
        if key not in seen:
            seen[key] = Item(*key, answer_sentence(s.gold_answer), voices[len(seen) % len(voices)])
    return list(seen.values())


def heard(clip24: np.ndarray, vad: SileroVAD) -> np.ndarray:
    """The clip as the scorer gives it to the ASR: between silences, cut by the VAD, padded."""
    pad = np.zeros(int(SILENCE_S * SESSION_SR), np.float32)
    x = np.concatenate([pad, clip24.astype(np.float32), pad])
    spans = vad.spans(x, SESSION_SR)
    return spans_audio(x, SESSION_SR, asr_spans(spans, (0.0, x.size / SESSION_SR)))


def make_asr(setting: str) -> FasterWhisperASR:
    if setting == "default":
        asr = scoring_asr()
        assert isinstance(asr, FasterWhisperASR), f"{SCORING_ASR} is not a faster-whisper ASR"
        return asr
    model, compute_type, beam = setting.split(":")
    if model == "tiny":
        return FasterWhisperASR(compute_type=compute_type, beam_size=int(beam))
    if model == "base":
        return WhisperBaseASR("en", compute_type=compute_type, beam_size=int(beam))
    raise SystemExit(f"--settings: unknown model {model!r} in {setting!r} (tiny or base)")


SAVE_EVERY = 25  # transcripts between two writes of --out, so a run cut short keeps what it heard


def _key(h: dict[str, Any]) -> tuple[str, ...]:
    return (h["question"], h["gold"], h["said"], h["voice"])


def run_setting(setting: str, sets: dict[str, list[tuple[Item, np.ndarray]]], out: dict[str, Any],
                save: Callable[[], None], done: dict[tuple[str, ...], str]) -> None:
    """Transcribe and judge every set into `out` (a row of the report), calling `save` as it goes; transcripts in
    `done` (a cut-short run of the same setting, --resume) are taken as heard."""
    asr, judge = make_asr(setting), HeuristicJudge()
    first = next(a for items in sets.values() for _, a in items)
    asr.transcribe(first, SESSION_SR)  # load the model outside the timed part
    asr._memo.clear()
    out.update({"setting": setting if setting != "default" else f"default ({asr.name})",
                "runtime": {k: v for k, v in asr.runtime().items() if k in ("compute_type", "cpu_threads",
                                                                             "beam_size")},
                "partial": True})
    busy = audio = 0.0
    bar = Progress(setting, sum(len(v) for v in sets.values()), enabled=True)
    for name, items in sets.items():
        heard_all: list[dict[str, Any]] = []
        for it, audio16 in items:
            h = {"question": it.question, "gold": it.gold, "aliases": list(it.aliases), "said": it.said,
                 "voice": it.voice}
            if _key(h) in done:
                h["heard"] = done[_key(h)]
            else:
                t0 = time.perf_counter()
                h["heard"] = asr.transcribe(audio16, SESSION_SR)
                busy += time.perf_counter() - t0
                audio += audio16.size / SESSION_SR
            heard_all.append(h)
            bar.advance()
            if len(heard_all) % SAVE_EVERY == 0 or len(heard_all) == len(items):
                out[name] = judged(heard_all, judge)
                out["rtf"] = round(busy / audio, 4) if audio else None
                save()
    out["partial"] = False
    save()


def judged(heard_all: list[dict[str, Any]], judge: HeuristicJudge) -> dict[str, Any]:
    """A set's transcripts with the judge's misjudgements ("examples")."""
    wrong = [{k: h[k] for k in ("gold", "said", "voice", "heard")} for h in heard_all
             if judge.judge_answer(h["question"], h["gold"], h["aliases"], h["heard"]).label != "correct"]
    return {"n": len(heard_all), "wrong": len(wrong), "examples": wrong, "transcripts": heard_all}


def print_table(report: dict[str, Any]) -> None:
    rows = [r for r in report["settings"] if "oracle" in r and "hard" in r]
    print(f"\n{report['oracle_answers']} distinct oracle answers (MPE seed {report['seed']}, pairs "
          f"0..{report['pairs'] - 1}, voices {', '.join(report['oracle_voices'])}); {report['hard_clips']} "
          f"hard-number clips ({report['hard_clips'] // len(report['voices'])} sentences x {len(report['voices'])} "
          f"voices); ASR pad {report['asr_pad_s']} s")
    print("| setting | oracle misjudged | per 1,000 | hard numbers right | real-time factor |")
    print("|---|---|---|---|---|")
    for r in rows:
        o, h = r["oracle"], r["hard"]
        cut = " (cut short)" if r.get("partial") else ""
        print(f"| {r['setting']}{cut} | {o['wrong']}/{o['n']} | {1000 * o['wrong'] / max(1, o['n']):.1f} | "
              f"{h['n'] - h['wrong']}/{h['n']} | {r['rtf']:.3f} |")
    for r in rows:
        for e in r["oracle"]["examples"] + r["hard"]["examples"]:
            print(f"  {r['setting']}: said {e['said']!r} ({e['voice']}) heard {e['heard']!r}")


def rejudge(path: Path) -> dict[str, Any]:
    """A stored report with every set judged again by the current answer rule."""
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
        for r in report["settings"]:
            for name in ("oracle", "hard"):
                if name in r:
                    r[name] = judged(r[name]["transcripts"], HeuristicJudge())
    except (OSError, ValueError, KeyError) as e:
        raise SystemExit(f"--rejudge {path}: not a bench_asr report with transcripts ({e!r})") from e
    return report


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pairs", type=int, default=1000, help="MPE pairs whose gold answers are spoken")
    p.add_argument("--seed", type=int, default=0, help="MPE build seed")
    p.add_argument("--settings", default=DEFAULT_SETTINGS, help="comma-separated MODEL:COMPUTE:BEAM")
    p.add_argument("--hard-voices", type=int, default=4, help="voices saying each hard number (assistant first)")
    p.add_argument("--oracle-voices", type=int, default=1, help="voices saying the oracle answers in turn")
    p.add_argument("--resume", action="store_true", help="keep the transcripts a cut-short --out run stored")
    p.add_argument("--rejudge", default=None, help="judge the transcripts of this --out report again, no ASR")
    p.add_argument("--cache-dir", default=str(default_cache_dir()))
    p.add_argument("--out", default=None, help="also write the numbers as JSON here")
    a = p.parse_args(argv)
    if a.rejudge:
        print_table(rejudge(Path(a.rejudge)))
        return 0
    mouth = AssistantVoice("piper", a.cache_dir, SESSION_SR)
    backend = get_tts("piper")
    tts = CachedTTS(backend, Path(a.cache_dir))
    voices = [mouth.voice, *[v for v in backend.voices() if v != mouth.voice]][: a.hard_voices]
    oracle = oracle_items(a.pairs, a.seed, voices[: max(1, a.oracle_voices)], backend.voices())
    hard = [Item(q, g, tuple(al), f"The answer is {said}.", v) for q, g, al, said in HARD for v in voices]
    vad = SileroVAD(VADParams())
    bar = Progress("speak", len(oracle) + len(hard), enabled=True)
    sets: dict[str, list[tuple[Item, np.ndarray]]] = {"hard": [], "oracle": []}
    for name, items in (("hard", hard), ("oracle", oracle)):
        for it in items:
            clip = mouth.speak(it.said) if it.voice == mouth.voice else tts.synthesize(it.said, it.voice)
            sets[name].append((it, heard(clip, vad)))
            bar.advance()
    rows: list[dict[str, Any]] = []
    done: dict[str, dict[tuple[str, ...], str]] = {}
    if a.resume and a.out and Path(a.out).is_file():
        for r in json.loads(Path(a.out).read_text(encoding="utf-8"))["settings"]:
            done[r["setting"]] = {_key(h): h["heard"] for name in ("hard", "oracle") if name in r
                                  for h in r[name]["transcripts"]}
    report: dict[str, Any] = {"pairs": a.pairs, "seed": a.seed, "asr_pad_s": ASR_PAD_S, "voices": voices,
                              "oracle_voices": voices[: max(1, a.oracle_voices)], "oracle_answers": len(oracle),
                              "hard_clips": len(hard), "settings": rows}

    def save() -> None:
        if a.out:
            tmp = Path(a.out + ".tmp")
            tmp.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
            tmp.replace(a.out)

    for setting in a.settings.split(","):
        rows.append({})
        run_setting(setting, sets, rows[-1], save, done.get(setting if setting != "default" else
                                                            f"default ({make_asr(setting).name})", {}))
    print_table(report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
