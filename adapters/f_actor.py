"""`f-actor`: F-Actor (Züfle et al., ACL Findings 2026), a Llama-3.2-1B full-duplex model that follows instructions
about backchannels, interruptions and who opens, stepped one codec frame at a time (docs/models.md#f-actor-f-actor).

What its public code (github.com/MaikeZuefle/f-actor, `training/modeling_dsu.py`, `training/inference_example.py`)
defines, and what this adapter relies on:
- The codec is NVIDIA's NanoCodec `nvidia/nemo-nano-codec-22khz-0.6kbps-12.5fps` (NeMo `AudioCodecModel`: 22.05 kHz,
  12.5 frames a second, 4 codebooks of 4032 codes), the one the released `maikezu/f-actor` loads
  (`load_nanocodecs(num_codebooks=4)`, `config.num_dsus = 4`). The repository's Mimi scripts are for another,
  unreleased checkpoint (`f-actor-mimi`, 8 codebooks).
- The sequence: a projected 192-dim speaker embedding, the prompt's text tokens (the instruction, ending in
  `<|SOS|>`), then one position per codec frame whose input is the sum of 8 audio embeddings (codebooks 0-3: the
  model's own stream, 4-7: the partner's) and the embedding of the model's text-stream token. Both audio streams are
  `n_delay_audio_stream = 2` positions behind the text: position p holds text token p and the audio of frame p - 2
  (the first two positions hold the audio delay id). The last hidden state predicts the next position: the 8 audio
  codebooks through `dsu_head`, the text token through the LM head.
- Its own `generate` lets two copies talk to each other, each copy's partner heads overwritten with the other's
  own tokens. Here the partner is the user: the user's frames are NanoCodec-encoded and written into codebooks 4-7
  (teacher-forced, as DSB-IFEval's harness did), and the model's predictions for them are ignored.

Timing. Own frame k and user frame k share position k + 2, so in the model's timeline they are simultaneous, and own
frame k is predicted by position k + 1, which holds user frame k - 1. So `step(user_k)` returns own frame k (already
sampled), then feeds position k + 2 (text k + 2, own frame k, user frame k) and samples own frame k + 1 and text
k + 3. Nothing is compensated (`model_delay_frames = 0`): the recording's two channels are aligned as the model saw
them, and the model answers user frame k no earlier than frame k + 1 (80 ms): own frame k depends on user frames
before k only, which is the one timing rule of docs/adding-a-model.md without any delay added.
`reset` feeds the prompt and positions 0 and 1, which do not depend on the user.

The codec is stepped one frame at a time with `codec_context_frames` frames of left context: each frame is encoded
(and each own frame decoded) together with the frames before it, and only the new frame's codes (samples) are
kept, so nothing after a frame reaches it.

Teacher forcing: a forced model frame is NanoCodec-encoded and written as the model's own codebooks at its position
instead of what the model sampled; the forced audio is returned as it came, the text stream stays the model's.

Text (with `transcript="text-stream"`): the text-stream tokens, decoded one by one; its pads (`[SILENCE_PAD]`,
`[UTTERANCE_PAD]`, `[WORD_PAD]`) and the other special tokens are not words. `[BC...]` and `[INTER...]` mark a
backchannel or an interruption the model starts and are recorded as notes (with either `transcript`). A new
utterance's first word carries no space in its training data, so one is added after a pause.

Sampling: temperature 1.0, top-k 40, top-p 0.9 for its own codebooks and its text stream, DSB-IFEval's settings
(App. D.5); the repository's scripts use 0.9, 40, 1.0 (`scripts/inference_eval/inference_nanocodec_special_tokens.sh:
21-23`, `training/inference_example.py:150-152`), which the adapter's arguments reproduce. Draws come from the
agent's own `torch.Generator`, seeded by `reset`: the same input and seed give the same samples. The model's own
codebooks never draw the audio delay id or the end-of-dialogue id after the delay (the
session, not the model, ends an episode). One episode at a time.

Transcript (`transcript`, recorded in rec.json): DSB-IFEval, the one paper that evaluated F-Actor, treated it as
speech-only and transcribed its speech with ASR for the judge (its App. D.3 and D.5), so by default ("asr") the
adapter declares no `text_output` and gives no text, and the scorer transcribes the model channel for PAS, the
conflict judge and READBACK (metrics/ifeval/score.py). "text-stream" records the text head's words instead.

Upstream: written against MaikeZuefle/f-actor@2efa25d5 (`UPSTREAM`); the checkout a load imports is compared with
it and recorded, as is the Hub revision of the weights (`revision`, unpinned: none could be read here). Entry points
checked there (docs/models.md#f-actor-f-actor has the table): `training/inference_example.py:13-47` (the load: the
config fields set before `DSULlama.from_pretrained`, `pad_token_id`, the three `init_or_load_*`),
`training/modeling_dsu.py:12-15` (a config without `num_dsus` is refused), `:25,49-50` (audio vocab = 4032 + 2; the
delay and end ids), `:138-153` (8 audio heads off the last hidden state, the text from the LM head),
`:441-481` (speaker projection, prompt, summed audio + text embeddings), `:573-608` (the sampling filter),
`:754-759` (two delay positions), `training/inference_audio/nano_decode.py:12-36` and
`dsu_preprocessing/nanocodec_preproc.py:241-242` (NanoCodec by name; `encode(audio=, audio_len=)` and
`decode(tokens=, tokens_len=)`, keyword-only as NeMo's `typecheck` demands).

`parts=` takes already built (model, tokenizer, codec, speaker embedding) objects: the tests pass a tiny randomly
initialised model of the same shape and a fake codec written from the public code (tests/fake_f_actor.py); without
it the real ones are loaded.
"""

