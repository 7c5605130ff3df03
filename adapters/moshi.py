"""`moshi` and `personaplex`: Kyutai's Moshi and NVIDIA's PersonaPlex through the `moshi` package's streaming loop
(Mimi codec + `LMGen`), one 80 ms frame per step, batch-capable (docs/adding-a-model.md, docs/offline.md,
docs/scale.md).

Per step: the user frame is Mimi-encoded, `LMGen` takes one step, and the model's audio tokens are Mimi-decoded.

Timing (docs/adding-a-model.md, one timing rule). The LM step that consumes the user's frame t samples the acoustic
codebooks of the model's frame t (`LMGen` delays them by max(delays) = 1 frame; kyutai lm.py `_step` at e6a55d27
reads the user tokens it has just written), so the decoded model frame t depends on user frame t. Kyutai's offline
loop (`run_inference.py` 164-190: the first frame fed twice, then pcm k for user frame k) records it beside user
frame t; a live listener hears it only once frame t has been said. `alignment` picks the clock:
- "live" (the default): `step(user_t)` returns the model's frame t - 1 (slot 0 is silence), so what the model says
  after hearing frame t is heard from frame t + 1 on. This is also NVIDIA's PersonaPlex `offline.py` alignment (its
  LMGen infers at offset - 1 while the user frame is written at offset, fork lm.py 798-801, and offline.py 267-284
  writes the frame each step returns: its output k depends on user frames before k).
- "run_inference": Kyutai's offline alignment, model frame t beside user frame t (one frame earlier than any live
  path); kept to reproduce recordings made with `moshi.run_inference`.
Either way the first user frame is fed twice, as `run_inference` does, so none is dropped; `model_delay_frames`
declares the codec's 1 and rec.json records the alignment (`adapter.runtime`).

Teacher forcing (M3 Full). The forced model audio is Mimi-encoded (on its own encoder state) and written as the
model's own tokens of the same frame as the user's, each codebook at its delay (the reference dialogue's two
channels were recorded side by side). The model samples its frame-t semantic token before it hears user frame t, so
forced frame t is needed one step before the protocol hands it over: while forcing, the LM runs one step behind the
stream (the step of frame t consumes user frame t - 1); under "live" it always does, under "run_inference" it catches
up with two steps at the first free frame. Forced frames are returned as they came (the recording shows the context
the model was forced with); under "live" the first free frame would replay the last forced one and is silence
instead; the text stream stays the model's own.

Sampling is per slot: every slot draws its own noise from its own `torch.Generator` (seeded by `reset`), and the LM's
sampling is replaced by the same top-k/temperature draw made from that noise (`LMGen` argmaxes one-hot logits), so
a slot's samples do not depend on what the other slots hear. What holds bitwise (measured on CPU, one thread, which
the adapter sets there): at a fixed `batch_size`, a slot gives the same samples in any position and beside any
neighbours, and `step` (slot 0) equals `step_batch`. Across different batch sizes the matrix kernels round
differently (measured: ~1e-7 on the decoded audio), so runs at B=1 and B=4 agree to float precision, not bit for
bit; on a GPU the same is expected of cuBLAS but has not been measured here.

PersonaPlex (NVIDIA/personaplex@3428dfd9, its moshi fork): a Moshi fine-tune with a text role prompt and an audio
voice prompt. `reset` plays NVIDIA's prompt phases before the episode, as `LMGen.step_system_prompts` does (fork
lm.py 1123-1127): the voice prompt as the model's own audio with PAD text (1010-1020), 0.5 s of silence (1074-1083),
the role prompt ("<system> ... <system>", server.py 79-86) one text token per frame (1096-1103), 0.5 s of silence;
the user stream is a 440 Hz sine throughout. The silence and sine frames are NVIDIA's fixed Mimi codes
(`SILENCE_TOKENS`, `SINE_TOKENS`, lm.py 56-57, 985-997), not a freshly encoded frame (the tiny model's 64-entry
codebooks cannot hold them, so it encodes its own). NVIDIA's code never runs without a role prompt (offline.py and
the server turn "" into None and then iterate it, lm.py 1097): a case without one gets `default_role_prompt`
(NVIDIA's default, offline.py 335 and the web client's "Assistant (default)"); the prompt used is recorded.

The released checkpoint and the 16-step depformer: NVIDIA's loader (fork loaders.py 166-260) builds the LM with
dep_q=16 on the meta device, copies the model steps 0..7 into the user steps 8..15 where the file lacks them, and
loads non-strictly. The depformer runs its steps in order and the user steps come after the model's, whose tokens
are then replaced by the user's own (lm.py 1143-1163): the model's tokens depend on steps 0..7 alone. So here the
model steps alone are built (dep_q=8, stock `LMGen`) and `model_steps_only` maps either layout of the file onto them
(8-step keys as they are; 16-step keys cut to steps 0..7), loaded strictly, so any other mismatch still fails.

Voice prompts: `voice_prompt` is an audio clip, or a preset name (NATF0..3, NATM0..3, VARF0..4, VARM0..4) looked up
as `<name>.wav` in `voice_dir` or the repo's voices.tgz. NVIDIA's presets are `.pt` files (the web client's list,
Queue.tsx 11-16; README "Voices": pre-packaged embeddings) that replay input embeddings and a cache through the fork's
`LMGen.step_embeddings` (lm.py 853-873, 1031-1039), which stock `LMGen` lacks; NVIDIA's server and offline.py take
a clip as well (server.py 164-169, lm.py 960-975), encoded and normalised to -24 LUFS as here. A preset that exists
only as `.pt` is refused at construction with that reason: pass the clip.

`tiny=True` builds a tiny randomly initialised Mimi + LM (and a character-level tokenizer) from a fixed seed, for
tests and benchmarks; no weights are read.

Presets (`PRESETS`, docs/models.md#the-moshi-family-presets): the Moshi-family checkpoints the papers evaluate,
each a Hugging Face repo in moshi's layout plus the prompt handling it needs. `preset=NAME` (or the registered
adapter of the same name) picks the repo and the agent class; `hf_repo` / `weights_dir` still override the files.
Sampling: an adapter-arg (`temp`, `temp_text`, `top_k`, `top_k_text`), else the checkpoint's config.json
`lm_gen_config`, which Kyutai's server and `run_inference` pass to `LMGen` (server.py 237, run_inference.py 300), else
LMGen's defaults (0.8, 0.7, 250, 25: lm.py 557-567, also DSB-IFEval's harness for Moshi, its App. D.5); rec.json
records each value and where it came from (`sampling_source`), and a setting of `lm_gen_config` this adapter cannot
apply (`cfg_coef`, ...) is said in one line.
`revision=` loads a Hub revision (default: the newest); rec.json records the snapshot revision that was loaded and
the `moshi` release against its pin (`UPSTREAM`). Every preset greets first, so M3's None and User contexts get the
5 s lead-in silence the M3 authors prepend (`greets_first`; M3-DuplexBench section V-A, footnote 2).
"""

