"""Runs one case's plan through one agent on a virtual clock and writes the episode (docs/conventions.md,
docs/adding-a-benchmark.md).

The orchestrator controls only the user stream. Each frame: the scheduler picks the user audio, the agent
steps, both channels are appended and a streaming VAD on the model channel drives the waits. Local agents
run as fast as they step; only `realtime=True` agents are paced in wall-clock time.
"""

from __future__ import annotations

import importlib.metadata
import logging
import queue
import subprocess
import threading
import time
import tomllib
from collections.abc import Callable
from concurrent.futures import TimeoutError as StepTimeout
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from adapters.protocol import DuplexAgent, TimelineCue
from adapters.upstream import git_head
from dataset_builder.atomic import round_ms
from dataset_builder.audio import SESSION_SR, resample, write_wav
from dataset_builder.episode import Episode, TimelineEvent
from eval import interrupt
from eval.schedule import Ctx, EpisodePlan, StepScheduler
from metrics.feasibility import step_time_record
from metrics.vad import StreamingVAD

log = logging.getLogger(__name__)


CHECKOUT = Path(__file__).resolve().parent.parent  # the repository root when run from a checkout


def _harness_version() -> str:
    """duplex-eval's version, defined once in pyproject.toml: in a checkout (pyproject.toml beside the packages:
    an editable install, or `accelerate launch eval/run.py` with none) pyproject.toml's own, since an editable
    install's metadata keeps the version it was installed at; else the installed distribution's; "unknown" without
    either."""
    try:
        with (CHECKOUT / "pyproject.toml").open("rb") as f:
            project = tomllib.load(f)["project"]
        if project.get("name") == "duplex-eval":
            return str(project["version"])
    except (OSError, KeyError, tomllib.TOMLDecodeError):
        pass
    try:
        return importlib.metadata.version("duplex-eval")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


HARNESS_VERSION = _harness_version()


