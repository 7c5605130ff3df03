"""Japanese speech in and out, with the real components: Kokoro synthesis in every voice (format, determinism in
and out of the build's worker pool, speech found by Silero where the clip is), and whisper base hearing it."""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np
import pytest

from dataset_builder.audio import SESSION_SR
from dataset_builder.errors import UsageError
from dataset_builder.pool import WorkerPool
from dataset_builder.tts import LANGUAGE_TTS, TTSBackend, get_tts, tts_for_language
from dataset_builder.tts.kokoro_backend import (
    ASSISTANT_VOICE,
    MAX_PAUSE_S,
    VOICES,
    KokoroTTS,
    apply_readings,
    cap_pauses,
    readings,
)
from dataset_builder.tts.piper_backend import PiperTTS
from dataset_builder.tts.voices import SILENCE_DB
from metrics.asr import FasterWhisperASR, WhisperBaseASR, asr_for_language
from metrics.cer_ja import character_errors, reading_chars, written_chars
from metrics.vad import SileroVAD, VADParams

TEXT = "明日の会議は午後からに変更になったそうです。"
# Commas, where Kokoro pauses up to 0.9 s unless capped, and two sentences.
COMMAS = "それがさ、近所を散歩してただけで終わったんだよね、そっちは？うん。"
# The M3 extractor's VAD (metrics/m3/extract.py) and IPU split: a turn must come out as one IPU.
EVENTS_VAD = VADParams(threshold=0.5, neg_threshold=0.35, min_speech_ms=100, merge_gap_ms=100, min_silence_ms=0)
IPU_SPLIT_S = 0.5


@pytest.fixture(scope="module")
def kokoro() -> KokoroTTS:
    return KokoroTTS()


@pytest.fixture(scope="module")
def voice_audio(kokoro: KokoroTTS) -> dict[str, np.ndarray]:
    return {v: kokoro.synthesize(TEXT, v) for v in VOICES}


def sha(audio: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(audio, np.float32).tobytes()).hexdigest()


def longest_silence_s(audio: np.ndarray) -> float:
    """The longest run of samples below the edge-trim threshold strictly inside the clip."""
    loud = np.flatnonzero(np.abs(audio) > np.max(np.abs(audio)) * 10 ** (SILENCE_DB / 20))
    return float(np.max(np.diff(loud)) - 1) / SESSION_SR


def test_registry_and_language_lookup(kokoro: KokoroTTS) -> None:
    backend = get_tts("kokoro")
    assert isinstance(backend, TTSBackend) and backend.name == kokoro.name
    # The name identifies model (by hash), package, reading dictionary and front end: the cache key of a clip.
    assert kokoro.name.startswith("kokoro-ja:kokoro-v1.0-int8-6e742170d309+pkg=0.1.1+openjtalk=0.4.1.post10+fe=")
    assert kokoro.voices() == ["kokoro-jm-kumo", "kokoro-jf-gongitsune", "kokoro-jf-nezumi", "kokoro-jf-tebukuro"]
    assert kokoro.assistant_voice == ASSISTANT_VOICE not in kokoro.voices()
    assert tts_for_language("ja").name == kokoro.name
    # English keeps the backend every English build used, with the same name (so the same cached clips).
    assert LANGUAGE_TTS["en"] == "piper" and tts_for_language("en").name == PiperTTS().name
    with pytest.raises(UsageError, match="no offline TTS backend speaks 'fr'"):
        tts_for_language("fr")
    with pytest.raises(KeyError, match="unknown kokoro voice"):
        kokoro.synthesize(TEXT, "jf_alpha")  # the package's name, not ours


def test_settings_that_change_audio_are_in_the_name(kokoro: KokoroTTS) -> None:
    assert kokoro.slowed(1.3).name == kokoro.name + "@speed=0.769231"
    assert KokoroTTS(threads=2).name == kokoro.name + "@threads=2"
    with pytest.raises(ValueError):
        KokoroTTS(speed=0)


@pytest.mark.parametrize(("sentence", "heard", "not_heard"), [
    ("東京タワーは内藤多仲が設計しました。", "taʨɨː", "ta naka"),
    ("豊田市にある会社です。", "tojota ɕi", "tojoda"),
    ("天王星は遠い。", "tennoːseː", "teɴoːseː"),
    ("アイリッシュ海に面した街。", "aiɾʲiʔɕɨkai", "ɯmʲi"),
    ("J・R・R・トールキンの本。", "ʥei", None),
])
def test_readings_fix_what_the_front_end_misreads(kokoro: KokoroTTS, sentence: str, heard: str,
                                                   not_heard: str | None) -> None:
    said = " ".join(kokoro.phonemes(sentence))
    assert heard in said and (not_heard is None or not_heard not in said), said
    # Only the spoken form changes: a sentence without a listed name passes through untouched.
    assert apply_readings("東京タワーは高い。") == "東京タワーは高い。"


def test_readings_are_part_of_the_name(kokoro: KokoroTTS) -> None:
    table, digest = readings()
    assert "内藤多仲" in table and f"+readings={digest}" in kokoro.name


