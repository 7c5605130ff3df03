"""A fake of the parts of Fun-Audio-Chat's public code that adapters/fun_audio_chat.py calls, written from
FunAudioLLM/Fun-Audio-Chat@8ba984b6 (funaudiochat/processing_funaudiochat.py, funaudiochat/modeling_funaudiochat.py,
funaudiochat/register.py, utils/cosyvoice_detokenizer.py, utils/constant.py, examples/infer_s2s.py; its CosyVoice
submodule at 2db78e70): the same names and call shapes, a tiny deterministic computation inside.

- `fake_checkout(root)`: a checkout laid out as the repository is, for the loader's imports: `funaudiochat/register.py`
  (`register_funaudiochat`), `utils/cosyvoice_detokenizer.py`, which, as its lines 24-30 do, puts
  `third_party/CosyVoice` and its `third_party/Matcha-TTS` first on sys.path and then imports `CosyVoice3` from
  `cosyvoice.cli.cosyvoice`, and CosyVoice only under `third_party/CosyVoice/`. With the README's set-up (the
  checkout alone on the path) `import cosyvoice` therefore fails until `utils.cosyvoice_detokenizer` has been
  imported, as with the real checkout.

- `FakeProcessor`: `apply_chat_template(conversation, add_generation_prompt=True, tokenize=False)` writes the
  conversation in ChatML; `__call__(text=, audio=[arrays])` refuses a count of `<|AUDIO|>` placeholders that differs
  from the number of audios (as the real one does) and returns a batch with `input_ids` (the prompt's UTF-8 bytes)
  and the audios (raw, padded, where the real one has Whisper features) with `.to(device)`; `decode(ids,
  skip_special_tokens=True)`.
- `FakeFunAudioChatModel.generate(**inputs, **gen_kwargs)` returns (prompt + reply text ids, speech ids) as the real
  `_sample` does: the reply sentence is picked from the prompt and the level of the last user turn; one speech token
  per 40 ms of speech heard in that turn (25 Hz), consecutive from a start set by the same key plus, when
  sampling, one draw from torch's global generator (as the real sampling draws); a control id outside
  CosyVoice3's vocabulary before and after.
- `fake_token2wav(cosyvoice3_model, tokens, embedding=None, token_hop_len=750, pre_lookahead_len=3)`: 40 ms of
  speech per token at 24 kHz, shape [1, n]: token t is the (t mod n)-th 40 ms of a piper clip (the suite's cached
  assistant voice), and the fake model's tokens run on consecutively, so a reply is real speech that Silero hears;
  a token outside 0..6560 raises, as CosyVoice3's embedding lookup would.

Every call is recorded (`calls`, `waves`) for the tests to read.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import torch

from adapters.fun_audio_chat import SPEECH_VOCAB, FunAudioChatParts
from tests.stand_in_checkout import write_checkout

SENTENCES = ("Sure, I can help with that.", "I hear you, please go on.", "Twelve times three is thirty six.",
             "Let me read that back to you.", "Okay, take your time.")
VOCAB = sorted({w for s in SENTENCES for w in s.split()})
WORD_ID = 1000  # the fake's first word id; ids from 151643 up are special, as in the real (Qwen) tokenizer
IM_END, AUDIO_BOS, SPECIAL = 151645, 151647, 151643
AUDIO_CONTROL = SPEECH_VOCAB + 1  # a speech id that is not a CosyVoice3 token (the real model's ends are such ids)
OUT_SR, TOKEN_SAMPLES = 24_000, 960  # CosyVoice3: 24 kHz, one 25 Hz token = 40 ms
VOICE_TEXT = "Of course. Tell me a little more about what is going on, and we will work through it together."
TTS_CACHE = Path(__file__).resolve().parent.parent / ".cache" / "tts"  # the suite's shared clip cache (conftest)


class FakeBatch(dict):
    """transformers' BatchFeature as the adapter uses it: items as attributes, `.to(device)` returning itself."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None

    def to(self, device: Any) -> FakeBatch:
        return self


