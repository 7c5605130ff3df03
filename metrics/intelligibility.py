"""Can the built audio be understood? ASR each turn clip of a dataset folder; word error rate per voice, and
how often the assistant's name is heard where a turn says it.

Measurements first, targets afterwards (`AudioTargets`). Definitions:

- A turn's clip is cut from the case's nominal audio by `case.clips`; its voice is its speaker's voice in
  `script.speakers`. Every turn of every case read counts (both scripts of a pair: each is a dataset row).
- Word error rate: reference (the turn text) and transcript are both normalised by `metrics.textnorm`
  (spelled numbers -> digits, then lowercase tokens), aligned by Levenshtein distance over words with unit
  costs; WER = (substitutions + deletions + insertions) / reference words. A voice's WER pools its turns'
  counts (errors summed over reference words summed), so long turns weigh more than short ones.
- "Aria" recognition: among turns whose text contains the word "Aria", the share whose transcript contains the
  word "aria" or "arya" (case-insensitive; "Aria's" counts, "Maria" does not).
- Speech-gate items (`expected_items`, used by `AsrSpeechGate` at build time): each "Aria", each person's name
  said in address (at the start of the text or of a clause, after a greeting word, or set off before a comma
  or end mark), and each number, as the WER tokens count them. An item is recovered when the transcript's WER
  tokens hold it at least as often as the text does ("Arya" counts as "Aria").
- Voices compared on the same texts (`same_text`): in a built set each voice reads different sentences, and at
  the mini set's size which sentences a voice drew moves its WER more than the voice does (a voice given
  "Aperol, prosecco and soda" twice). So the worst/best voice ratio is judged on the set's first N distinct
  turn texts, each spoken by every human voice of the backend that built the set (plain synthesis, no
  speech-gate retake); the ratio on the set's own audio is printed beside it.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from dataset_builder.atomic import atomic_write_text
from dataset_builder.audio import SESSION_SR, seconds_to_samples
from dataset_builder.diagnostics import format_checks
from dataset_builder.errors import UsageError
from dataset_builder.progress import Progress
from dataset_builder.schema import ASSISTANT_NAME, Case
from dataset_builder.speech_gate import SpeechCheck
from dataset_builder.tts.spoken import spoken_form
from metrics.asr import ASR, DEFAULT_ASR, get_asr
from metrics.textnorm import normalize, words_to_numbers

ARIA_SAID = re.compile(rf"\b{ASSISTANT_NAME}\b", re.IGNORECASE)
ARIA_HEARD = re.compile(r"\b(?:aria|arya)\b", re.IGNORECASE)


@dataclass(frozen=True)
class AudioTargets:
    """What the audio should reach (docs/benchmarks/mpe.md, "Auditing a build"); thresholds only, applied after
    measuring."""

    min_aria_rate: float = 0.90  # the ASR hears "Aria" in at least this share of the turns that say it
    max_wer_ratio: float = 1.25  # no voice's WER above this multiple of the best voice's


@dataclass(frozen=True)
class WordErrors:
    """Word-level edit counts of one or more (reference, hypothesis) alignments."""

    ref_words: int = 0
    substitutions: int = 0
    deletions: int = 0
    insertions: int = 0

    @property
    def errors(self) -> int:
        return self.substitutions + self.deletions + self.insertions

    @property
    def rate(self) -> float:
        """errors / reference words; with no reference word, 0.0 if nothing was inserted, else infinity."""
        if self.ref_words == 0:
            return 0.0 if self.errors == 0 else float("inf")
        return self.errors / self.ref_words

    def __add__(self, other: WordErrors) -> WordErrors:
        return WordErrors(self.ref_words + other.ref_words, self.substitutions + other.substitutions,
                          self.deletions + other.deletions, self.insertions + other.insertions)


def align_words(ref: Sequence[str], hyp: Sequence[str]) -> WordErrors:
    """Minimum-edit alignment of two word lists (unit costs). Among equally short alignments the backtrace
    prefers match/substitution, then deletion, then insertion, so the split of the total is deterministic."""
    n, m = len(ref), len(hyp)
    d = np.zeros((n + 1, m + 1), dtype=np.int64)
    d[:, 0] = np.arange(n + 1)
    d[0, :] = np.arange(m + 1)
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            d[i, j] = min(d[i - 1, j - 1] + (ref[i - 1] != hyp[j - 1]), d[i - 1, j] + 1, d[i, j - 1] + 1)
    i, j, subs, dels, ins = n, m, 0, 0, 0
    while i > 0 or j > 0:
        if i > 0 and j > 0 and d[i, j] == d[i - 1, j - 1] + (ref[i - 1] != hyp[j - 1]):
            subs += ref[i - 1] != hyp[j - 1]
            i, j = i - 1, j - 1
        elif i > 0 and d[i, j] == d[i - 1, j] + 1:
            dels, i = dels + 1, i - 1
        else:
            ins, j = ins + 1, j - 1
    return WordErrors(n, int(subs), dels, ins)


def wer_tokens(text: str) -> list[str]:
    """The words WER compares: `normalize(words_to_numbers(spoken_form(text)))`: clock times as the TTS says
    them ("4:00" is said "four o'clock", which an ASR writes "4 o'clock"), and a run of single digits joined into
    one token, since a code read out digit by digit ("4 7 3 5") is written either way ("4735") and a listener who
    wrote it as one number heard every digit."""
    return _join_digit_runs(normalize(words_to_numbers(spoken_form(text))))


def _join_digit_runs(tokens: list[str]) -> list[str]:
    out: list[str] = []
    run: list[str] = []
    for t in [*tokens, ""]:
        if len(t) == 1 and t.isdigit():
            run.append(t)
            continue
        out += ["".join(run)] if len(run) > 1 else run
        run = []
        if t:
            out.append(t)
    return out


def word_errors(reference: str, hypothesis: str) -> WordErrors:
    return align_words(wer_tokens(reference), wer_tokens(hypothesis))


def says_aria(text: str) -> bool:
    return ARIA_SAID.search(text) is not None


def heard_aria(transcript: str) -> bool:
    return ARIA_HEARD.search(transcript) is not None


@dataclass(frozen=True)
class TurnResult:
    case_id: str
    turn_id: str
    label: str
    voice: str
    text: str
    transcript: str
    errors: WordErrors

    @property
    def says_aria(self) -> bool:
        return says_aria(self.text)

    @property
    def heard_aria(self) -> bool:
        return heard_aria(self.transcript)


def transcribe_turns(cases: Iterable[tuple[Case, np.ndarray]], asr: ASR, *, progress: Progress | None = None
                     ) -> Iterator[TurnResult]:
    """ASR every turn clip of every case (audio on the 24 kHz session clock)."""
    for case, audio in cases:
        voices = {s.name: s.voice for s in case.script.speakers}
        for turn, clip in zip(case.script.turns, case.clips, strict=True):
            piece = audio[seconds_to_samples(clip.start_s):seconds_to_samples(clip.end_s)]
            transcript = asr.transcribe(piece, SESSION_SR)
            yield TurnResult(case.case_id, turn.turn_id, turn.label, voices[turn.speaker], turn.text, transcript,
                             word_errors(turn.text, transcript))
        if progress is not None:
            progress.advance(note=case.case_id)


def _errors_block(e: WordErrors, turns: int) -> dict[str, Any]:
    return {"turns": turns, **asdict(e), "wer": round(e.rate, 4)}


def _aria_block(turns: Sequence[TurnResult]) -> dict[str, Any]:
    said = [t for t in turns if t.says_aria]
    heard = sum(t.heard_aria for t in said)
    return {"turns": len(said), "heard": heard, "rate": round(heard / len(said), 4) if said else None}


def summarise(turns: Sequence[TurnResult], *, asr_name: str, n_cases: int, targets: AudioTargets = AudioTargets()
              ) -> dict[str, Any]:
    """Per-voice WER, the Aria recognition rate (overall, per label, per voice) and the target checks."""
    by_voice: dict[str, list[TurnResult]] = defaultdict(list)
    by_label: dict[str, list[TurnResult]] = defaultdict(list)
    for t in turns:
        by_voice[t.voice].append(t)
        by_label[t.label].append(t)
    per_voice = {v: _errors_block(sum((t.errors for t in ts), WordErrors()), len(ts))
                 for v, ts in sorted(by_voice.items())}
    overall = sum((t.errors for t in turns), WordErrors())
    rates = {v: b["wer"] for v, b in per_voice.items()}
    best = min(rates, key=lambda v: (rates[v], v)) if rates else None
    worst = max(rates, key=lambda v: (rates[v], v)) if rates else None
    if best is None or worst is None:
        ratio = None
    elif rates[best] > 0:
        ratio = round(rates[worst] / rates[best], 4)
    else:  # the best voice made no error: any error elsewhere is an unbounded multiple
        ratio = 1.0 if rates[worst] == 0 else None
    aria = _aria_block(turns)
    aria["by_label"] = {lab: b for lab, ts in sorted(by_label.items()) if (b := _aria_block(ts))["turns"]}
    aria["by_voice"] = {v: b for v, ts in sorted(by_voice.items()) if (b := _aria_block(ts))["turns"]}
    misses = [t for t in turns if t.says_aria and not t.heard_aria]
    aria["misses"] = [_example(t) for t in misses[:10]]
    worst_turns = sorted(turns, key=lambda t: (-t.errors.rate, t.case_id, t.turn_id))[:5]
    checks = [
        {"name": f'"{ASSISTANT_NAME}" heard where said', "value": aria["rate"],
         "target": f">= {targets.min_aria_rate:g}",
         "ok": aria["rate"] is not None and aria["rate"] >= targets.min_aria_rate},
        {"name": f"worst voice WER / best voice WER ({worst} / {best})", "value": ratio,
         "target": f"<= {targets.max_wer_ratio:g}", "ok": ratio is not None and ratio <= targets.max_wer_ratio},
    ]
    return {
        "asr": asr_name, "cases": n_cases, "turns": len(turns),
        "wer": _errors_block(overall, len(turns)),
        "per_voice": per_voice, "best_voice": best, "worst_voice": worst, "wer_ratio": ratio,
        "aria": aria,
        "worst_turns": [{**_example(t), "wer": round(t.errors.rate, 4)} for t in worst_turns],
        "targets": asdict(targets), "checks": checks, "ok": all(c["ok"] for c in checks),
    }


def _example(t: TurnResult) -> dict[str, Any]:
    return {"case_id": t.case_id, "turn_id": t.turn_id, "label": t.label, "voice": t.voice, "text": t.text,
            "transcript": t.transcript}


SAME_TEXTS = 100  # distinct texts each voice reads for the voice comparison; x 5 voices = 500 clips, ~4.5 min


def speaking_backend(cases: Sequence[Case]) -> tuple[Any, str | None]:
    """The TTS backend that spoke `cases`, rebuilt from its recorded name (with the on-disk clip cache), or None
    and why not: several backends, one this code cannot build without settings, or one it now names otherwise
    (another lexicon or spoken form would compare other audio)."""
    from dataset_builder.tts.base import get_tts
    from dataset_builder.tts.cache import CachedTTS, default_cache_dir

    names = sorted({c.tts_backend for c in cases})
    if len(names) != 1:
        return None, f"the cases were spoken by {len(names)} backends ({', '.join(names)})"
    try:
        backend = get_tts(names[0].split(":", 1)[0])
    except Exception as e:  # noqa: BLE001 - any reason it cannot be rebuilt is reported, not raised
        return None, f"cannot rebuild TTS backend {names[0]!r}: {e}"
    if backend.name != names[0]:
        return None, f"the set was spoken by {names[0]!r}, this code's backend is {backend.name!r}"
    return CachedTTS(backend, default_cache_dir()), None


def first_distinct_texts(cases: Sequence[Case], n: int) -> dict[str, str]:
    """The first `n` distinct turn texts of `cases` in reading order, each with the label of its first turn."""
    texts: dict[str, str] = {}
    for case in cases:
        for turn in case.script.turns:
            if len(texts) < n:
                texts.setdefault(turn.text, turn.label)
    return texts


def same_text_turns(texts: dict[str, str], tts: Any, asr: ASR, *, progress: Progress | None = None
                    ) -> Iterator[TurnResult]:
    """Each text (-> its label) spoken by every human voice of `tts` and heard by `asr` (case_id `text-NNN`,
    turn_id `same`)."""
    for i, (text, label) in enumerate(texts.items()):
        for voice in tts.voices():
            transcript = asr.transcribe(tts.synthesize(text, voice), SESSION_SR)
            yield TurnResult(f"text-{i:03d}", "same", label, voice, text, transcript, word_errors(text, transcript))
            if progress is not None:
                progress.advance(note=voice)


def _compare_voices_on_same_texts(d: dict[str, Any], cases: Sequence[Case], asr: ASR, n_texts: int,
                                  progress: bool, targets: AudioTargets) -> None:
    """Add `same_text` to a `summarise` result and judge the voice ratio there (see the module's definitions)."""
    tts, why_not = speaking_backend(cases)
    own = d["checks"][1]
    own["name"] = f"own texts: {own['name']}"
    if tts is None:
        d["same_text"] = {"skipped": why_not}
        return
    texts = first_distinct_texts(cases, n_texts)
    bar = Progress("diagnostics voices, same texts", len(texts) * len(tts.voices()), enabled=progress)
    turns = list(same_text_turns(texts, tts, asr, progress=bar))
    s = summarise(turns, asr_name=asr.name, n_cases=len(texts), targets=targets)
    kept = ("turns", "wer", "per_voice", "best_voice", "worst_voice", "wer_ratio", "aria")
    d["same_text"] = {"texts": len(texts), **{k: s[k] for k in kept}}
    same = s["checks"][1]
    d["checks"][1] = {**same, "name": f"same texts: {same['name']}"}
    d["own_text_ratio"] = {k: own[k] for k in ("name", "value")}
    d["ok"] = all(c["ok"] for c in d["checks"])


def audio_diagnostics(repo_dir: Path | str, config: str = "mpe", *, asr: ASR | None = None, limit: int | None = None,
                      same_texts: int = SAME_TEXTS, progress: bool = False, targets: AudioTargets = AudioTargets()
                      ) -> dict[str, Any]:
    """ASR the turns of the first `limit` cases (all when None) of a built folder (see `summarise`); then, unless
    `same_texts` is 0, compare the voices on their first `same_texts` distinct texts and judge the voice ratio
    there."""
    from dataset_builder.hf_dataset import iter_cases, list_cases

    if limit is not None and limit < 1:
        raise UsageError(f"--diagnostics-limit must be >= 1, got {limit}")
    if same_texts < 0:
        raise UsageError(f"--diagnostics-texts must be >= 0, got {same_texts}")
    if asr is None:
        asr = get_asr(DEFAULT_ASR)
    total = len(list_cases(repo_dir, config))
    n = total if limit is None else min(limit, total)
    bar = Progress("diagnostics asr", n, enabled=progress)

    def first_cases() -> Iterator[tuple[Case, np.ndarray]]:
        for i, item in enumerate(iter_cases(repo_dir, config)):
            if i >= n:
                return
            yield item

    read: list[Case] = []

    def remember(items: Iterable[tuple[Case, np.ndarray]]) -> Iterator[tuple[Case, np.ndarray]]:
        for case, audio in items:
            read.append(case)
            yield case, audio

    turns = list(transcribe_turns(remember(first_cases()), asr, progress=bar))
    d = summarise(turns, asr_name=asr.name, n_cases=n, targets=targets)
    if same_texts:
        _compare_voices_on_same_texts(d, read, asr, same_texts, progress, targets)
    return d


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f} %"