def test_every_voice_speaks_at_24k_peak_normalised(voice_audio: dict[str, np.ndarray]) -> None:
    assert SESSION_SR == 24_000
    for voice, audio in voice_audio.items():
        assert audio.dtype == np.float32 and audio.ndim == 1, voice
        assert 2.0 < audio.size / SESSION_SR < 5.0, voice  # 22 morae
        assert np.max(np.abs(audio)) == pytest.approx(10 ** (-3 / 20), rel=1e-3), voice
    assert len({sha(a) for a in voice_audio.values()}) == len(VOICES)  # five different voices


def test_speech_spans_cover_the_clip_as_one_ipu(voice_audio: dict[str, np.ndarray], kokoro: KokoroTTS) -> None:
    vad = SileroVAD(EVENTS_VAD)
    clips = {**{f"{v} plain": a for v, a in voice_audio.items()},
             **{f"{v} commas": kokoro.synthesize(COMMAS, v) for v in VOICES}}
    for label, audio in clips.items():
        dur = audio.size / SESSION_SR
        spans = vad.spans(audio, SESSION_SR)
        assert spans, label
        gaps = [b.start_s - a.end_s for a, b in zip(spans, spans[1:], strict=False)]
        assert max(gaps, default=0.0) < IPU_SPLIT_S - 0.1, (label, gaps)  # one IPU, with room to spare
        assert spans[0].start_s < 0.25 and dur - spans[-1].end_s < 0.15, (label, spans[0], spans[-1], dur)
        assert sum(s.end_s - s.start_s for s in spans) > 0.7 * dur, label
        assert longest_silence_s(audio) <= MAX_PAUSE_S + 1 / SESSION_SR, label


def test_same_text_and_voice_same_samples_in_and_out_of_the_pool(kokoro: KokoroTTS,
                                                                 voice_audio: dict[str, np.ndarray]) -> None:
    assert sha(kokoro.synthesize(TEXT, "kokoro-jm-kumo")) == sha(voice_audio["kokoro-jm-kumo"])
    items = [(TEXT, "kokoro-jm-kumo"), (TEXT, ASSISTANT_VOICE)]
    # A spawned worker with the pool's thread limits, its own model load, the backend sent by pickle.
    with WorkerPool(1, _start, (KokoroTTS(),)) as pool:
        from_pool = list(pool.ordered_map(_speak, items))
    assert [sha(a) for a in from_pool] == [sha(voice_audio[v]) for _, v in items]


_BACKEND: Any = None


def _start(backend: KokoroTTS) -> None:
    global _BACKEND
    _BACKEND = backend


def _speak(item: tuple[str, str]) -> np.ndarray:
    return _BACKEND.synthesize(*item)


def test_cap_pauses_shortens_only_long_inner_silences() -> None:
    sr = 100
    audio = np.zeros(300, np.float32)
    audio[[20, 30, 200, 240]] = [1.0, 0.5, 0.5, 0.5]
    out = cap_pauses(audio, sr, max_pause_s=0.5)  # cap = 50 samples
    # Leading and trailing silence and the 9- and 39-sample gaps stay; the 169-sample gap becomes 50 (25 + 25).
    assert np.flatnonzero(out).tolist() == [20, 30, 81, 121]
    assert out.size == 300 - (169 - 50)
    # Silence is relative to the clip's peak: samples just under the edge-trim threshold count as silence.
    quiet = audio * np.float32(10 ** ((SILENCE_DB - 1) / 20))
    quiet[0] = quiet[-1] = 1.0
    assert cap_pauses(quiet, sr, 0.5).size == 2 + 50


def test_character_error_rates_known_answers() -> None:
    assert written_chars("すみません、ここは 東京？ですか。") == list("すみませんここは東京ですか")
    assert character_errors("郵便局はありますか", "郵便局はありますか").errors == 0
    # A spelling variant is a written error but reads the same.
    assert character_errors("もともと", "元々").errors == 4
    assert character_errors("もともと", "元々", reading=True).errors == 0
    assert character_errors("千九百五十八年", "1958年", reading=True).errors == 0
    # Heard wrong: ユービンキョク vs ユーメーキョク, two of seven kana.
    assert "".join(reading_chars("郵便局")) == "ユービンキョク"
    assert character_errors("郵便局", "有名曲", reading=True).rate == pytest.approx(2 / 7)


@pytest.fixture(scope="module")
def whisper_ja() -> WhisperBaseASR:
    asr = asr_for_language("ja")
    assert isinstance(asr, WhisperBaseASR) and asr.name == "whisper-base:ja"
    return asr


def test_language_asr_keeps_english_as_before() -> None:
    en = asr_for_language("en")
    assert type(en) is FasterWhisperASR and en.name == "whisper-tiny-en" and en.language == "en"
    with pytest.raises(UsageError, match="qwen3-asr"):
        asr_for_language("fr")


def test_whisper_base_hears_kokoro_japanese(whisper_ja: WhisperBaseASR, voice_audio: dict[str, np.ndarray]) -> None:
    total = None
    for voice, audio in voice_audio.items():
        heard = whisper_ja.transcribe(audio, SESSION_SR)
        errors = character_errors(TEXT, heard, reading=True)
        assert errors.rate <= 0.15, (voice, heard)
        total = errors if total is None else total + errors
    assert total is not None and total.rate <= 0.05, total
    # Silence is not speech in any language.
    assert whisper_ja.transcribe(np.zeros(SESSION_SR // 20, np.float32), SESSION_SR) == ""
