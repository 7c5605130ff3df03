"""Runs one case's plan through one agent on a virtual clock and writes the episode (SPEC §4, §11).

The orchestrator controls only the user stream. Each frame: the scheduler picks the user audio, the agent
steps, both channels are appended and a streaming VAD on the model channel drives the waits. Local agents
run as fast as they step; only `realtime=True` agents are paced in wall-clock time.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as StepTimeout
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from adapters.protocol import DuplexAgent, TimelineCue
from dataset_builder.atomic import round_ms
from dataset_builder.audio import SESSION_SR, resample, write_wav
from dataset_builder.episode import Episode, TimelineEvent
from eval.schedule import Ctx, EpisodePlan, StepScheduler
from metrics.vad import StreamingVAD

HARNESS_VERSION = "0.1.0"
STALL_PREFIX = "step stalled"


class EpisodeFailure(RuntimeError):
    """The agent misbehaved; the episode is recorded as failed with this reason and the run goes on."""


@dataclass(frozen=True)
class RunOptions:
    step_timeout_s: float | None = 30.0
    max_episode_s: float = 600.0  # hard stop on the stream clock, whatever the scheduler says

    def to_dict(self) -> dict[str, Any]:
        return {"step_timeout_s": self.step_timeout_s, "max_episode_s": self.max_episode_s}


def episode_paths(out_dir: Path, case_id: str) -> tuple[Path, Path]:
    return out_dir / f"{case_id}.wav", out_dir / f"{case_id}.rec.json"


def adapter_info(agent: DuplexAgent) -> dict[str, Any]:
    return {"name": agent.name, "version": getattr(agent, "version", "unknown"),
            "sample_rate": agent.sample_rate, "frame_size": agent.frame_size, "realtime": agent.realtime,
            "capabilities": sorted(agent.capabilities)}


class _Stepper:
    """Calls agent.step, in a worker thread when a per-step timeout is set, and checks what comes back."""

    def __init__(self, agent: DuplexAgent, timeout_s: float | None) -> None:
        self.agent = agent
        self.timeout_s = timeout_s
        self.pool = ThreadPoolExecutor(1, thread_name_prefix="agent-step") if timeout_s else None

    def __call__(self, user: np.ndarray, forced: np.ndarray | None, t_s: float) -> tuple[np.ndarray, str | None]:
        try:
            if self.pool is None:
                frame = self.agent.step(user, forced)
            else:
                frame = self.pool.submit(self.agent.step, user, forced).result(timeout=self.timeout_s)
        except StepTimeout:
            raise EpisodeFailure(f"{STALL_PREFIX}: no frame within {self.timeout_s}s at t={t_s:.3f}s") from None
        except EpisodeFailure:
            raise
        except Exception as err:  # the agent's own error: recorded as data, the run goes on
            raise EpisodeFailure(f"step raised {type(err).__name__}: {err} at t={t_s:.3f}s") from err
        audio, text = (frame[0], frame[1]) if isinstance(frame, tuple) else (frame, None)
        audio = np.asarray(audio)
        if audio.shape != (self.agent.frame_size,):
            raise EpisodeFailure(
                f"wrong frame shape {audio.shape}, expected ({self.agent.frame_size},) at t={t_s:.3f}s")
        if not np.all(np.isfinite(audio)):
            raise EpisodeFailure(f"non-finite samples (NaN/inf) in model frame at t={t_s:.3f}s")
        return audio.astype(np.float32, copy=False), text

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=False, cancel_futures=True)


class CaseLike(Protocol):
    case_id: str
    benchmark: str
    tts_backend: str


def run_episode(agent: DuplexAgent, case: CaseLike, plan: EpisodePlan, out_dir: Path, *, seed: int = 0,
                options: RunOptions = RunOptions()) -> Episode:
    """Run one case's plan and write `{case_id}.wav` (ch0 user, ch1 model, 24 kHz) and `{case_id}.rec.json`.

    The plan (from the benchmark's `eval/plans/<bench>.py`) decides the user stream; this function knows no
    benchmark: it steps the agent frame by frame, checks every frame, records failures as data and writes
    the episode atomically, rec.json last (its presence marks the episode complete). While the plan's `forced`
    audio lasts, each frame of it is passed as `forced_model_frame`. An agent lacking a capability the plan needs
    gets the case recorded as skipped (`record_skipped_episode`) without stepping it.
    """
    missing = plan.missing(frozenset(agent.capabilities))
    if missing:
        return record_skipped_episode(
            agent, case, plan, out_dir, f"adapter {agent.name} lacks {', '.join(missing)}, which this case "
            f"({plan.condition or case.case_id}) needs", seed=seed, options=options)
    sr, n = agent.sample_rate, agent.frame_size
    forced = plan.forced
    vad = StreamingVAD(plan.vad, sr=sr)
    sched = StepScheduler(plan.steps)
    ctx = Ctx(sample=0, sr=sr, model=vad)
    labels = plan.labels()
    starts: dict[str, int] = {}
    timeline: list[TimelineEvent] = []
    user_frames: list[np.ndarray] = []
    model_frames: list[np.ndarray] = []
    model_text: list[list[Any]] = []
    failure: str | None = None
    gold_aware = "gold_cues" in agent.capabilities
    stepper = _Stepper(agent, options.step_timeout_s)
    wall0 = time.perf_counter()
    max_samples = int(options.max_episode_s * sr)
    try:
        if forced is not None and len(forced) % n:
            raise EpisodeFailure(f"the plan's forced audio ({len(forced)} samples) is not a whole number of "
                                 f"{n}-sample frames")
        try:
            agent.reset(plan.system_prompt, seed)
            if gold_aware:
                agent.bind_case(case if plan.bound_case is None else plan.bound_case)  # type: ignore[attr-defined]
        except Exception as err:
            raise EpisodeFailure(f"reset raised {type(err).__name__}: {err}") from err
        pending: list[TimelineCue] = []
        while not sched.done:
            pos = ctx.sample
            if pos >= max_samples:
                raise EpisodeFailure(f"episode exceeded max_episode_s={options.max_episode_s}")
            user = sched.fill(n, ctx)
            if gold_aware:
                # Cues arrive one frame late: the oracle learns of an event only after hearing it.
                try:
                    for cue in pending:
                        agent.cue(cue)  # type: ignore[attr-defined]
                except Exception as err:
                    raise EpisodeFailure(f"cue raised {type(err).__name__}: {err} at t={pos / sr:.3f}s") from err
            pending = ctx.cues
            for cue in ctx.cues:
                if cue.kind == "clip_start":
                    starts[cue.turn_id] = cue.sample
                else:
                    timeline.append(TimelineEvent(cue.turn_id, labels[cue.turn_id],
                                                  round_ms(starts[cue.turn_id] / sr), round_ms(cue.sample / sr)))
            ctx.cues = []
            model, text = stepper(user, forced[pos:pos + n] if forced is not None and pos < len(forced) else None,
                                  pos / sr)
            if text:
                model_text.append([round_ms(pos / sr), text])
            user_frames.append(user)
            model_frames.append(model)
            vad.push(model)
            if agent.realtime:
                lag = pos / sr + n / sr - (time.perf_counter() - wall0)
                if lag > 0:
                    time.sleep(lag)
    except EpisodeFailure as err:
        failure = str(err)
    finally:
        stepper.close()
    user_ch = np.concatenate(user_frames) if user_frames else np.zeros(0, np.float32)
    model_ch = np.concatenate(model_frames) if model_frames else np.zeros(0, np.float32)
    if sr != SESSION_SR:
        user_ch, model_ch = resample(user_ch, sr, SESSION_SR), resample(model_ch, sr, SESSION_SR)
    wav_path, rec_path = episode_paths(out_dir, case.case_id)
    write_wav(wav_path, np.stack([user_ch, model_ch], axis=1))
    episode = Episode(
        case_id=case.case_id, benchmark=case.benchmark, condition=plan.condition, pair_id=plan.group_id,
        status="failed" if failure else "ok", failure=failure, adapter=adapter_info(agent),
        params={"protocol": plan.protocol, "vad": asdict(plan.vad) | {"preset": plan.vad_preset},
                "run": options.to_dict(), "harness_version": HARNESS_VERSION, "tts_backend": case.tts_backend},
        seed=seed, timeline=timeline, duration_s=round_ms(len(user_ch) / SESSION_SR), gold=plan.gold,
        model_text=model_text, wall_s=round_ms(time.perf_counter() - wall0),
    )
    episode.save(rec_path)  # written last: its presence marks the episode complete
    return episode


def record_failed_episode(agent: DuplexAgent, case: CaseLike, out_dir: Path, reason: str, *, seed: int = 0,
                          options: RunOptions = RunOptions()) -> Episode:
    """A case that could not even start (its plan failed): recorded as a failed episode, the run goes on.

    The recording is empty; the scorer counts the case against the model like any other failure.
    """
    wav_path, rec_path = episode_paths(out_dir, case.case_id)
    write_wav(wav_path, np.zeros((0, 2), np.float32))
    episode = Episode(
        case_id=case.case_id, benchmark=case.benchmark, condition="", pair_id="", status="failed",
        failure=reason, adapter=adapter_info(agent),
        params={"run": options.to_dict(), "harness_version": HARNESS_VERSION, "tts_backend": case.tts_backend},
        seed=seed, timeline=[], duration_s=0.0, gold={})
    episode.save(rec_path)
    return episode


def record_skipped_episode(agent: DuplexAgent, case: CaseLike, plan: EpisodePlan, out_dir: Path, reason: str, *,
                           seed: int = 0, options: RunOptions = RunOptions()) -> Episode:
    """A case the agent cannot run as specified (it lacks a capability the plan needs): recorded as skipped.

    Skipped is neither ok nor failed: the scorer counts it with its reason and leaves it out of every score. The
    record keeps the plan's condition, group and gold, so the count can be broken down like the scores.
    """
    wav_path, rec_path = episode_paths(out_dir, case.case_id)
    write_wav(wav_path, np.zeros((0, 2), np.float32))
    episode = Episode(
        case_id=case.case_id, benchmark=case.benchmark, condition=plan.condition, pair_id=plan.group_id,
        status="skipped", failure=reason, adapter=adapter_info(agent),
        params={"protocol": plan.protocol, "run": options.to_dict(), "harness_version": HARNESS_VERSION,
                "tts_backend": case.tts_backend},
        seed=seed, timeline=[], duration_s=0.0, gold=plan.gold)
    episode.save(rec_path)
    return episode
