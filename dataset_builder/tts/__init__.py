"""Text-to-speech behind one small protocol; backends are resolved lazily by name."""

from dataset_builder.tts.base import TTSBackend, get_tts, register_tts

__all__ = ["TTSBackend", "get_tts", "register_tts"]
