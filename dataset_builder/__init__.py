"""Dataset construction: schema, TTS, script generation, timeline assembly and HF dataset writing."""