def harness_commit() -> tuple[str, bool] | None:
    """(the commit, whether tracked files differ from it) of the git checkout this code runs from; None when it
    runs from an installed copy (the .git folder itself is asked for: an install under a checkout's .venv is not
    that checkout's code)."""
    if not (CHECKOUT / ".git").exists():
        return None
    head = git_head(CHECKOUT)
    if head is None:
        return None
    try:
        status = subprocess.run(["git", "-C", str(CHECKOUT), "status", "--porcelain", "--untracked-files=no"],
                                capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return head, False
    return head, bool(status.returncode == 0 and status.stdout.strip())


def version_text() -> str:
    """`duplex-eval --version`: the version, and the commit when run from a checkout."""
    commit = harness_commit()
    if commit is None:
        return f"duplex-eval {HARNESS_VERSION}"
    head, modified = commit
    return f"duplex-eval {HARNESS_VERSION} (commit {head[:12]}{', with local changes' if modified else ''})"
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
    info = {"name": agent.name, "version": getattr(agent, "version", "unknown"),
            "sample_rate": agent.sample_rate, "frame_size": agent.frame_size, "realtime": agent.realtime,
            "capabilities": sorted(agent.capabilities)}
    # An agent built on native float libraries may say how they compute (docs/testing.md, "Same numbers on another
    # machine").
    runtime = getattr(agent, "runtime", None)
    return info | ({"runtime": runtime()} if callable(runtime) else {})


def check_frame(frame: Any, frame_size: int, t_s: float) -> tuple[np.ndarray, str | None, str | None]:
    """A model frame's audio (float32), text and note (`Frame.note`), or EpisodeFailure when the audio is not one
    finite frame."""
    audio, text = (frame[0], frame[1]) if isinstance(frame, tuple) else (frame, None)
    note = frame[2] if isinstance(frame, tuple) and len(frame) > 2 else None
    audio = np.asarray(audio)
    if audio.shape != (frame_size,):
        raise EpisodeFailure(f"wrong frame shape {audio.shape}, expected ({frame_size},) at t={t_s:.3f}s")
    if not np.all(np.isfinite(audio)):
        raise EpisodeFailure(f"non-finite samples (NaN/inf) in model frame at t={t_s:.3f}s")
    return audio.astype(np.float32, copy=False), text, note


def _timed(fn: Callable[..., Any], *args: Any) -> tuple[Any, float]:
    """fn(*args) and the wall seconds it took: the compute time of one step, without any harness around it."""
    t0 = time.perf_counter()
    out = fn(*args)
    return out, time.perf_counter() - t0


def _serve(todo: queue.SimpleQueue, done: queue.SimpleQueue) -> None:
    """TimedCall's worker: runs the steps it is given, in order, until told to stop (None)."""
    while (job := todo.get()) is not None:
        n, fn, args = job
        try:
            done.put((n, _timed(fn, *args), None))
        except BaseException as err:  # handed to the caller, which decides (as a future's result would)
            done.put((n, None, err))


class TimedCall:
    """Calls an agent's step function, in a worker thread when a per-step timeout is set, and times it.

    A stall or an exception of the agent becomes EpisodeFailure; the caller decides which episodes it fails.
    After a stall the worker thread may still be blocked: `close` abandons it (the runner then replaces the agent).
    The worker is one thread fed through two queues: an episode makes thousands of steps, and an executor's
    futures cost more per step than the agents the tests drive. Steps run one at a time, in order; a step's
    timeout counts from its request, so one asked for after a stall waits behind the blocked step, as in a
    one-thread pool, and a late result of an abandoned step is never taken for a later one's.
    """

    def __init__(self, timeout_s: float | None) -> None:
        self.timeout_s = timeout_s
        self._todo: queue.SimpleQueue | None = None
        self._done: queue.SimpleQueue = queue.SimpleQueue()
        self._sent = 0
        self._closed = False
        if timeout_s:
            self._todo = queue.SimpleQueue()
            threading.Thread(target=_serve, args=(self._todo, self._done), name="agent-step", daemon=True).start()

    def _in_worker(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> tuple[Any, float]:
        assert self._todo is not None and self.timeout_s
        if self._closed:
            raise RuntimeError("cannot schedule new futures after shutdown")
        deadline = time.monotonic() + self.timeout_s
        self._sent += 1
        self._todo.put((self._sent, fn, args))
        while True:
            try:
                n, out, err = self._done.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise StepTimeout from None
            if n == self._sent:  # else: the late result of a step abandoned before
                if err is not None:
                    raise err
                return out

    def __call__(self, fn: Callable[..., Any], *args: Any, t_s: float | None, what: str = "step"
                 ) -> tuple[Any, float]:
        """(what fn returned, its seconds); the failure names the stream time `t_s` unless it is None (a batch
        of episodes, each at its own time: the caller adds it per episode)."""
        at = "" if t_s is None else f" at t={t_s:.3f}s"
        try:
            if self._todo is None:
                return _timed(fn, *args)
            return self._in_worker(fn, args)
        except StepTimeout:
            raise EpisodeFailure(f"{STALL_PREFIX}: no frame within {self.timeout_s}s{at}") from None
        except EpisodeFailure:
            raise
        except Exception as err:  # the agent's own error: recorded as data, the run goes on
            raise EpisodeFailure(f"{what} raised {type(err).__name__}: {err}{at}") from err

    def close(self) -> None:
        if self._todo is not None and not self._closed:
            self._closed = True
            while True:  # steps not started are dropped
                try:
                    self._todo.get_nowait()
                except queue.Empty:
                    break
            self._todo.put(None)


class CaseLike(Protocol):
    case_id: str
    benchmark: str
    tts_backend: str


def skip_reason(agent: DuplexAgent, case: CaseLike, plan: EpisodePlan) -> str | None:
    """Why the agent cannot run this case as specified (a capability the plan needs), or None when it can."""
    missing = plan.missing(frozenset(agent.capabilities))
    if not missing:
        return None
    return (f"adapter {agent.name} lacks {', '.join(missing)}, which this case ({plan.condition or case.case_id}) "
            "needs")


class EpisodeRun:
    """One episode's per-frame logic, stepped by a driver that owns the agent (docs/conventions.md, docs/scale.md).

    The driver — `run_episode` for one agent and one case, `eval.lockstep` for B cases in one batched agent —
    resets the agent, then repeats: `next_input()` for the user frame (and the teacher-forced model frame while
    the plan's `forced` audio lasts), one agent step, `accept(frame, step_s)`; until `done`. `finish()` writes the
    recording and rec.json. Everything a recording depends on happens here, so every driver writes the same
    episode for the same case and model output; a failure (`fail`, or a bad frame in `accept`) ends the episode
    with its reason and keeps what was recorded before it.
    """

    def __init__(self, adapter: dict[str, Any], case: CaseLike, plan: EpisodePlan, out_dir: Path, *, seed: int,
                 options: RunOptions, batch_size: int = 1) -> None:
        self.adapter, self.case, self.plan, self.out_dir = adapter, case, plan, out_dir
        self.seed, self.options, self.batch_size = seed, options, batch_size
        self.sr, self.n = int(adapter["sample_rate"]), int(adapter["frame_size"])
        self.vad = StreamingVAD(plan.vad, sr=self.sr)
        self.sched = StepScheduler(plan.steps)
        self.ctx = Ctx(sample=0, sr=self.sr, model=self.vad)
        self.labels = plan.labels()
        self.texts = plan.texts()
        self.starts: dict[str, int] = {}
        self.timeline: list[TimelineEvent] = []
        self.user_frames: list[np.ndarray] = []
        self.model_frames: list[np.ndarray] = []
        self.model_text: list[list[Any]] = []
        self.notes: list[list[Any]] = []
        self.step_s: list[float] = []
        self.session: dict[str, Any] | None = None  # a served model's session, as its client saw it (served_session)
        self.failure: str | None = None
        self.pos = 0  # stream sample of the frame being stepped
        self.cues_due: list[TimelineCue] = []  # for a "gold_cues" agent, before this step: one frame late
        self._pending: list[TimelineCue] = []
        self._user = np.zeros(0, np.float32)
        self.max_samples = int(options.max_episode_s * self.sr)
        self.wall0 = time.perf_counter()
        forced = plan.forced
        if forced is not None and len(forced) % self.n:
            self.fail(f"the plan's forced audio ({len(forced)} samples) is not a whole number of {self.n}-sample "
                      "frames")

    @property
    def done(self) -> bool:
        return self.failure is not None or self.sched.done

    @property
    def t_s(self) -> float:
        return self.pos / self.sr

    def fail(self, reason: str) -> None:
        if self.failure is None:
            self.failure = reason

    def next_input(self) -> tuple[np.ndarray, np.ndarray | None] | None:
        """The next user frame and forced model frame (or None), or None when the episode ends on the clock."""
        pos = self.pos = self.ctx.sample
        if pos >= self.max_samples:
            self.fail(f"episode exceeded max_episode_s={self.options.max_episode_s}")
            return None
        user = self._user = self.sched.fill(self.n, self.ctx)
        self.cues_due, self._pending = self._pending, self.ctx.cues
        for cue in self.ctx.cues:
            if cue.kind == "clip_start":
                self.starts[cue.turn_id] = cue.sample
            else:
                self.timeline.append(TimelineEvent(cue.turn_id, self.labels[cue.turn_id],
                                                   round_ms(self.starts[cue.turn_id] / self.sr),
                                                   round_ms(cue.sample / self.sr), self.texts.get(cue.turn_id, "")))
        self.ctx.cues = []
        forced = self.plan.forced
        return user, forced[pos:pos + self.n] if forced is not None and pos < len(forced) else None

    def accept(self, frame: Any, step_s: float) -> None:
        """The agent's frame for the user frame last handed out, and the seconds its step took."""
        try:
            model, text, note = check_frame(frame, self.n, self.t_s)
        except EpisodeFailure as err:
            self.fail(str(err))
            return
        self.step_s.append(step_s)
        if text:
            self.model_text.append([round_ms(self.t_s), text])
        if note:
            self.notes.append([round_ms(self.t_s), str(note)])
        self.user_frames.append(self._user)
        self.model_frames.append(model)
        self.vad.push(model)

    def _compute(self) -> dict[str, Any] | None:
        """rec.json `compute`: the step times, and a served model's session beside them (docs/scale.md)."""
        rec = step_time_record(self.step_s, self.batch_size, self.n / self.sr)
        return rec if rec is None or self.session is None else {**rec, "session": self.session}

    def finish(self) -> Episode:
        """Write `{case_id}.wav` and then `{case_id}.rec.json` (its presence marks the episode complete)."""
        sr = self.sr
        user_ch = np.concatenate(self.user_frames) if self.user_frames else np.zeros(0, np.float32)
        model_ch = np.concatenate(self.model_frames) if self.model_frames else np.zeros(0, np.float32)
        if sr != SESSION_SR:
            user_ch, model_ch = resample(user_ch, sr, SESSION_SR), resample(model_ch, sr, SESSION_SR)
        wav_path, rec_path = episode_paths(self.out_dir, self.case.case_id)
        write_wav(wav_path, np.stack([user_ch, model_ch], axis=1))
        plan, case = self.plan, self.case
        episode = Episode(
            case_id=case.case_id, benchmark=case.benchmark, condition=plan.condition, pair_id=plan.group_id,
            status="failed" if self.failure else "ok", failure=self.failure, adapter=self.adapter,
            params={"protocol": plan.protocol, "vad": asdict(plan.vad) | {"preset": plan.vad_preset},
                    "run": self.options.to_dict(), "harness_version": HARNESS_VERSION,
                    "tts_backend": case.tts_backend},
            seed=self.seed, timeline=self.timeline, duration_s=round_ms(len(user_ch) / SESSION_SR), gold=plan.gold,
            model_text=self.model_text, notes=self.notes, wall_s=round_ms(time.perf_counter() - self.wall0),
            compute=self._compute(),
        )
        episode.save(rec_path)
        return episode


def served_session(agent: DuplexAgent, slot: int) -> dict[str, Any] | None:
    """The live feasibility of a served agent's session in `slot` (adapters.protocol.ServedSession), or None.

    Asked when the slot's episode ends, before the next case's reset replaces the session. A failure here must
    not lose the episode: it is recorded without the session's numbers.
    """
    fn = getattr(agent, "session_feasibility", None)
    if not callable(fn):
        return None
    try:
        rec = fn(slot)
    except Exception as err:  # the recording is worth more than this measurement
        log.warning("%s: session_feasibility(%d) raised %s: %s", agent.name, slot, type(err).__name__, err)
        return None
    return rec if isinstance(rec, dict) else None


def run_episode(agent: DuplexAgent, case: CaseLike, plan: EpisodePlan, out_dir: Path, *, seed: int = 0,
                options: RunOptions = RunOptions()) -> Episode:
    """Run one case's plan and write `{case_id}.wav` (ch0 user, ch1 model, 24 kHz) and `{case_id}.rec.json`.

    The plan (from the benchmark's `eval/plans/<bench>.py`) decides the user stream; this function knows no
    benchmark: it steps the agent frame by frame, checks every frame, records failures as data and writes
    the episode atomically, rec.json last (its presence marks the episode complete). While the plan's `forced`
    audio lasts, each frame of it is passed as `forced_model_frame`. An agent lacking a capability the plan needs
    gets the case recorded as skipped (`record_skipped_episode`) without stepping it.
    """
    reason = skip_reason(agent, case, plan)
    if reason:
        return record_skipped_episode(agent, case, plan, out_dir, reason, seed=seed, options=options)
    gold_aware = "gold_cues" in agent.capabilities
    step = TimedCall(options.step_timeout_s)
    run = EpisodeRun(adapter_info(agent), case, plan, out_dir, seed=seed, options=options)
    try:
        if not run.done:
            try:
                agent.reset(plan.system_prompt, seed)
                if gold_aware:
                    agent.bind_case(case if plan.bound_case is None else plan.bound_case)  # type: ignore[attr-defined]
            except Exception as err:
                raise EpisodeFailure(f"reset raised {type(err).__name__}: {err}") from err
        while not run.done:
            interrupt.check()
            frames = run.next_input()
            if frames is None:
                break
            if gold_aware:
                # Cues arrive one frame late: the oracle learns of an event only after hearing it.
                try:
                    for cue in run.cues_due:
                        agent.cue(cue)  # type: ignore[attr-defined]
                except Exception as err:
                    raise EpisodeFailure(f"cue raised {type(err).__name__}: {err} at t={run.t_s:.3f}s") from err
            frame, step_s = step(agent.step, *frames, t_s=run.t_s)
            run.accept(frame, step_s)
            if agent.realtime:
                lag = run.t_s + run.n / run.sr - (time.perf_counter() - run.wall0)
                if lag > 0:
                    time.sleep(lag)
    except EpisodeFailure as err:
        run.fail(str(err))
    finally:
        step.close()
    run.session = served_session(agent, 0)
    return run.finish()


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