from __future__ import annotations

import json
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from adapters.model_code import model_code
from adapters.protocol import Frame
from adapters.upstream import Pin, git_head, hf_snapshot_revision, provenance
from dataset_builder.errors import UsageError

DEFAULT_MODEL = "maikezu/f-actor"
DEFAULT_CODEC = "nvidia/nemo-nano-codec-22khz-0.6kbps-12.5fps"
AUDIO_CODES = 4032  # NanoCodec's codebook size; the model's audio vocabulary adds the delay and end ids after it
AUDIO_DELAY = 2  # n_delay_audio_stream of the released checkpoint's inference script
SOS = "<|SOS|>"  # the prompt's last token in training: the dialogue's speech starts after it
SPEAKERS_FILE = "example_speakers/speaker_embeddings.json"  # under the checkout's training/
# The checkpoint's config fields its own inference_example.py sets before from_pretrained.
CONFIG = {"num_dsus": 4, "text_stream": True, "multi_text_stream": False, "audio_vocab_size": AUDIO_CODES,
          "use_speaker_embedding": True, "calc_loss_on_c1_only": False}
MARKERS = (("[BC", "backchannel"), ("[INTER", "interruption"))
# The code this adapter was written against (docs/models.md#f-actor-f-actor). No Hub revision of maikezu/f-actor
# could be read here: `revision=` picks one, and the one a run loaded is recorded.
UPSTREAM: tuple[Pin, ...] = (Pin("git", "MaikeZuefle/f-actor", "2efa25d57ea68bf482866b544a1fc23020df822a"),)
# Who transcribes its speech for the judge and READBACK: the scorer's ASR, as DSB-IFEval did (App. D.3), or its
# own text stream.
TRANSCRIPTS = ("asr", "text-stream")


@dataclass
class FActorParts:
    model: Any  # DSULlama: .model (LlamaModel), .lm_head, .dsu_head, .audio_embeds, .speaker_embed_proj, ...
    tokenizer: Any  # the checkpoint's tokenizer (its text-stream tokens are special tokens)
    codec: Any  # NeMo AudioCodecModel: encode(audio=, audio_len=) and decode(tokens=, tokens_len=)
    speaker: np.ndarray  # the 192-dim speaker embedding of the voice it speaks in
    upstream: list[dict[str, Any]] = field(default_factory=list)  # what a load found against UPSTREAM (none: built)


def _snapshot(model_path: str, revision: str | None) -> str:
    """A local folder as it is, a hub id as its local snapshot at `revision` (None: the newest): F-Actor's loader
    reads the safetensors itself."""
    if Path(model_path).is_dir():
        return model_path
    from huggingface_hub import snapshot_download

    return snapshot_download(model_path, revision=revision)


def upstream_of(checkout: Path, weights: str, model_path: str) -> list[dict[str, Any]]:
    """The checkout's commit against `UPSTREAM` (one log line when it differs) and the weights' revision as found."""
    (repo,) = UPSTREAM
    return [provenance("f-actor", repo, git_head(checkout), f"the F-Actor checkout at {checkout}"),
            {"repo": model_path, "kind": "hf", "pinned": None, "used": hf_snapshot_revision(weights),
             "matches": None}]