def format_audio_diagnostics(d: dict[str, Any]) -> str:
    """The lines a person reads; the same numbers as the dict."""
    lines = [f"audio: ASR {d['asr']} over {d['turns']} turns of {d['cases']} cases; "
             f"WER {_pct(d['wer']['wer'])} overall"]
    lines.append("  voice              turns  ref words   sub   del   ins     WER")
    for v, b in d["per_voice"].items():
        lines.append(f"  {v:<18} {b['turns']:>5}  {b['ref_words']:>9} {b['substitutions']:>5} {b['deletions']:>5} "
                     f"{b['insertions']:>5}  {_pct(b['wer']):>7}")
    a = d["aria"]
    lines.append(f'"{ASSISTANT_NAME}" heard in {a["heard"]}/{a["turns"]} turns that say it = {_pct(a["rate"])}')
    for title, key in (("label", "by_label"), ("voice", "by_voice")):
        lines.append(f"  by {title}: " + ", ".join(f"{k} {b['heard']}/{b['turns']}" for k, b in a[key].items()))
    for m in a["misses"][:5]:
        lines.append(f"  missed {m['case_id']} {m['turn_id']} ({m['voice']}): {m['text']!r} -> {m['transcript']!r}")
    lines.append("worst turns:")
    for t in d["worst_turns"]:
        lines.append(f"  {_pct(t['wer']):>8} {t['case_id']} {t['turn_id']} ({t['voice']}): {t['text']!r} -> "
                     f"{t['transcript']!r}")
    st = d.get("same_text")
    if st is not None and "skipped" in st:
        lines.append(f"voices on the same texts: skipped ({st['skipped']})")
    elif st is not None:
        lines.append(f"voices on the same texts: the first {st['texts']} distinct turn texts, spoken by every voice "
                     f"(WER {_pct(st['wer']['wer'])} overall)")
        for v, b in st["per_voice"].items():
            aria = st["aria"]["by_voice"].get(v)
            heard = f"   Aria {aria['heard']}/{aria['turns']}" if aria else ""
            lines.append(f"  {v:<18} {b['ref_words']:>5} words  WER {_pct(b['wer']):>7}{heard}")
        own = d["own_text_ratio"]
        lines.append(f"  (on the set's own audio, where each voice read other sentences: {own['name']} = "
                     f"{own['value']})")
    lines.append("targets:")
    lines.extend(format_checks(d["checks"]))
    return "\n".join(lines)