class FakeProcessor:
    audio_token = "<|AUDIO|>"

    def apply_chat_template(self, conversation: list[dict[str, str]], add_generation_prompt: bool = False,
                            tokenize: bool = True) -> str:
        if tokenize:
            raise NotImplementedError("the fake only writes the template as text (tokenize=False)")
        text = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in conversation)
        return text + ("<|im_start|>assistant\n" if add_generation_prompt else "")

    def __call__(self, text: str | list[str] | None = None, audio: list[np.ndarray] | None = None,
                 return_tensors: str | None = None, return_token_type_ids: bool | None = None) -> FakeBatch:
        if text is None:
            raise ValueError("You need to specify `text` input to process.")
        texts = [text] if isinstance(text, str) else text
        audios = list(audio or [])
        placeholders = sum(t.count(self.audio_token) for t in texts)
        if placeholders != len(audios):
            raise ValueError(f"Found {placeholders} {self.audio_token} tokens in provided text but received "
                             f"{len(audios)} audios")
        if not all(isinstance(a, np.ndarray) and a.ndim == 1 for a in audios):
            raise ValueError("audio must be a list of 1-D numpy arrays")
        longest = max((a.size for a in audios), default=0)
        features = torch.zeros(len(audios), longest)
        mask = torch.zeros(len(audios), longest, dtype=torch.long)
        for i, a in enumerate(audios):
            features[i, :a.size], mask[i, :a.size] = torch.from_numpy(a.astype(np.float32)), 1
        ids = torch.tensor([list(texts[0].encode())], dtype=torch.long)
        return FakeBatch(input_ids=ids, attention_mask=torch.ones_like(ids), input_features=features,
                         feature_attention_mask=mask)

    def decode(self, ids: torch.Tensor, skip_special_tokens: bool = False) -> str:
        words = []
        for i in ids.tolist():
            if i >= SPECIAL:
                if not skip_special_tokens:
                    words.append(f"<|special_{i}|>")
            else:
                words.append(VOCAB[i - WORD_ID])
        return " ".join(words)


def speech_seconds(audio: np.ndarray, sr: int = 16_000) -> float:
    """Seconds of 20 ms blocks with RMS above 0.01: the speech in a turn, not its quiet."""
    block = sr // 50
    n = audio.size // block
    rms = np.sqrt(np.mean(audio[:n * block].reshape(n, block) ** 2, axis=1)) if n else np.zeros(0)
    return float(np.sum(rms > 0.01)) * 0.02


class FakeFunAudioChatModel:
    device = torch.device("cpu")

    def __init__(self) -> None:
        # The model's own defaults (modeling_funaudiochat.py); examples/infer_s2s.py updates them.
        self.sp_gen_kwargs: dict[str, Any] = {"text_greedy": False, "only_crq_sampling": True,
                                              "disable_speech": False, "force_text_abos": False}
        self.calls: list[dict[str, Any]] = []

    def generate(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, input_features: torch.Tensor,
                 feature_attention_mask: torch.Tensor, **gen_kwargs: Any) -> tuple[torch.Tensor, torch.Tensor]:
        prompt = bytes(input_ids[0].tolist()).decode()
        last = input_features[-1][feature_attention_mask[-1].bool()].numpy()
        key = int(input_ids.sum()) + round(1e4 * float(np.sqrt(np.mean(last ** 2))))
        sentence = SENTENCES[key % len(SENTENCES)]
        n = min(round(speech_seconds(last) * 25), int(gen_kwargs["max_new_tokens"]))
        draw = int(torch.randint(0, SPEECH_VOCAB, ())) if gen_kwargs.get("do_sample") else 0
        speech = [AUDIO_CONTROL] + [(7 * key + draw + k) % SPEECH_VOCAB for k in range(n)] + [AUDIO_CONTROL]
        words = [AUDIO_BOS] + [WORD_ID + VOCAB.index(w) for w in sentence.split()] + [IM_END]
        self.calls.append({"prompt": prompt, "audios": [a[m.bool()].numpy() for a, m in
                                                        zip(input_features, feature_attention_mask, strict=True)],
                           "gen_kwargs": dict(gen_kwargs), "sp_gen_kwargs": dict(self.sp_gen_kwargs),
                           "text": sentence, "speech": speech})
        return torch.cat([input_ids, torch.tensor([words])], dim=1), torch.tensor([speech])