def read_speaker(path: Path, speaker: str) -> np.ndarray:
    """One named 192-dim embedding from a JSON object of them (the checkout ships tom, brian, gweneth, rebeka)."""
    try:
        table = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise UsageError(f"f-actor: cannot read speaker embeddings {path}: {err}") from None
    if speaker.lower() not in table:
        raise UsageError(f"f-actor: speaker {speaker!r} is not in {path} (it has {sorted(table)})")
    emb = np.asarray(table[speaker.lower()], np.float32)
    if emb.shape != (192,):
        raise UsageError(f"f-actor: speaker {speaker!r} in {path} has shape {emb.shape}, expected (192,)")
    return emb


def load_parts(model_path: str, codec_path: str, speaker: str, speakers_file: str | None, device: str,
               dtype: str, repo_dir: str | None, revision: str | None = None) -> FActorParts:
    """The real model as F-Actor's inference_example.py loads it, and NanoCodec as its nano_decode.py does."""
    with model_code("f-actor", repo_dir and Path(repo_dir) / "training", "F-Actor's code",
                    "a checkout of github.com/MaikeZuefle/f-actor with its training/ folder on PYTHONPATH or "
                    "repo_dir=DIR, and its requirements (pip install DIR, which brings nemo-toolkit[tts])"):
        import torch
        from modeling_dsu import DSULlama
        from nemo.collections.tts.models import AudioCodecModel
        from transformers import AutoConfig, AutoTokenizer
    import modeling_dsu

    folder = _snapshot(model_path, revision)
    tokenizer = AutoTokenizer.from_pretrained(folder, legacy=False)
    tokenizer.pad_token = tokenizer.eos_token
    config = AutoConfig.from_pretrained(folder)
    for key, value in CONFIG.items():
        setattr(config, key, value)
    model = DSULlama.from_pretrained(folder, config=config, torch_dtype=getattr(torch, dtype)).to(device)
    model.pad_token_id = tokenizer.pad_token_id
    model.init_or_load_speaker_embed_proj(model_path=folder)
    model.init_or_load_audio_heads(model_path=folder)
    model.init_or_load_audio_embeds(model_path=folder)
    model.to(device=device, dtype=getattr(torch, dtype)).eval()
    codec = AudioCodecModel.from_pretrained(codec_path).eval().to(device)
    training = Path(modeling_dsu.__file__).resolve().parent
    table = Path(speakers_file) if speakers_file else training / SPEAKERS_FILE
    return FActorParts(model, tokenizer, codec, read_speaker(table, speaker),
                       upstream_of(training, folder, model_path))


def filtered_probs(logits: Any, temperature: float, top_k: int, top_p: float) -> Any:
    """Each row's distribution as F-Actor's `sample_next_token` makes it: softmax at `temperature`, then only the
    `top_k` most likely (ties kept), then the smallest head of them whose mass passes `top_p`, renormalised."""
    import torch

    probs = torch.softmax(logits / temperature, dim=-1)
    if 0 < top_k < probs.shape[-1]:
        kth = torch.topk(probs, top_k, dim=-1).values[:, -1:]
        probs = torch.where(probs < kth, torch.zeros_like(probs), probs)
    if top_p < 1.0:
        sorted_p, order = torch.sort(probs, descending=True, dim=-1)
        beyond = torch.cumsum(sorted_p, dim=-1) > top_p
        beyond[:, 1:] = beyond[:, :-1].clone()  # keep the token that crosses top_p
        beyond[:, 0] = False
        probs = torch.zeros_like(probs).scatter(-1, order, sorted_p.masked_fill(beyond, 0.0))
    return probs / probs.sum(dim=-1, keepdim=True)