# ---------------------------------------------------------------- the build-time speech gate

_ARIA_TOKENS = frozenset({ASSISTANT_NAME.lower(), "arya"})
_GREETINGS = r"hey|hi|hello|okay|ok|oh|thanks|thank you|cheers|morning|night|bye|sorry|listen|look|right|well|so|and"


def _vocative(name: str) -> re.Pattern[str]:
    """`name` said in address: after a greeting word ("Hey Tom"), or at the start of the text or of a clause and
    followed by a comma, an end mark or the end of the text ("Tom, ...", "..., Tom?")."""
    n = re.escape(name)
    return re.compile(rf"\b(?:{_GREETINGS})\s+{n}\b|(?:^|[,.!?;:]\s*){n}(?=\s*(?:[,.!?;:]|$))", re.IGNORECASE)


def expected_items(text: str, names: Sequence[str] = ()) -> Counter[str]:
    """What the gate requires the ASR to recover from `text`: "Aria", addressed `names`, numbers (with counts)."""
    tokens = wer_tokens(text)
    items: Counter[str] = Counter(t for t in tokens if any(ch.isdigit() for ch in t))
    aria = len(ARIA_SAID.findall(text))
    if aria:
        items[ASSISTANT_NAME] = aria
    for name in dict.fromkeys(names):
        if name.lower() == ASSISTANT_NAME.lower():
            continue
        said = len(_vocative(name).findall(text))
        if said:
            items[name] = said
    return items


