"""`moshi` and `personaplex`: Kyutai's Moshi and NVIDIA's PersonaPlex through the `moshi` package's streaming loop
(Mimi codec + `LMGen`), one 80 ms frame per step, batch-capable (docs/adding-a-model.md, docs/offline.md,
docs/scale.md).

Per step: the user frame is Mimi-encoded, `LMGen` takes one step, and the model's audio tokens are Mimi-decoded.

The one-frame offset. `LMGen` delays the acoustic codebooks by max(delays) = 1 frame, so the step that is handed
the user's frame t returns the model's tokens for frame t - 1, and in the model's own timeline that user frame is
frame t - 1 as well (moshi's server drops the first frame for this reason: "from the point of view of the model it is
in the past"). The adapter feeds the first frame twice, as moshi's `run_inference` does, so the frame `step(user_t)`
returns is the model's frame t, decoded: the two channels of the recording are aligned as the model saw them and no
user audio is dropped. A naive loop would put every model frame one frame (1920 samples, 80 ms) late;
`model_delay_frames` declares the 1. In a live call the model's frame t can be played only once the user's frame t
has been heard: that is the 80 ms every frame-based model has, not a skew between the channels.

Teacher forcing (M3 Full). The forced model audio is Mimi-encoded (on its own encoder state) and written as the
model's own tokens, each codebook at its delay. The model samples its frame-t semantic token before it hears user
frame t, so forced frame t is needed one step before the protocol hands it over: while forcing, the LM runs one step
behind the stream (the step of frame t consumes user frame t - 1) and catches up with two steps at the first free
frame. Forced frames are returned as they came (the recording shows the context the model was forced with); the
text stream stays the model's own.

Sampling is per slot: every slot draws its own noise from its own `torch.Generator` (seeded by `reset`), and the LM's
sampling is replaced by the same top-k/temperature draw made from that noise (`LMGen` argmaxes one-hot logits), so
a slot's samples do not depend on what the other slots hear. What holds bitwise (measured on CPU, one thread, which
the adapter sets there): at a fixed `batch_size`, a slot gives the same samples in any position and beside any
neighbours, and `step` (slot 0) equals `step_batch`. Across different batch sizes the matrix kernels round
differently (measured: ~1e-7 on the decoded audio), so runs at B=1 and B=4 agree to float precision, not bit for
bit; on a GPU the same is expected of cuBLAS but has not been measured here.

PersonaPlex: a Moshi fine-tune with a text role prompt and an audio voice prompt. `reset` plays NVIDIA's prompt
phases before the episode: the voice prompt as the model's own audio, 0.5 s of silence, the role prompt
("<system> ... <system>") one text token per frame, 0.5 s of silence, with a 440 Hz sine on the user stream. The
released checkpoint's depformer also predicts the user's codebooks (NVIDIA's loader builds it with dep_q=16 and
copies the 8 model steps' weights into the 8 user steps); here the user's tokens are fed as input, as stock
`LMGen` does, so the model steps alone are built (dep_q=8) and load the same weights.

`tiny=True` builds a tiny randomly initialised Mimi + LM (and a character-level tokenizer) from a fixed seed, for
tests and benchmarks; no weights are read.

Presets (`PRESETS`, docs/models.md#the-moshi-family-presets): the Moshi-family checkpoints the papers evaluate,
each a Hugging Face repo in moshi's layout plus the prompt handling it needs. `preset=NAME` (or the registered
adapter of the same name) picks the repo and the agent class; `hf_repo` / `weights_dir` still override the files.
"""

from __future__ import annotations

import copy
import io
import os
import string
import tarfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from adapters.protocol import Frame
from dataset_builder.audio import SESSION_SR, resample
from dataset_builder.errors import UsageError

SAMPLE_RATE = SESSION_SR  # Mimi's rate is the session's
FRAME_SIZE = 1920  # 80 ms: Mimi's 12.5 Hz frame
MOSHI_VERSION = "0.2.13"
TEXT_PAD, TEXT_EPAD = 3, 0  # moshi's text padding tokens: never words
MODEL_CODEBOOKS = 8
DTYPES = ("bfloat16", "float16", "float32")
# PersonaPlex's prompt phases (NVIDIA's offline.py): 0.5 s of silence after each prompt, a 440 Hz sine at half
# amplitude as the user stream, and the role prompt wrapped in <system> tags.
PROMPT_SILENCE_S = 0.5
SINE_HZ, SINE_AMPLITUDE = 440.0, 0.5
VOICE_LUFS = -24.0
# tiny=True: small enough to step in ~10 ms on one CPU core; delays as the 7B (text, 8 model, 8 user codebooks).
TINY_TEXT = string.ascii_lowercase + string.digits + " .,?!'"
TINY_MIMI = {"seanet": {"dimension": 32, "n_filters": 4},
             "transformer": {"d_model": 32, "num_heads": 2, "num_layers": 1, "dim_feedforward": 64,
                             "input_dimension": 32, "output_dimensions": [32]},
             "quantizer": {"dimension": 16, "n_q": 8, "bins": 64, "input_dimension": 32, "output_dimension": 32}}
