"""Text-to-speech behind one small protocol; backends are resolved lazily by name."""

from dataset_builder.tts.base import LANGUAGE_TTS, TTSBackend, get_tts, register_tts, tts_for_language

__all__ = ["LANGUAGE_TTS", "TTSBackend", "get_tts", "register_tts", "tts_for_language"]