def missing_items(text: str, transcript: str, names: Sequence[str] = ()) -> tuple[str, ...]:
    """The expected items the transcript holds fewer times than the text, in a stable order."""
    heard = Counter(wer_tokens(transcript))
    heard[ASSISTANT_NAME] = sum(heard[t] for t in _ARIA_TOKENS)
    missing = []
    for item, n in expected_items(text, names).items():
        got = heard[item] if item == ASSISTANT_NAME or item[0].isdigit() else heard[item.lower()]
        if got < n:
            missing.append(item)
    return tuple(missing)


class AsrSpeechGate:
    """`dataset_builder.speech_gate.SpeechGate` with a real ASR (default: the suite's default ASR).

    The model loads on the first check, in whichever process makes it; pickling drops it, so each build worker
    loads its own. Transcripts are cached on disk by the clip's digest (sha256 of the float32 samples and the
    rate) under `cache_dir/asr/<asr name>/`, so a re-build checks nothing twice. One ASR thread: with the same
    thread count everywhere, a transcript (and so a retry decision) does not depend on the worker count.
    """

    def __init__(self, asr: str = DEFAULT_ASR, cache_dir: Path | str | None = None, threads: int = 1) -> None:
        self.asr_name = asr
        self.threads = int(threads)
        self.cache_dir = Path(cache_dir) / "asr" / re.sub(r"[^\w.-]+", "_", asr) if cache_dir else None
        self.name = f"asr:{asr}"
        self._asr: ASR | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_asr": None}

    def _model(self) -> ASR:
        if self._asr is None:
            kwargs: dict[str, Any] = {"cpu_threads": self.threads} if self.asr_name == DEFAULT_ASR else {}
            self._asr = get_asr(self.asr_name, **kwargs)
        return self._asr

    def transcribe(self, audio: np.ndarray, sr: int) -> str:
        audio = np.ascontiguousarray(audio, dtype=np.float32)
        digest = hashlib.sha256(audio.tobytes() + str(int(sr)).encode()).hexdigest()
        path = self.cache_dir / digest[:2] / f"{digest}.txt" if self.cache_dir else None
        if path is not None and path.is_file():
            return path.read_text(encoding="utf-8")
        text = self._model().transcribe(audio, sr)
        if path is not None:
            atomic_write_text(path, text)
        return text

    def check(self, text: str, audio: np.ndarray, sr: int, names: Sequence[str] = ()) -> SpeechCheck:
        transcript = self.transcribe(audio, sr)
        errors = word_errors(text, transcript)
        return SpeechCheck(missing_items(text, transcript, names), errors.ref_words, errors.errors, transcript)