class TextStream:
    """The model's text-stream tokens as words: pads and other special tokens are not words; a backchannel or
    interruption marker becomes a note; the first word after a pause gets the space its training text lacks."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self.special = {int(i) for i in tokenizer.all_special_ids}
        self.reset()

    def reset(self) -> None:
        self.said, self.paused = False, False

    def piece(self, token: int) -> tuple[str | None, str | None]:
        """(text, note) of one token."""
        if token in self.special:
            self.paused = True
            name = str(self.tokenizer.convert_ids_to_tokens(token))
            return None, next((f"{kind} marker {name}" for prefix, kind in MARKERS if name.startswith(prefix)), None)
        text = self.tokenizer.decode([token], skip_special_tokens=True)
        if not text:  # a special token all_special_ids does not list (Llama 3's reserved ones): no word either
            self.paused = True
            return None, None
        if self.said and self.paused and not text[0].isspace():
            text = " " + text
        self.said, self.paused = True, False
        return text, None


class FActorAgent:
    """F-Actor, one NanoCodec frame (80 ms at 22.05 kHz) per step; the user is its partner stream."""

    name = "f-actor"
    version = "f-actor"
    realtime = False
    model_delay_frames = 0  # own frame k and user frame k share a position: see the module docstring

    def __init__(self, model_path: str = DEFAULT_MODEL, codec: str = DEFAULT_CODEC, speaker: str = "brian",
                 speakers_file: str | None = None, device: str | None = None, dtype: str = "float32",
                 repo_dir: str | None = None, temperature: float = 1.0, top_k: int = 40, top_p: float = 0.9,
                 codec_context_frames: int = 8, transcript: str = "asr",
                 prompt_template: str = "{prompt}\n" + SOS, revision: str | None = None,
                 parts: FActorParts | None = None) -> None:
        import torch

        if transcript not in TRANSCRIPTS:
            raise UsageError(f"f-actor: transcript must be one of {list(TRANSCRIPTS)}, got {transcript!r}")
        if "{prompt}" not in prompt_template:
            raise UsageError(f"f-actor: prompt_template must contain {{prompt}}, got {prompt_template!r}")
        if not (temperature > 0 and top_k >= 0 and 0 < top_p <= 1 and codec_context_frames >= 0):
            raise UsageError(f"f-actor: need temperature > 0, top_k >= 0, 0 < top_p <= 1, codec_context_frames >= 0; "
                             f"got {temperature}, {top_k}, {top_p}, {codec_context_frames}")
        device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.parts = parts or load_parts(model_path, codec, speaker, speakers_file, device, dtype, repo_dir,
                                         revision)
        self.version = f"f-actor:{model_path}" if parts is None else f"f-actor:{type(self.parts.model).__name__}"
        self.temperature, self.top_k, self.top_p = float(temperature), int(top_k), float(top_p)
        self.context = int(codec_context_frames)
        self.prompt_template = prompt_template
        self.transcript = transcript
        self.speaker = speaker
        self.sample_rate = int(self.parts.codec.sample_rate)
        self.frame_size = int(self.parts.codec.samples_per_frame)
        words = {"text_output"} if transcript == "text-stream" else set()
        self.capabilities = frozenset({"system_prompt", "teacher_forcing"} | words)
        model = self.parts.model
        self.heads = int(model.num_dsu_heads) // 2  # own codebooks; the partner's follow
        self.delay_id = int(model.audio_delay_id)
        self.device = next(model.parameters()).device
        self.generator = torch.Generator(device=self.device)
        self.text = TextStream(self.parts.tokenizer)
        self.cache: Any = None

    def runtime(self) -> dict[str, Any]:
        """For rec.json: where the judge's transcript comes from, the sampling and prompt settings, and what was
        loaded against `UPSTREAM` (empty for built parts)."""
        return {"transcript": self.transcript, "temperature": self.temperature, "top_k": self.top_k,
                "top_p": self.top_p, "prompt_template": self.prompt_template, "speaker": self.speaker,
                "codec_context_frames": self.context, "upstream": self.parts.upstream}

    # -- one episode ------------------------------------------------------------------------------------------------
    def prompt_text(self, system_prompt: str | None) -> str:
        """What the model reads before the dialogue: the instruction under test, then the speech start marker."""
        return self.prompt_template.format(prompt=system_prompt) if system_prompt else SOS

    def reset(self, system_prompt: str | None, seed: int) -> None:
        import torch
        from transformers import DynamicCache

        self.generator.manual_seed(int(seed))
        self.text.reset()
        self.cache = DynamicCache()
        self.user_ctx: deque[np.ndarray] = deque(maxlen=self.context)
        self.played_ctx: deque[np.ndarray] = deque(maxlen=self.context)  # the model channel, to encode forced audio
        self.own_ctx: deque[torch.Tensor] = deque(maxlen=self.context)  # the own codes played, to decode after
        model, tok = self.parts.model, self.parts.tokenizer
        ids = tok(self.prompt_text(system_prompt), return_tensors="pt").input_ids[0].to(self.device)
        with torch.no_grad():
            spk = torch.as_tensor(self.parts.speaker, device=self.device, dtype=model.dtype)
            embeds = torch.cat([model.speaker_embed_proj(spk)[None], model.get_input_embeddings()(ids)])
            own, text = self._forward(embeds)
            texts = [text]
            delays = torch.full((2 * self.heads,), self.delay_id, dtype=torch.long, device=self.device)
            for _ in range(AUDIO_DELAY):  # the positions before the first audio frame: text only
                own, text = self._forward(self._embed(texts[-1], delays))
                texts.append(text)
        self.queue = deque(texts)  # text tokens k .. k + AUDIO_DELAY at the start of step k
        self.own = own  # own frame k's codes at the start of step k

    def step(self, user_frame: np.ndarray, forced_model_frame: np.ndarray | None = None) -> Frame:
        import torch

        if self.cache is None:
            raise RuntimeError("f-actor: step before reset")
        user = self._frame(user_frame, "user_frame")
        with torch.no_grad():
            if forced_model_frame is not None:
                audio = self._frame(forced_model_frame, "forced_model_frame").copy()
                own = self._encode(self.played_ctx, audio)
            else:
                own = self.own
                audio = self._decode(own)
                self.played_ctx.append(audio)
            self.own_ctx.append(own)
            text, note = self.text.piece(int(self.queue.popleft()))
            partner = self._encode(self.user_ctx, user)
            self.own, nxt = self._forward(self._embed(self.queue[-1], torch.cat([own, partner])))
            self.queue.append(nxt)
        return Frame(audio, text if "text_output" in self.capabilities else None, note)

    def close(self) -> None:
        self.cache = None

    # -- the model -------------------------------------------------------------------------------------------------
    def _embed(self, text: Any, codes: Any) -> Any:
        """One position's input: the text token's embedding plus one embedding per audio codebook."""
        model = self.parts.model
        e = model.get_input_embeddings()(text.view(1))[0]
        for h in range(2 * self.heads):
            e = e + model.audio_embeds[h](codes[h:h + 1])[0]
        return e[None]

    def _forward(self, embeds: Any) -> tuple[Any, Any]:
        """Feed positions (with the cache) and sample, from the last one, the next own codes and text token."""
        model = self.parts.model
        out = model.model(inputs_embeds=embeds[None].to(model.dtype), past_key_values=self.cache, use_cache=True)
        self.cache = out.past_key_values
        hidden = out.last_hidden_state[:, -1]
        audio = model.dsu_head(hidden).view(2 * self.heads, -1)[:self.heads].float()
        audio[:, AUDIO_CODES:] = -float("inf")  # the delay and end ids are not sounds
        text = model.lm_head(hidden)[0].float()
        return self._sample(audio), self._sample(text[None])[0]

    def _sample(self, logits: Any) -> Any:
        """One draw a row from the filtered distribution, from the agent's own seeded generator."""
        import torch

        probs = filtered_probs(logits, self.temperature, self.top_k, self.top_p)
        return torch.multinomial(probs, 1, generator=self.generator).view(-1)

    # -- the codec -------------------------------------------------------------------------------------------------
    def _frame(self, frame: np.ndarray, what: str) -> np.ndarray:
        x = np.asarray(frame, np.float32)
        if x.shape != (self.frame_size,):
            raise ValueError(f"{what} must be [{self.frame_size}], got {x.shape}")
        return x

    def _encode(self, ctx: deque[np.ndarray], frame: np.ndarray) -> Any:
        """The codes of `frame`, encoded after the frames before it in its stream."""
        import torch

        audio = np.concatenate([*ctx, frame])
        ctx.append(frame)
        codec = self.parts.codec
        x = torch.from_numpy(audio).to(self.device)[None]
        tokens, _ = codec.encode(audio=x, audio_len=torch.tensor([len(audio)], device=self.device))
        if tokens.shape[:2] != (1, self.heads):
            raise RuntimeError(f"f-actor: the codec gave codes of shape {tuple(tokens.shape)}; the model has "
                               f"{self.heads} codebooks per stream")
        return tokens[0, :, -1].long().to(self.device)

    def _decode(self, codes: Any) -> np.ndarray:
        """The samples of one own frame, decoded after the own frames before it."""
        import torch

        tokens = torch.stack([*self.own_ctx, codes], dim=-1)[None]
        audio, _ = self.parts.codec.decode(tokens=tokens, tokens_len=torch.tensor([tokens.shape[-1]],
                                                                                  device=self.device))
        return audio[0, -self.frame_size:].float().cpu().numpy().astype(np.float32)