TINY_LM = {"dim": 64, "num_heads": 4, "num_layers": 2, "hidden_scale": 2, "card": 64, "context": 250,
           "depformer_dim": 32, "depformer_dim_feedforward": 64, "depformer_num_heads": 2, "depformer_num_layers": 1}


@dataclass(frozen=True)
class MoshiPreset:
    """One Moshi-family checkpoint: where its weights are and how it is prompted (docs/models.md)."""

    repo: str  # Hugging Face repo id in moshi's layout (model.safetensors, Mimi, SentencePiece tokenizer)
    language: str  # what it was trained to speak: which benchmark configs it is meant for
    prompts: str  # "none" (no conditioning pathway) or "persona" (PersonaPlex's voice + role prompt)
    note: str


# Repo ids checked against their Hub pages (docs/models.md says how); llm-jp-moshi's could not be.
PRESETS: dict[str, MoshiPreset] = {
    "moshiko": MoshiPreset("kyutai/moshiko-pytorch-bf16", "en", "none", "Kyutai's Moshi, male voice (the default)"),
    "moshika": MoshiPreset("kyutai/moshika-pytorch-bf16", "en", "none", "Kyutai's Moshi, female voice"),
    "j-moshi": MoshiPreset("nu-dialogue/j-moshi-ext", "ja", "none",
                           "J-Moshi (Nagoya University): moshiko fine-tuned on J-CHAT and synthetic dialogues; "
                           "nu-dialogue/j-moshi is the variant without the synthetic data"),
    "llm-jp-moshi": MoshiPreset("llm-jp/llm-jp-moshi-v1", "ja", "none",
                                "LLM-jp-Moshi (NII LLM-jp): Moshi fine-tuned on Japanese dialogue; repo id not "
                                "verified here, pass hf_repo= if it differs"),
    "personaplex": MoshiPreset("nvidia/personaplex-7b-v1", "en", "persona",
                               "NVIDIA PersonaPlex: voice prompt (audio) + role prompt (text); gated repo"),
}


def preset_of(name: str) -> MoshiPreset:
    if name not in PRESETS:
        raise UsageError(f"unknown moshi preset {name!r}; known: {sorted(PRESETS)}")
    return PRESETS[name]


def import_moshi(device: str) -> Any:
    """The `moshi` package's loaders, imported on first use.

    moshi reads NO_TORCH_COMPILE when it is imported. On CPU, compiling costs ~17 s on the first step and gains
    nothing at this size, so it is switched off unless the caller set the variable; on a GPU it is left as set.
    """
    if device.startswith("cpu"):
        os.environ.setdefault("NO_TORCH_COMPILE", "1")
    try:
        from moshi.models import loaders
    except ImportError as err:
        raise UsageError(f"the moshi adapters need the `moshi` package ({err}): pip install -e '.[moshi]' && "
                         f"pip install --no-deps moshi=={MOSHI_VERSION} (or `make setup`)") from None
    return loaders


@dataclass
class Models:
    mimi: Any  # moshi.models.MimiModel
    lm: Any  # moshi.models.LMModel
    tokenizer: Any | None  # sentencepiece.SentencePieceProcessor
    source: str  # where the weights came from, for `version`


def _resolve(loaders: Any, name: str, hf_repo: str | None, weights_dir: str | None, given: str | None) -> Path:
    if given:
        return Path(given)
    if weights_dir:
        path = Path(weights_dir) / name
        if not path.is_file():
            raise UsageError(f"weights_dir {weights_dir} has no {name}")
        return path
    try:
        return loaders.hf_get(name, hf_repo)
    except Exception as err:  # noqa: BLE001 - offline, gated, a wrong id: the user fixes it the same way
        raise UsageError(f"cannot get {name} from the Hugging Face repo {hf_repo} ({type(err).__name__}: {err}); "
                         f"download the repo and pass weights_dir=DIR, or tiny=1 for the tiny random model") from None