from __future__ import annotations

import copy
import io
import logging
import os
import re
import string
import tarfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from adapters.protocol import Frame
from adapters.upstream import Pin, hf_snapshot_revision, provenance
from dataset_builder.audio import SESSION_SR, resample
from dataset_builder.errors import UsageError

log = logging.getLogger(__name__)

SAMPLE_RATE = SESSION_SR  # Mimi's rate is the session's
FRAME_SIZE = 1920  # 80 ms: Mimi's 12.5 Hz frame
MOSHI_VERSION = "0.2.13"
# What this adapter was written against: the `moshi` release it imports (= kyutai-labs/moshi e6a55d27's
# moshi/moshi, __version__ 0.2.13) and, for PersonaPlex, NVIDIA's fork whose prompt phases and loader it follows.
# No Hub revision is pinned (none could be read from here): the revision a run loaded is recorded instead.
UPSTREAM: tuple[Pin, ...] = (Pin("pypi", "moshi", MOSHI_VERSION),
                             Pin("git", "kyutai-labs/moshi", "e6a55d2722a65870ef52a6c9f6ecfc0e90f38362"))
PERSONAPLEX_UPSTREAM = Pin("git", "NVIDIA/personaplex", "3428dfd95309a7f3c84fd93259ded0f810d1ff91")
ALIGNMENTS = ("live", "run_inference")  # see the module docstring
TEXT_PAD, TEXT_EPAD = 3, 0  # moshi's text padding tokens: never words
MODEL_CODEBOOKS = 8
DTYPES = ("bfloat16", "float16", "float32")
# LMGen's sampling defaults (kyutai lm.py 557-567), which a checkpoint's config.json `lm_gen_config` overrides in
# Kyutai's own tools (server.py 237, run_inference.py 300: `LMGen(lm, **checkpoint_info.lm_gen_config)`).
LMGEN_SAMPLING = {"temp": 0.8, "temp_text": 0.7, "top_k": 250, "top_k_text": 25}
# PersonaPlex's prompt phases (NVIDIA's fork lm.py): 0.5 s of silence after each prompt (server.py 107), NVIDIA's
# fixed Mimi codes of a silent model frame and of the 440 Hz sine the user stream carries (lm.py 56-57), the role
# prompt wrapped in <system> tags, and the role prompt NVIDIA's tools default to (offline.py 335, web client).
PROMPT_SILENCE_S = 0.5
SILENCE_TOKENS = (948, 243, 1178, 546, 1736, 1030, 1978, 2008)
SINE_TOKENS = (430, 1268, 381, 1611, 1095, 1495, 56, 472)
SINE_HZ, SINE_AMPLITUDE = 440.0, 0.5  # the tiny model's own sine frame (lm.py 102-107 create_sinewave)
VOICE_LUFS = -24.0
DEFAULT_ROLE_PROMPT = ("You are a wise and friendly teacher. Answer questions or provide advice in a clear and "
                       "engaging way.")