class FakeCosyVoice3:
    sample_rate = OUT_SR

    def __init__(self) -> None:
        self.model = SimpleNamespace(hift_cache_dict={})
        self.waves: list[tuple[list[int], np.ndarray]] = []  # (tokens, the audio returned for them)


def fake_token2wav(cosyvoice3_model: FakeCosyVoice3, tokens: list[int], embedding: Any = None,
                   token_hop_len: int = 25 * 30, pre_lookahead_len: int = 3) -> torch.Tensor:
    bad = [t for t in tokens if not isinstance(t, int) or not 0 <= t < SPEECH_VOCAB]
    if bad:
        raise IndexError(f"speech tokens outside CosyVoice3's vocabulary: {bad[:3]}")
    material = voice()
    n = material.size // TOKEN_SAMPLES
    wave = np.concatenate([material[(tok % n) * TOKEN_SAMPLES:(tok % n + 1) * TOKEN_SAMPLES] for tok in tokens]
                          + [np.zeros(0, np.float32)])
    cosyvoice3_model.waves.append((list(tokens), wave))
    return torch.from_numpy(wave)[None]


@lru_cache(maxsize=1)
def voice() -> np.ndarray:
    """The fake detokenizer's material: piper speech at 24 kHz."""
    from dataset_builder.tts import get_tts
    from dataset_builder.tts.cache import CachedTTS

    tts = CachedTTS(get_tts("piper"), TTS_CACHE)
    return np.asarray(tts.synthesize(VOICE_TEXT, tts.assistant_voice), np.float32)


def fake_parts() -> FunAudioChatParts:
    return FunAudioChatParts(FakeFunAudioChatModel(), FakeProcessor(), FakeCosyVoice3(), fake_token2wav)


CHECKOUT_FILES = {
    "funaudiochat/__init__.py": "",
    "funaudiochat/register.py": "REGISTERED = []\n\n\ndef register_funaudiochat():\n    REGISTERED.append(True)\n",
    "utils/__init__.py": "",
    "utils/cosyvoice_detokenizer.py": (
        "import os\nimport sys\n\ncurrent_dir = os.path.dirname(os.path.abspath(__file__))\n"
        "sys.path.insert(0, os.path.join(current_dir, '../', 'third_party/CosyVoice'))\n"
        "sys.path.insert(0, os.path.join(current_dir, '../', 'third_party/CosyVoice/third_party/Matcha-TTS'))\n"
        "from cosyvoice.cli.cosyvoice import CosyVoice, CosyVoice3  # noqa: E402\n\n\n"
        "def token2wav(cosyvoice3_model, tokens, embedding=None, token_hop_len=25 * 30, pre_lookahead_len=3):\n"
        "    raise NotImplementedError\n"),
    "third_party/CosyVoice/cosyvoice/__init__.py": "",
    "third_party/CosyVoice/cosyvoice/cli/__init__.py": "",
    "third_party/CosyVoice/cosyvoice/cli/cosyvoice.py": (
        "class CosyVoice:\n    pass\n\n\nclass CosyVoice3(CosyVoice):\n"
        "    def __init__(self, model_dir, load_trt=False, load_vllm=False, fp16=False):\n"
        "        self.model_dir = model_dir\n"),
    "third_party/CosyVoice/third_party/Matcha-TTS/matcha/__init__.py": "",
}


def fake_checkout(root: Path) -> Path:
    """A stand-in checkout of FunAudioLLM/Fun-Audio-Chat@8ba984b6 under `root` (its import layout only)."""
    return write_checkout(root, CHECKOUT_FILES)