def load_pretrained(hf_repo: str, *, weights_dir: str | None = None, moshi_weight: str | None = None,
                    mimi_weight: str | None = None, tokenizer: str | None = None, config_path: str | None = None,
                    device: str = "cpu", dtype: Any = None, use_repo_config: bool = True) -> Models:
    """Mimi + LM + text tokenizer the way moshi's loaders find them: from a Hugging Face repo id, or a local folder
    holding the same files (`weights_dir`), each file overridable. A repo or folder with a config.json names its
    files and LM config there (moshi's `CheckpointInfo`); without one, the Moshi 7B config and file names apply.
    `use_repo_config=False` ignores the repo's config.json (PersonaPlex: its LM is the Moshi 7B one)."""
    loaders = import_moshi(device)
    cfg_path: Path | None = Path(config_path) if config_path else None
    if cfg_path is None and use_repo_config:
        if weights_dir:
            cfg_path = Path(weights_dir) / "config.json" if (Path(weights_dir) / "config.json").is_file() else None
        else:
            try:
                cfg_path = loaders.hf_get("config.json", hf_repo)
            except Exception:  # noqa: BLE001 - a legacy repo without config.json (the Moshi 7B defaults apply),
                cfg_path = None  # or no network: the weights below then say so
    raw: dict[str, Any] = {}
    if cfg_path is not None:
        import json

        raw = json.loads(cfg_path.read_text())
    names = {"moshi": raw.get("moshi_name", loaders.MOSHI_NAME), "mimi": raw.get("mimi_name", loaders.MIMI_NAME),
             "tokenizer": raw.get("tokenizer_name", loaders.TEXT_TOKENIZER_NAME)}
    files = {"moshi_weights": _resolve(loaders, names["moshi"], hf_repo, weights_dir, moshi_weight),
             "mimi_weights": _resolve(loaders, names["mimi"], hf_repo, weights_dir, mimi_weight),
             "tokenizer": _resolve(loaders, names["tokenizer"], hf_repo, weights_dir, tokenizer)}
    if raw.get("mimi_config_name"):
        files["mimi_config_path"] = _resolve(loaders, raw["mimi_config_name"], hf_repo, weights_dir, None)
    if raw.get("lora_name"):
        files["lora_weights"] = _resolve(loaders, raw["lora_name"], hf_repo, weights_dir, None)
    if cfg_path is not None:
        # Every file is given as a path and so is the config: CheckpointInfo downloads nothing more.
        info = loaders.CheckpointInfo.from_hf_repo(hf_repo or "local", config_path=cfg_path, **files)
    else:
        info = loaders.CheckpointInfo(files["moshi_weights"], files["mimi_weights"], files["tokenizer"])
    if info.model_type != "moshi":
        raise UsageError(f"{hf_repo or weights_dir} holds a {info.model_type!r} model, not a duplex moshi one")
    mimi = info.get_mimi(device=device)
    lm = info.get_moshi(device=device, dtype=dtype)
    return Models(mimi, lm, info.get_text_tokenizer(), str(weights_dir or hf_repo))


def build_tiny(device: str = "cpu", seed: int = 0) -> Models:
    """A tiny randomly initialised Mimi + LM and a character tokenizer, the same for the same seed."""
    loaders = import_moshi(device)
    import sentencepiece
    import torch

    model = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter([TINY_TEXT]), model_writer=model, model_type="char", vocab_size=len(TINY_TEXT) + 4,
        unk_id=0, bos_id=1, eos_id=2, pad_id=TEXT_PAD, character_coverage=1.0, minloglevel=2)
    tokenizer = sentencepiece.SentencePieceProcessor(model_proto=model.getvalue())
    base = loaders._mimi_config
    mimi_cfg = dict(base, **{part: dict(base[part], **TINY_MIMI[part]) for part in TINY_MIMI})
    lm_cfg = dict(loaders._lm_kwargs, **TINY_LM, text_card=tokenizer.get_piece_size())
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        mimi = loaders.get_mimi(None, mimi_cfg, device=device, num_codebooks=MODEL_CODEBOOKS)
        _calibrate_codebooks(mimi)
        lm = loaders.get_moshi_lm(None, lm_cfg, device=device, dtype=torch.float32)
    return Models(mimi, lm, tokenizer, f"tiny(seed={seed})")