# DSB-IFEval's harness sampled PersonaPlex's text at 0.8 (its appendix D.5; audio 0.8, top-k 250/25 as moshi's
# defaults); the only published harness setting for it, so PersonaPlex's default (NVIDIA's tools use 0.7).
PERSONAPLEX_TEMP_TEXT = 0.8
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
    revision: str | None = None  # the Hub snapshot revision the LM weights were read from (None: not a Hub snapshot)
    lm_gen_config: dict[str, Any] = field(default_factory=dict)  # the checkpoint's LMGen settings (config.json)


def _resolve(loaders: Any, name: str, hf_repo: str | None, weights_dir: str | None, given: str | None,
             revision: str | None = None) -> Path:
    if given:
        return Path(given)
    if weights_dir:
        path = Path(weights_dir) / name
        if not path.is_file():
            raise UsageError(f"weights_dir {weights_dir} has no {name}")
        return path
    try:
        return loaders.hf_get(name, hf_repo, revision=revision)
    except Exception as err:  # noqa: BLE001 - offline, gated, a wrong id: the user fixes it the same way
        raise UsageError(f"cannot get {name} from the Hugging Face repo {hf_repo} ({type(err).__name__}: {err}); "
                         f"download the repo and pass weights_dir=DIR, or tiny=1 for the tiny random model") from None


_STEP_KEY = re.compile(r"(?:^|\.)(linears|depformer_in|depformer_emb|gating|in_projs|out_projs)\.(\d+)\.")
_FUSED_KEY = re.compile(r"^depformer\..*\.self_attn\.(in_proj_weight|out_proj\.weight)$")


