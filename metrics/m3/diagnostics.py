"""The audio half of `duplex-eval build m3 --diagnostics`: how well an offline ASR understands each voice of a
built M3 folder. The text half and the report are `dataset_builder/m3/diagnostics.py` (which may not import
metrics); `audit` here joins them and is what the CLI calls.

Every TURN utterance whose audio lies wholly inside some row's clip, and is not cut by a barge-in, is cut from
its channel once (the first row that holds it) and transcribed by the offline ASR of its language
(`metrics.asr.asr_for_language`: whisper tiny.en for English, multilingual whisper base told "ja" for Japanese),
unless an ASR is given. English: word error rate against the text as the TTS said it
(`metrics.intelligibility.word_errors`). Japanese: character error rate on the reading (`metrics.cer_ja`: both
texts as OpenJTalk katakana, so spelling variants do not count), with the written-character rate beside it. Both
pooled per voice. An ASR that does not declare the config's language (`languages`) leaves it "not measured".
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

from dataset_builder.audio import SESSION_SR
from dataset_builder.m3 import diagnostics as text_part
from dataset_builder.m3.rows import iter_items
from dataset_builder.m3.schema import CONFIGS, SYSTEM_CHANNEL, USER_CHANNEL
from metrics.asr import ASR, asr_for_language
from metrics.cer_ja import character_errors
from metrics.intelligibility import WordErrors, word_errors


def asr_languages(asr: ASR) -> tuple[str, ...]:
    """The languages an ASR transcribes: its `languages`, else English (the registered default is English only)."""
    return tuple(getattr(asr, "languages", ("en",)))


def voice_intelligibility(folder: Path, config: str, asr: ASR) -> dict[str, Any]:
    language = CONFIGS[config][0]
    name = getattr(asr, "name", type(asr).__name__)
    if language not in asr_languages(asr):
        return {"measured": False, "asr": name, "note": f"{name} does not transcribe {language}"}
    metric = "WER" if language == "en" else "CER (reading)"
    errors: dict[str, WordErrors] = defaultdict(WordErrors)
    written: dict[str, WordErrors] = defaultdict(WordErrors)
    turns: dict[str, int] = defaultdict(int)
    speakers: dict[str, str] = {}
    seen_rows: set[str] = set()
    seen: set[str] = set()
    for case, audio in iter_items(folder, config):
        ev = case.event
        if ev.event_id in seen_rows:
            continue
        seen_rows.add(ev.event_id)
        for u in ev.utterances:
            whole = (u.start_s > 0 or ev.dialogue_offset_s == 0) and u.end_s <= ev.window_end_s
            if u.kind != "turn" or u.cut or not whole or u.utt_id in seen:
                continue
            seen.add(u.utt_id)
            ch = USER_CHANNEL if u.speaker == "user" else SYSTEM_CHANNEL
            clip = audio[round(u.start_s * SESSION_SR): round(u.end_s * SESSION_SR), ch]
            heard = asr.transcribe(clip, SESSION_SR)
            voice = ev.user_voice if u.speaker == "user" else ev.system_voice
            speakers[voice] = u.speaker
            turns[voice] += 1
            if language == "en":
                errors[voice] += word_errors(u.text, heard)
            else:
                errors[voice] += character_errors(u.text, heard, reading=True)
                written[voice] += character_errors(u.text, heard)
    voices = {v: {"speaker": speakers[v], "turns": turns[v], "units": e.ref_words, "errors": e.errors,
                  "rate": round(e.rate, 4),
                  **({"written_cer": round(written[v].rate, 4)} if v in written else {})}
              for v, e in sorted(errors.items())}
    return {"measured": True, "asr": name, "metric": metric, "voices": voices}


def audit(folder: Path | str, asr: ASR | None = None) -> str:
    """`build m3 --diagnostics`: text, events and ASR per voice (each language's offline ASR unless one is
    given)."""
    models: dict[str, ASR] = {}

    def measure(f: Path, config: str) -> dict[str, Any]:
        language = CONFIGS[config][0]
        if asr is not None:
            return voice_intelligibility(f, config, asr)
        if language not in models:
            models[language] = asr_for_language(language)
        return voice_intelligibility(f, config, models[language])

    return text_part.audit(Path(folder), measure)