def _calibrate_codebooks(mimi: Any) -> None:
    """Random codebooks spread like the random encoder's latents (an untrained quantizer's are all zero, and
    unit-variance ones would sit far from latents of ~0.03 and give every input the same codes): each residual
    layer draws its centroids from the mean and spread of its own input on random audio."""
    import torch

    audio = torch.randn(4, 1, FRAME_SIZE * 8) * 0.1
    with torch.no_grad():
        latent = mimi._encode_to_unquantized_latent(audio)
        for rvq in (mimi.quantizer.rvq_first, mimi.quantizer.rvq_rest):
            x = rvq.input_proj(latent).transpose(1, 2).reshape(-1, rvq.dimension)
            for layer in rvq.vq.layers:
                book = layer._codebook
                book.embedding_sum.copy_(x.mean(0) + x.std(0) * torch.randn_like(book.embedding_sum))
                book.cluster_usage.fill_(1.0)
                book._initialized.fill_(1.0)
                book._embedding = None
                x = x - book.decode(book.encode(x))


def _dtype(name: str | None, device: str) -> Any:
    import torch

    if name is None:
        name = "float32" if device.startswith("cpu") else "bfloat16"
    if name not in DTYPES:
        raise UsageError(f"dtype must be one of {DTYPES}, got {name!r}")
    return getattr(torch, name)


@dataclass
class _Slot:
    """One episode's bookkeeping on the LM's timeline (index = frame; the episode's frame a is `base + a`)."""

    generator: Any
    base: int = 0  # prompt frames before the episode (PersonaPlex)
    frames: int = 0  # episode frames stepped
    steps: int = 0  # LM steps taken: step i consumes the user's frame i - 1 and samples the model's frame i
    user: dict[int, Any] = field(default_factory=dict)  # frame -> user codes [8]
    model: dict[int, Any] = field(default_factory=dict)  # frame -> forced model codes [8]
    text: dict[int, int] = field(default_factory=dict)  # frame -> forced text token

    def forget_before(self, frame: int) -> None:
        for table in (self.user, self.model, self.text):
            for k in [k for k in table if k < frame]:
                del table[k]