def model_steps_only(state: dict[str, Any], steps: int = MODEL_CODEBOOKS) -> dict[str, Any]:
    """A Moshi LM state dict with its depformer cut to the model's `steps` codebooks, for a strict load into an LM
    built with dep_q=steps. NVIDIA's PersonaPlex loader (fork loaders.py 166-260) builds dep_q=16: the user steps'
    per-step modules (`linears.N`, `depformer_in.N`, `depformer_emb.N`, the depformer's `gating.N`) and the fused
    per-step attention weights (`in_proj_weight`, `out_proj.weight`: one block of rows per step, fork transformer.py
    176-200 and 360-368) are dropped past the model's steps; a file with dep_q=8 keys passes unchanged."""
    in_file = {int(m.group(2)) for k in state if (m := _STEP_KEY.search(k)) and m.group(1) == "linears"}
    have = max(in_file) + 1 if in_file else steps
    out: dict[str, Any] = {}
    for name, tensor in state.items():
        m = _STEP_KEY.search(name)
        if m and int(m.group(2)) >= (steps - 1 if m.group(1) == "depformer_emb" else steps):
            continue  # a user step's own module (depformer_emb has one fewer: the last codebook is no input)
        if have > steps and _FUSED_KEY.search(name):
            tensor = tensor[:tensor.shape[0] // have * steps]
        out[name] = tensor
    return out


def load_lm_model_steps(loaders: Any, weights: Path, lm_kwargs: dict[str, Any], device: str, dtype: Any) -> Any:
    """The LM with the model's depformer steps only (`model_steps_only`), built on the meta device and assigned the
    file's tensors as moshi's loader does (kyutai loaders.py 403-422), strictly."""
    import torch
    from safetensors.torch import load_file

    lm = loaders.get_moshi_lm(None, lm_kwargs=dict(lm_kwargs, dep_q=MODEL_CODEBOOKS), device=torch.device("meta"),
                              dtype=dtype)
    state = load_file(str(weights), device=str(device))
    state = {k: v.to(dtype) if v.dtype.is_floating_point else v for k, v in model_steps_only(state).items()}
    try:
        lm.load_state_dict(state, assign=True)
    except RuntimeError as err:
        first = str(err).splitlines()[1:2] or [str(err)]
        raise UsageError(f"{weights}: not a Moshi-family LM this adapter can load ({first[0].strip()})") from None
    return lm.eval()


def load_pretrained(hf_repo: str, *, weights_dir: str | None = None, moshi_weight: str | None = None,
                    mimi_weight: str | None = None, tokenizer: str | None = None, config_path: str | None = None,
                    device: str = "cpu", dtype: Any = None, use_repo_config: bool = True,
                    revision: str | None = None, model_steps_only_load: bool = False) -> Models:
    """Mimi + LM + text tokenizer the way moshi's loaders find them: from a Hugging Face repo id (at `revision`), or
    a local folder holding the same files (`weights_dir`), each file overridable. A repo or folder with a config.json
    names its files and LM config there (moshi's `CheckpointInfo`); without one, the Moshi 7B config and file names
    apply. `use_repo_config=False` ignores the repo's config.json (PersonaPlex: its LM is the Moshi 7B one);
    `model_steps_only_load` reads the LM through `load_lm_model_steps` (PersonaPlex's 16-step depformer)."""
    loaders = import_moshi(device)
    cfg_path: Path | None = Path(config_path) if config_path else None
    if cfg_path is None and use_repo_config:
        if weights_dir:
            cfg_path = Path(weights_dir) / "config.json" if (Path(weights_dir) / "config.json").is_file() else None
        else:
            try:
                cfg_path = loaders.hf_get("config.json", hf_repo, revision=revision)
            except Exception:  # noqa: BLE001 - a legacy repo without config.json (the Moshi 7B defaults apply),
                cfg_path = None  # or no network: the weights below then say so
    raw: dict[str, Any] = {}
    if cfg_path is not None:
        import json

        raw = json.loads(cfg_path.read_text())
    names = {"moshi": raw.get("moshi_name", loaders.MOSHI_NAME), "mimi": raw.get("mimi_name", loaders.MIMI_NAME),
             "tokenizer": raw.get("tokenizer_name", loaders.TEXT_TOKENIZER_NAME)}
    files = {"moshi_weights": _resolve(loaders, names["moshi"], hf_repo, weights_dir, moshi_weight, revision),
             "mimi_weights": _resolve(loaders, names["mimi"], hf_repo, weights_dir, mimi_weight, revision),
             "tokenizer": _resolve(loaders, names["tokenizer"], hf_repo, weights_dir, tokenizer, revision)}
    if raw.get("mimi_config_name"):
        files["mimi_config_path"] = _resolve(loaders, raw["mimi_config_name"], hf_repo, weights_dir, None, revision)
    if raw.get("lora_name"):
        files["lora_weights"] = _resolve(loaders, raw["lora_name"], hf_repo, weights_dir, None, revision)
    if cfg_path is not None:
        # Every file is given as a path and so is the config: CheckpointInfo downloads nothing more.
        info = loaders.CheckpointInfo.from_hf_repo(hf_repo or "local", config_path=cfg_path, revision=revision,
                                                   **files)
    else:
        info = loaders.CheckpointInfo(files["moshi_weights"], files["mimi_weights"], files["tokenizer"])
    if info.model_type != "moshi":
        raise UsageError(f"{hf_repo or weights_dir} holds a {info.model_type!r} model, not a duplex moshi one")
    mimi = info.get_mimi(device=device)
    if model_steps_only_load:
        lm = load_lm_model_steps(loaders, files["moshi_weights"], info.lm_config or loaders._lm_kwargs, device, dtype)
    else:
        lm = info.get_moshi(device=device, dtype=dtype)
    return Models(mimi, lm, info.get_text_tokenizer(), str(weights_dir or hf_repo),
                  hf_snapshot_revision(files["moshi_weights"].parent), dict(info.lm_gen_config or {}))


def sampling_settings(name: str, given: dict[str, float | None],
                      checkpoint: dict[str, Any]) -> tuple[dict[str, float], dict[str, str]]:
    """The sampling a run uses and where each value came from: an adapter-arg, else the checkpoint's `lm_gen_config`
    (as Kyutai's server and run_inference pass it to LMGen), else LMGen's default. `use_sampling: false` there is
    greedy (temperature 0). Settings of the checkpoint this adapter cannot apply are said in one line."""
    settings: dict[str, float] = {}
    source: dict[str, str] = {}
    greedy = checkpoint.get("use_sampling") is False
    for key, default in LMGEN_SAMPLING.items():
        if given.get(key) is not None:
            settings[key], source[key] = float(given[key]), "adapter-arg"  # type: ignore[arg-type]
        elif greedy and key.startswith("temp"):
            settings[key], source[key] = 0.0, "checkpoint lm_gen_config (use_sampling false)"
        elif key in checkpoint:
            settings[key], source[key] = float(checkpoint[key]), "checkpoint lm_gen_config"
        else:
            settings[key], source[key] = float(default), "LMGen default"
    unused = sorted(set(checkpoint) - set(LMGEN_SAMPLING) - {"use_sampling"})
    if unused:
        log.warning("%s: the checkpoint's lm_gen_config sets %s, which this adapter does not apply", name,
                    ", ".join(f"{k}={checkpoint[k]!r}" for k in unused))
    return settings, source


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
    played: set[int] = field(default_factory=set)  # frames whose forced audio the recording already holds

    def forget_before(self, frame: int) -> None:
        for table in (self.user, self.model, self.text):
            for k in [k for k in table if k < frame]:
                del table[k]
        self.played = {k for k in self.played if k >= frame}


class MoshiAgent:
    """Moshi through `moshi.models.LMGen`; also a BatchedDuplexAgent (`batch_size` episodes in lockstep)."""

    name = "moshi"
    sample_rate = SAMPLE_RATE
    frame_size = FRAME_SIZE
    realtime = False
    default_preset = "moshiko"
    greets_first = True  # M3's None/User contexts get the authors' 5 s lead-in (M3-DuplexBench V-A, footnote 2)

    def __new__(cls, *args: Any, preset: str | None = None, **kwargs: Any) -> MoshiAgent:
        # `--adapter moshi --adapter-arg preset=personaplex` must build the agent that plays PersonaPlex's prompts:
        # a preset with prompts picks its subclass (Python then runs that class's __init__).
        if preset is not None and cls is MoshiAgent and preset_of(preset).prompts == "persona":
            cls = PersonaPlexAgent
        return super().__new__(cls)

    def __init__(self, hf_repo: str | None = None, weights_dir: str | None = None, moshi_weight: str | None = None,
                 mimi_weight: str | None = None, tokenizer: str | None = None, config_path: str | None = None,
                 device: str | None = None, dtype: str | None = None, batch_size: int = 1, temp: float | None = None,
                 temp_text: float | None = None, top_k: int | None = None, top_k_text: int | None = None,
                 tiny: bool = False,
                 tiny_seed: int = 0, preset: str | None = None, alignment: str = "live",
                 revision: str | None = None) -> None:
        import torch

        if alignment not in ALIGNMENTS:
            raise UsageError(f"alignment must be one of {ALIGNMENTS}, got {alignment!r}")
        self.alignment = alignment
        self._shift = 1 if alignment == "live" else 0  # the model frame played in slot t is frame t - shift
        self.tiny = bool(tiny)
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
            persona = spec.prompts == "persona"
            models = load_pretrained(hf_repo or self.default_repo, weights_dir=weights_dir,
                                     moshi_weight=moshi_weight, mimi_weight=mimi_weight, tokenizer=tokenizer,
                                     config_path=config_path, device=device, dtype=_dtype(dtype, device),
                                     use_repo_config=not persona, revision=revision, model_steps_only_load=persona)
        self.version = f"moshi-{MOSHI_VERSION}:{models.source}"
        self.weights = {"repo": None if tiny or weights_dir else hf_repo or self.default_repo,
                        "requested_revision": revision, "revision": models.revision}
        self.upstream = [provenance(self.name, UPSTREAM[0], _installed_moshi(), "the installed moshi package")]
        self.tokenizer = models.tokenizer
        self.capabilities = frozenset({"teacher_forcing"} | ({"text_output"} if self.tokenizer else set()))
        sampling, self.sampling_source = sampling_settings(
            self.name, {"temp": temp, "temp_text": temp_text, "top_k": top_k, "top_k_text": top_k_text},
            models.lm_gen_config)
        self.temp, self.temp_text = sampling["temp"], sampling["temp_text"]
        self._top_k_audio, self._top_k_text = int(sampling["top_k"]), int(sampling["top_k_text"])
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

    def runtime(self) -> dict[str, Any]:
        """What shapes the recording beyond the case (rec.json `adapter.runtime`): the alignment, the checkpoint
        and the Hub revision loaded, the code it was written against and what the load found."""
        pins = [{"repo": pin.repo, "kind": pin.kind, "pinned": pin.ref} for pin in self._written_against()]
        return {"alignment": self.alignment, "preset": self.preset, "weights": self.weights,
                "sampling": {"temp": self.temp, "temp_text": self.temp_text, "top_k": self._top_k_audio,
                             "top_k_text": self._top_k_text},
                "sampling_source": self.sampling_source,
                "upstream": self.upstream, "written_against": pins}

    def _written_against(self) -> tuple[Pin, ...]:
        return UPSTREAM

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
                slot.played.add(t)
            # Forced: the LM stays a step behind (frame t's semantic token is sampled at step t); free: it returns
            # frame t - shift, which needs steps up to t - shift + 1.
            needs[s] = max(0, t + (1 if is_forced[s] else 2 - self._shift) - slot.steps)
        decoded = self._lm_steps(needs)
        frames = []
        for s, slot in enumerate(self._slots):
            source = slot.base + slot.frames - self._shift  # the model frame this slot plays
            slot.frames += 1
            slot.forget_before(slot.base + slot.frames - 2 - self._shift)
            if is_forced[s]:
                assert forced is not None
                frames.append(Frame(forced[s].copy()))
            elif source < slot.base or source in slot.played:  # before the episode, or already played as forced
                frames.append(Frame(np.zeros(n, np.float32)))
            else:
                pcm, token = decoded[s]
                frames.append(Frame(pcm.float().cpu().numpy().astype(np.float32), self._text(token)))
        return frames

    def plant_tokens(self, frame: int, codes: Any, slot: int = 0) -> None:
        """Make the model's own audio tokens of the frame played in episode slot `frame` (not yet stepped) these 8
        Mimi codes, as teacher forcing does at the token level; the frame is still decoded and returned as the
        model's."""
        import torch

        state = self._slots[slot]
        if frame < state.frames:
            raise ValueError(f"frame {frame} of slot {slot} has already been stepped")
        # Slot `frame` plays the model's frame `frame - shift` (the module docstring's alignment).
        state.model[state.base + frame - self._shift] = torch.as_tensor(codes, dtype=torch.long,
                                                                         device=self._all.device)

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


def _installed_moshi() -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("moshi")
    except PackageNotFoundError:
        return None


def _one_hot_(logits: Any, token: Any) -> Any:
    """Logits that argmax to `token` (one per row), written in place."""
    logits.fill_(float("-inf"))
    logits.scatter_(-1, token.view(*token.shape, *([1] * (logits.dim() - 1))), 0.0)
    return logits


class PersonaPlexAgent(MoshiAgent):
    """NVIDIA PersonaPlex: Moshi with a text role prompt (the system prompt, or `default_role_prompt` when a case has
    none) and an audio voice prompt (`voice_prompt`: a clip, or a preset's `.wav`; see the module docstring)."""

    name = "personaplex"
    default_preset = "personaplex"

    def __init__(self, voice_prompt: str | None = "NATF2", voice_dir: str | None = None,
                 default_role_prompt: str = DEFAULT_ROLE_PROMPT, **kwargs: Any) -> None:
        self.voice_prompt = None if kwargs.get("tiny") and voice_prompt == "NATF2" else voice_prompt
        self.voice_dir = voice_dir
        if not default_role_prompt.strip():
            raise UsageError("default_role_prompt must not be empty: NVIDIA's code has no path without a role prompt "
                             "(an empty one crashes its server and offline.py)")
        self.default_role_prompt = default_role_prompt
        self._hf_repo = kwargs.get("hf_repo") or PRESETS[self.default_preset].repo
        harness_temp_text = kwargs.get("temp_text") is None
        if harness_temp_text:
            kwargs["temp_text"] = PERSONAPLEX_TEMP_TEXT
        super().__init__(**kwargs)
        if harness_temp_text:
            self.sampling_source["temp_text"] = "DSB-IFEval's harness (its App. D.5)"
        self.capabilities = self.capabilities | {"system_prompt"}

    def runtime(self) -> dict[str, Any]:
        return super().runtime() | {"voice_prompt": self.voice_prompt, "default_role_prompt": self.default_role_prompt,
                                    "prompt_codes": "encoded (tiny model)" if self.tiny else "NVIDIA's fixed tokens"}

    def _written_against(self) -> tuple[Pin, ...]:
        return (*UPSTREAM, PERSONAPLEX_UPSTREAM)

    def _voice_file(self) -> Path:
        assert self.voice_prompt is not None
        path = Path(self.voice_prompt)
        if path.suffix:
            if path.suffix == ".pt":
                raise UsageError(f"voice_prompt {path}: NVIDIA's .pt voice embeddings replay through its own LMGen "
                                 f"fork (step_embeddings); pass an audio clip of the voice (.wav)")
            if not path.is_file():
                raise UsageError(f"voice_prompt {path} does not exist")
            return path
        folder = Path(self.voice_dir) if self.voice_dir else self._voices_from_repo()
        clip = folder / f"{self.voice_prompt}.wav"
        if not clip.is_file():
            embedding = " (only NVIDIA's .pt embedding, which stock moshi cannot replay)" if (
                folder / f"{self.voice_prompt}.pt").is_file() else ""
            raise UsageError(f"no {clip.name} in {folder}{embedding}; presets there: "
                             f"{sorted(p.name for p in folder.glob('*.*'))}; pass voice_prompt=PATH.wav")
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

        dev = models.lm.device
        voice = self._load_voice() if self.voice_prompt else np.zeros(0, np.float32)
        with torch.no_grad():
            voice_codes = self._encode_alone(models.mimi, voice) if len(voice) else []
            if self.tiny:  # NVIDIA's tokens index a 2048-entry codebook; the tiny model's has 64
                n = self.frame_size
                sine = (SINE_AMPLITUDE * np.sin(2 * np.pi * SINE_HZ * np.arange(n) / SAMPLE_RATE)).astype(np.float32)
                silence_code, sine_code = (self._encode_alone(models.mimi, c)[0] for c in (np.zeros(n, np.float32),
                                                                                           sine))
            else:
                silence_code, sine_code = (torch.tensor(c, dtype=torch.long) for c in (SILENCE_TOKENS, SINE_TOKENS))
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
        """NVIDIA's `step_system_prompts` (fork lm.py 1123-1127): voice, silence, role prompt, silence."""
        silence = [(self._sine_code, self._silence_code, TEXT_PAD)] * int(PROMPT_SILENCE_S * SAMPLE_RATE
                                                                         / self.frame_size)
        frames = [(self._sine_code, code, TEXT_PAD) for code in self._voice_codes] + silence
        text = (system_prompt or "").strip() or self.default_role_prompt.strip()
        if not (text.startswith("<system>") and text.endswith("<system>")):
            text = f"<system> {text} <system>"
        assert self.tokenizer is not None
        frames += [(self._sine_code, self._silence_code, int(t)) for t in self.tokenizer.encode(text)]
        return frames + silence


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