class MoshiAgent:
    """Moshi through `moshi.models.LMGen`; also a BatchedDuplexAgent (`batch_size` episodes in lockstep)."""

    name = "moshi"
    sample_rate = SAMPLE_RATE
    frame_size = FRAME_SIZE
    realtime = False
    default_preset = "moshiko"

    def __new__(cls, *args: Any, preset: str | None = None, **kwargs: Any) -> MoshiAgent:
        # `--adapter moshi --adapter-arg preset=personaplex` must build the agent that plays PersonaPlex's prompts:
        # a preset with prompts picks its subclass (Python then runs that class's __init__).
        if preset is not None and cls is MoshiAgent and preset_of(preset).prompts == "persona":
            cls = PersonaPlexAgent
        return super().__new__(cls)

    def __init__(self, hf_repo: str | None = None, weights_dir: str | None = None, moshi_weight: str | None = None,
                 mimi_weight: str | None = None, tokenizer: str | None = None, config_path: str | None = None,
                 device: str | None = None, dtype: str | None = None, batch_size: int = 1, temp: float = 0.8,
                 temp_text: float = 0.7, top_k: int = 250, top_k_text: int = 25, tiny: bool = False,
                 tiny_seed: int = 0, preset: str | None = None) -> None:
        import torch

        self.preset = preset or self.default_preset
        spec = preset_of(self.preset)
        if (spec.prompts == "persona") != isinstance(self, PersonaPlexAgent):
            fix = "--adapter personaplex" if spec.prompts == "persona" else f"--adapter {self.preset}"
            raise UsageError(f"{type(self).__name__} cannot run preset {self.preset!r} "
                             f"(prompts: {spec.prompts}): use {fix}")
        if preset is not None:  # runs are labelled with the checkpoint they ran
            self.name = self.preset
        self.language = spec.language  # the configs it is meant for (Japanese: M3's *_ja)
        self.default_repo = spec.repo

        if device is None:
            device = "cuda" if torch.cuda.is_available() and not tiny else "cpu"
        if int(batch_size) < 1:
            raise UsageError(f"batch_size must be >= 1, got {batch_size}")
        self.device, self.batch_size = device, int(batch_size)
        if device.startswith("cpu"):
            # With several threads a CPU matrix product splits the batch rows between them and rounds a tail row
            # differently, so a slot's samples would depend on its position (measured: 7e-8 on slot 2 of 3). One
            # thread keeps slots bitwise independent; silero-vad sets the same at import, so runs are so already.
            torch.set_num_threads(1)
        if tiny:
            models = build_tiny(device, int(tiny_seed))
        else:
            models = load_pretrained(hf_repo or self.default_repo, weights_dir=weights_dir,
                                     moshi_weight=moshi_weight, mimi_weight=mimi_weight, tokenizer=tokenizer,
                                     config_path=config_path, device=device, dtype=_dtype(dtype, device),
                                     use_repo_config=spec.prompts != "persona")
        self.version = f"moshi-{MOSHI_VERSION}:{models.source}"
        self.tokenizer = models.tokenizer
        self.capabilities = frozenset({"teacher_forcing"} | ({"text_output"} if self.tokenizer else set()))
        self.temp, self.temp_text = float(temp), float(temp_text)
        self._top_k_audio, self._top_k_text = int(top_k), int(top_k_text)
        self._setup(models)

    # --- model plumbing ---------------------------------------------------------------------------------------

    def _setup(self, models: Models) -> None:
        import torch
        from moshi.models import LMGen

        lm, B = models.lm, self.batch_size
        if lm.dep_q != MODEL_CODEBOOKS or lm.n_q != 2 * MODEL_CODEBOOKS:
            raise UsageError(f"expected a duplex LM with {MODEL_CODEBOOKS} model and {MODEL_CODEBOOKS} user "
                             f"codebooks, got n_q={lm.n_q}, dep_q={lm.dep_q}")
        self.mimi = models.mimi
        self.forced_mimi = copy.deepcopy(models.mimi)  # its own encoder state for teacher-forced audio
        self.delays = [int(d) for d in lm.delays]
        self.model_delay_frames = max(self.delays)  # declared: see the module docstring
        self._prompt_codes(models)
        # Per-slot sampling and forcing go through these buffers (fixed addresses, so CUDA graphs may replay).
        dev = lm.device
        self._k_audio = min(self._top_k_audio, lm.card)
        self._k_text = min(self._top_k_text, lm.text_card)
        self._noise_audio = torch.ones(B, MODEL_CODEBOOKS, self._k_audio, device=dev)
        self._noise_text = torch.ones(B, self._k_text, device=dev)
        self._force_audio = torch.zeros(B, MODEL_CODEBOOKS, dtype=torch.long, device=dev)
        self._force_audio_mask = torch.zeros(B, MODEL_CODEBOOKS, dtype=torch.bool, device=dev)
        self._force_text = torch.zeros(B, dtype=torch.long, device=dev)
        self._force_text_mask = torch.zeros(B, dtype=torch.bool, device=dev)
        depformer = lm.forward_depformer

        def sampled_depformer(cb: int, sequence: Any, transformer_out: Any) -> Any:
            logits = depformer(cb, sequence, transformer_out)
            token = self._pick(logits[:, 0, 0].float(), self.temp, self._noise_audio[:, cb])
            token = torch.where(self._force_audio_mask[:, cb], self._force_audio[:, cb], token)
            return _one_hot_(logits, token)

        # moshi 0.2.13 samples with the global RNG over the whole batch and forces model tokens for all slots at
        # once; this instance hook makes both per slot (LMGen then argmaxes the one-hot logits it returns).
        lm.forward_depformer = sampled_depformer
        self.lm_gen = LMGen(lm, use_sampling=False, support_out_of_sync=True, on_text_logits_hook=self._text_hook)
        self.mimi.streaming_forever(B)
        self.forced_mimi.streaming_forever(B)
        self.lm_gen.streaming_forever(B)
        self._slots = [_Slot(torch.Generator(device=dev)) for _ in range(B)]
        self._active = np.zeros(B, bool)
        self._all = torch.ones(B, dtype=torch.bool, device=dev)

    def _prompt_codes(self, models: Models) -> None:
        """Codes PersonaPlex's prompt phases need (the base model needs none)."""

    def _pick(self, logits: Any, temp: float, noise: Any) -> Any:
        """moshi's top-k / temperature sampling (an exponential race over the top-k probabilities), from noise a
        slot drew itself; temp <= 0 is greedy."""
        if temp <= 0:
            return logits.argmax(-1)
        import torch

        top, index = torch.softmax(logits / temp, dim=-1).topk(noise.shape[-1], dim=-1)
        return index.gather(-1, (top / noise).argmax(-1, keepdim=True))[:, 0]

    def _text_hook(self, text_logits: Any) -> None:
        import torch

        token = self._pick(text_logits[:, 0, 0].float(), self.temp_text, self._noise_text)
        token = torch.where(self._force_text_mask, self._force_text, token)
        _one_hot_(text_logits, token)

    def _encode(self, mimi: Any, audio: np.ndarray, mask: np.ndarray | None = None) -> Any:
        """Mimi codes [B, 8] of one frame per slot; slots off `mask` keep their encoder state."""
        import torch

        x = torch.from_numpy(np.ascontiguousarray(audio, np.float32)).to(self.mimi_device)[:, None, :]
        if mask is not None:
            mimi.set_exec_mask(torch.from_numpy(mask).to(self.mimi_device))
        try:
            with torch.no_grad():
                return mimi.encode(x)[:, :, 0]
        finally:
            if mask is not None:
                mimi.set_exec_mask(self._all.to(self.mimi_device))

    @property
    def mimi_device(self) -> Any:
        return next(self.mimi.parameters()).device

    # --- the LM's timeline ------------------------------------------------------------------------------------

    def _lm_steps(self, needs: np.ndarray) -> dict[int, tuple[Any, int]]:
        """Take needs[s] LM steps for each slot s (all slots step together, masked); the model frames produced on
        or after each slot's episode start are decoded. Returns slot -> (audio [1920] tensor, text token) of the
        last frame decoded for it."""
        import torch

        B, dev = self.batch_size, self._all.device
        out: dict[int, tuple[Any, int]] = {}
        needs = needs.copy()
        codes_in = torch.zeros(B, MODEL_CODEBOOKS, 1, dtype=torch.long, device=dev)
        while needs.any():
            run = needs > 0
            self._force_audio_mask.zero_()
            self._force_text_mask.zero_()
            for s in np.flatnonzero(run):
                slot, i = self._slots[s], self._slots[s].steps
                user = slot.user.get(i - 1, slot.user.get(i))
                codes_in[s, :, 0] = user
                for k in range(MODEL_CODEBOOKS):
                    forced = slot.model.get(i - self.delays[1 + k])
                    if forced is not None:
                        self._force_audio[s, k] = forced[k]
                        self._force_audio_mask[s, k] = True
                if i in slot.text:
                    self._force_text[s] = slot.text[i]
                    self._force_text_mask[s] = True
                noise = torch.empty(MODEL_CODEBOOKS * self._k_audio + self._k_text, device=dev)
                noise.exponential_(generator=slot.generator)
                self._noise_audio[s] = noise[:-self._k_text].view(MODEL_CODEBOOKS, self._k_audio)
                self._noise_text[s] = noise[-self._k_text:]
            mask = torch.from_numpy(run).to(dev)
            self.lm_gen.set_exec_mask(mask)
            with torch.no_grad():
                tokens = self.lm_gen.step(codes_in)
            decode = np.zeros(B, bool)
            for s in np.flatnonzero(run):
                slot = self._slots[s]
                slot.steps += 1
                decode[s] = slot.steps - 2 >= slot.base  # step i returns the model's frame i - 1
            if decode.any():
                self.mimi.set_exec_mask(torch.from_numpy(decode).to(self.mimi_device))
                with torch.no_grad():
                    pcm = self.mimi.decode(tokens[:, 1:].clamp(min=0).to(self.mimi_device))
                for s in np.flatnonzero(decode):
                    out[s] = (pcm[s, 0], int(tokens[s, 0, 0]))
            needs -= run
        self.lm_gen.set_exec_mask(self._all)
        self.mimi.set_exec_mask(self._all.to(self.mimi_device))
        return out

    # --- the protocol ---------------------------------------------------------------------------------------

    def reset_slot(self, slot: int, system_prompt: str | None, seed: int) -> None:
        import torch

        mask = np.zeros(self.batch_size, bool)
        mask[slot] = True
        for module in (self.mimi, self.forced_mimi):
            module.reset_streaming(torch.from_numpy(mask).to(self.mimi_device))
        self.lm_gen.reset_streaming(torch.from_numpy(mask).to(self._all.device))
        state = self._slots[slot]
        state.generator.manual_seed(int(seed))
        fresh = _Slot(state.generator)
        self._slots[slot] = fresh
        self._active[slot] = True
        prompt = self._prompt_frames(system_prompt)
        if prompt:
            for i, (user, model, text) in enumerate(prompt):
                fresh.user[i], fresh.model[i] = user, model
                if text is not None:
                    fresh.text[i] = text
            fresh.base = len(prompt)
            needs = np.zeros(self.batch_size, int)
            needs[slot] = len(prompt)
            self._lm_steps(needs)
            fresh.forget_before(fresh.base - 1)

    def _prompt_frames(self, system_prompt: str | None) -> list[tuple[Any, Any, int | None]]:
        """(user codes, model codes, text token or None) per prompt frame; Moshi takes no prompt."""
        return []

    def step_batch(self, user_frames: np.ndarray, forced: np.ndarray | None = None,
                   forced_mask: np.ndarray | None = None) -> list[Frame]:
        B, n = self.batch_size, self.frame_size
        user_frames = np.asarray(user_frames, np.float32)
        if user_frames.shape != (B, n):
            raise ValueError(f"user_frames must be [{B}, {n}], got {user_frames.shape}")
        if forced is not None:
            forced = np.asarray(forced, np.float32)
            if forced.shape != (B, n):
                raise ValueError(f"forced must be [{B}, {n}], got {forced.shape}")
        is_forced = np.zeros(B, bool) if forced is None else (
            np.ones(B, bool) if forced_mask is None else np.asarray(forced_mask, bool).copy())
        user_codes = self._encode(self.mimi, user_frames)
        forced_codes = self._encode(self.forced_mimi, forced, is_forced) if is_forced.any() else None
        needs = np.zeros(B, int)
        for s, slot in enumerate(self._slots):
            t = slot.base + slot.frames
            slot.user[t] = user_codes[s].to(self._all.device)
            if is_forced[s]:
                assert forced_codes is not None
                slot.model[t] = forced_codes[s].to(self._all.device)
            # Forced: the LM stays a step behind (frame t's semantic token is sampled at step t); free: it has
            # sampled frame t + 1's and returns frame t.
            needs[s] = max(0, t + (1 if is_forced[s] else 2) - slot.steps)
        decoded = self._lm_steps(needs)
        frames = []
        for s, slot in enumerate(self._slots):
            slot.frames += 1
            slot.forget_before(slot.base + slot.frames - 2)
            if is_forced[s]:
                assert forced is not None
                frames.append(Frame(forced[s].copy()))
                continue
            pcm, token = decoded[s]
            frames.append(Frame(pcm.float().cpu().numpy().astype(np.float32), self._text(token)))
        return frames

    def plant_tokens(self, frame: int, codes: Any, slot: int = 0) -> None:
        """Make the model's own audio tokens of episode frame `frame` (not yet stepped) these 8 Mimi codes, as
        teacher forcing does at the token level; the frame is still decoded and returned as the model's."""
        import torch

        state = self._slots[slot]
        if frame < state.frames:
            raise ValueError(f"frame {frame} of slot {slot} has already been stepped")
        state.model[state.base + frame] = torch.as_tensor(codes, dtype=torch.long, device=self._all.device)

    def _text(self, token: int) -> str | None:
        tok = self.tokenizer
        if tok is None or token in (TEXT_PAD, TEXT_EPAD) or tok.is_control(token) or tok.is_unknown(token):
            return None
        return str(tok.id_to_piece(token)).replace("\u2581", " ") or None

    def reset(self, system_prompt: str | None, seed: int) -> None:
        self.reset_slot(0, system_prompt, seed)

    def step(self, user_frame: np.ndarray, forced_model_frame: np.ndarray | None = None) -> Frame:
        """A batch of one: slot 0 (the other slots, if any, hear silence)."""
        users = np.zeros((self.batch_size, self.frame_size), np.float32)
        users[0] = user_frame
        forced = mask = None
        if forced_model_frame is not None:
            forced = np.zeros_like(users)
            forced[0] = forced_model_frame
            mask = np.arange(self.batch_size) == 0
        return self.step_batch(users, forced, mask)[0]

    def close(self) -> None:
        self._slots = []


def _one_hot_(logits: Any, token: Any) -> Any:
    """Logits that argmax to `token` (one per row), written in place."""
    logits.fill_(float("-inf"))
    logits.scatter_(-1, token.view(*token.shape, *([1] * (logits.dim() - 1))), 0.0)
    return logits


class PersonaPlexAgent(MoshiAgent):
    """NVIDIA PersonaPlex: Moshi with a text role prompt (the system prompt) and an audio voice prompt.

    `voice_prompt` is an audio file of the voice to speak in, or a preset name (NATF0..3, NATM0..3, VARF0..4,
    VARM0..4) looked up as `voices/<name>.wav` in the repo's voices.tgz. NVIDIA's precomputed `.pt` voice
    embeddings replay input embeddings through its own LMGen fork and are not read here: give the clip instead.
    """

    name = "personaplex"
    default_preset = "personaplex"

    def __init__(self, voice_prompt: str | None = "NATF2", voice_dir: str | None = None, **kwargs: Any) -> None:
        self.voice_prompt = None if kwargs.get("tiny") and voice_prompt == "NATF2" else voice_prompt
        self.voice_dir = voice_dir
        self._hf_repo = kwargs.get("hf_repo") or PRESETS[self.default_preset].repo
        super().__init__(**kwargs)
        self.capabilities = self.capabilities | {"system_prompt"}

    def _voice_file(self) -> Path:
        assert self.voice_prompt is not None
        path = Path(self.voice_prompt)
        if path.suffix:
            if path.suffix == ".pt":
                raise UsageError(f"voice_prompt {path}: precomputed PersonaPlex embeddings (.pt) need NVIDIA's "
                                 f"LMGen fork; pass an audio clip of the voice (.wav)")
            if not path.is_file():
                raise UsageError(f"voice_prompt {path} does not exist")
            return path
        folder = Path(self.voice_dir) if self.voice_dir else self._voices_from_repo()
        clip = folder / f"{self.voice_prompt}.wav"
        if not clip.is_file():
            raise UsageError(f"no {clip.name} in {folder} (presets there: "
                             f"{sorted(p.stem for p in folder.glob('*.*'))}); pass voice_prompt=PATH.wav")
        return clip

    def _voices_from_repo(self) -> Path:
        loaders = import_moshi(self.device)
        archive = loaders.hf_get("voices.tgz", self._hf_repo)
        folder = archive.parent / "voices"
        if not folder.is_dir():
            with tarfile.open(archive, "r:gz") as tar:
                tar.extractall(archive.parent, filter="data")
        return folder

    def _prompt_codes(self, models: Models) -> None:
        import torch

        n = self.frame_size
        sine = (SINE_AMPLITUDE * np.sin(2 * np.pi * SINE_HZ * np.arange(n) / SAMPLE_RATE)).astype(np.float32)
        clips = [np.zeros(n, np.float32), sine]
        voice = self._load_voice() if self.voice_prompt else np.zeros(0, np.float32)
        dev = models.lm.device
        with torch.no_grad():
            silence_code, sine_code = (self._encode_alone(models.mimi, c)[0] for c in clips)
            voice_codes = self._encode_alone(models.mimi, voice) if len(voice) else []
        self._silence_code, self._sine_code = silence_code.to(dev), sine_code.to(dev)
        self._voice_codes = [c.to(dev) for c in voice_codes]

    def _encode_alone(self, mimi: Any, audio: np.ndarray) -> list[Any]:
        """Codes of each frame of `audio` (zero-padded to whole frames), from a fresh encoder state."""
        import torch

        n = self.frame_size
        audio = np.concatenate([audio, np.zeros(-len(audio) % n, np.float32)])
        x = torch.from_numpy(audio).to(next(mimi.parameters()).device)
        with mimi.streaming(1):
            return [mimi.encode(x[k:k + n].view(1, 1, n))[0, :, 0] for k in range(0, len(audio), n)]

    def _load_voice(self) -> np.ndarray:
        import soundfile

        path = self._voice_file()
        audio, sr = soundfile.read(str(path), dtype="float32", always_2d=True)
        audio = resample(audio[:, 0], sr, SAMPLE_RATE)
        try:  # NVIDIA normalises the voice prompt to -24 LUFS
            import pyloudnorm

            loudness = pyloudnorm.Meter(SAMPLE_RATE).integrated_loudness(audio)
            if np.isfinite(loudness):
                audio = pyloudnorm.normalize.loudness(audio, loudness, VOICE_LUFS).astype(np.float32)
        except ImportError:
            pass
        return np.asarray(audio, np.float32)

    def _prompt_frames(self, system_prompt: str | None) -> list[tuple[Any, Any, int | None]]:
        silence = [(self._sine_code, self._silence_code, TEXT_PAD)] * int(PROMPT_SILENCE_S * SAMPLE_RATE
                                                                         / self.frame_size)
        frames = [(self._sine_code, code, TEXT_PAD) for code in self._voice_codes] + silence
        text = (system_prompt or "").strip()
        if text:
            if not (text.startswith("<system>") and text.endswith("<system>")):
                text = f"<system> {text} <system>"
            assert self.tokenizer is not None
            frames += [(self._sine_code, self._silence_code, int(t)) for t in self.tokenizer.encode(text)]
            frames += silence
        return frames


# One registered adapter per Moshi-family preset (adapters/registry.py), so `--adapter j-moshi` works like
# `--adapter moshi --adapter-arg preset=j-moshi`.
class MoshikoAgent(MoshiAgent):
    name = default_preset = "moshiko"


class MoshikaAgent(MoshiAgent):
    name = default_preset = "moshika"


class JMoshiAgent(MoshiAgent):
    name = default_preset = "j-moshi"


class LLMJpMoshiAgent(MoshiAgent):
    name = default_preset = "llm-jp-moshi"
