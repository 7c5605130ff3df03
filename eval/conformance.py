"""`duplex-eval check-adapter`: does an agent keep the promises of the protocol (adapters/protocol.py,
docs/adding-a-model.md, docs/scale.md)?

Every check steps the agent on realistic input: the project's TTS asking it something (a user voice), the
silence after, and plain digital silence. Each check ends PASS, FAIL or SKIP with a one-line reason; `step-time`
is reported, never judged. Comparisons are between whole runs that start with `reset(prompt, seed)` and the same
seed, so they hold for any model that is reproducible with a fixed seed:

- reset-determinism: the same input twice (another case in between) gives the same output;
- reset-isolation: input A after a reset gives the same output whether the case before was cut off mid-speech
  (where a model's state is busiest) or played out;
- causality: two inputs that differ only from frame t on give the same output up to and including frame t (a
  reply to user frame t is played from frame t + 1 on, where a live listener hears it). The frames are handed
  out as views of one stream and compared as the agent left them at the end, as a recording keeps them, so an
  agent that reads past its frame or rewrites audio it has already returned is caught.

A realtime agent is paced as `duplex-eval run` paces it (one frame per frame duration of wall-clock time), so every
run takes as long as its audio. A service need not be sample-reproducible: when a realtime agent's repeat run
differs, determinism, isolation and causality are skipped with that reason instead of failed.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from adapters.protocol import CAPABILITIES, BatchedDuplexAgent, DuplexAgent
from adapters.registry import adapter_target
from dataset_builder.audio import SESSION_SR, resample, seconds_to_samples

PASS, FAIL, SKIP, INFO = "PASS", "FAIL", "SKIP", "INFO"
# The built-in agents that may read a case's gold ("gold_cues"): a model under test must not.
REFERENCE_AGENTS = ("silent", "oracle", "cascade")
USER_TEXTS = ("Aria, what is twelve times three?", "Hmm, I think I left my keys in the kitchen.")
FORCED_TEXT = "Sure, twelve times three is thirty six."
PROMPT = "You are Aria, a helpful voice assistant. Answer in one short sentence."
LEAD_S, TAIL_S = 0.3, 1.5  # silence before and after the spoken turn: room for a reply
MAX_FRAME_S = 0.5  # coarser frames blur every timing the benchmarks score by more than their tolerances
# Reruns of each of the two runs a realtime agent's failed comparison rests on, each of which must reproduce it
# before isolation, causality, prompt or forcing can FAIL (`Suite.jitter`): two, so that a loaded machine repeating
# one late frame by chance is not read as a leak.
REALTIME_RERUNS = 2
# Points of the spoken turn where causality changes the input (every 1/PROBES of it); a paced agent is probed at the
# middle only, since each probe is a run as long as its audio.
PROBES = 6


@dataclass(frozen=True)
class CheckResult:
    name: str
    status: str  # PASS, FAIL, SKIP or INFO
    reason: str


class Nonconformance(Exception):
    """The agent broke the protocol while being stepped; the message says where and how."""


@dataclass
class Run:
    frames: list[np.ndarray]  # as the agent left them at the end of the run (what a recording holds)
    texts: list[Any]
    changed: list[int] = field(default_factory=list)  # frames whose samples changed after step returned them

    @property
    def silent(self) -> bool:
        return not any(np.any(f) for f in self.frames)


@dataclass(frozen=True)
class Stimuli:
    """Inputs at the agent's rate, whole frames, all the same length."""

    a: np.ndarray  # a spoken question, then silence
    b: np.ndarray  # another speaker saying something else
    a_changed: np.ndarray  # a up to frame `t_frame`, b from there on
    t_frame: int
    # More frames to change the input at (causality, agents on the virtual clock): a model may react within its
    # own frame only at some points of a turn, so one probe can miss it.
    more_probes: tuple[int, ...]
    forced: np.ndarray  # the assistant's voice, as teacher-forced model audio
    speech_a: np.ndarray  # the spoken turns alone (the episode check plays them)
    speech_b: np.ndarray


def make_stimuli(sr: int, n: int, tts: Any) -> Stimuli:
    voice = next(v for v in tts.voices() if v != tts.assistant_voice)
    speech = [resample(tts.synthesize(t, voice), SESSION_SR, sr) for t in USER_TEXTS]
    lead = np.zeros(seconds_to_samples(LEAD_S, sr), np.float32)
    longest = len(lead) + max(len(s) for s in speech) + seconds_to_samples(TAIL_S, sr)
    total = -(-longest // n) * n
    a, b = (np.concatenate([lead, s, np.zeros(total - len(lead) - len(s), np.float32)]) for s in speech)
    t_frame = (len(lead) + len(speech[0]) // 2) // n
    a_changed = np.concatenate([a[:t_frame * n], b[t_frame * n:]])
    forced = resample(tts.synthesize(FORCED_TEXT, tts.assistant_voice), SESSION_SR, sr)
    k = min(len(forced) // n, total // n // 2)
    spoken = (len(lead) // n, (len(lead) + len(speech[0])) // n)
    more = tuple(sorted({spoken[0] + (spoken[1] - spoken[0]) * i // PROBES for i in range(1, PROBES)} - {t_frame}))
    return Stimuli(a, b, a_changed, t_frame, more, forced[:k * n], speech[0], speech[1])


def frame_problem(frame: Any, n: int) -> str | None:
    """What is wrong with one value returned by `step`, or None."""
    if not isinstance(frame, tuple) or len(frame) not in (2, 3):
        return f"returned {type(frame).__name__}, not Frame(audio, text) (adapters.protocol.Frame)"
    audio, text = frame[0], frame[1]
    note = frame[2] if len(frame) == 3 else None
    if note is not None and not isinstance(note, str):
        return f"returned a note of type {type(note).__name__}, expected str or None"
    if not isinstance(audio, np.ndarray):
        return f"returned audio of type {type(audio).__name__}, not a numpy array"
    if audio.shape != (n,):
        return f"returned audio of shape {audio.shape}, expected ({n},) (frame_size)"
    if audio.dtype != np.float32:
        return f"returned audio of dtype {audio.dtype}, expected float32"
    if not np.all(np.isfinite(audio)):
        return f"returned {int(np.sum(~np.isfinite(audio)))} non-finite samples (NaN/inf)"
    if text is not None and not isinstance(text, str):
        return f"returned text of type {type(text).__name__}, expected str or None"
    return None


def first_difference(x: list[np.ndarray], y: list[np.ndarray], atol: float) -> tuple[int, float] | None:
    """The first frame where two runs differ by more than `atol`, and by how much."""
    for k, (p, q) in enumerate(zip(x, y, strict=True)):
        d = float(np.max(np.abs(p - q))) if p.size else 0.0
        if d > atol:
            return k, d
    return None


def percentile_ms(times: list[float], q: float) -> float:
    return float(np.percentile(times, q)) * 1000


class Suite:
    """Runs every check on one agent; `results` holds them in order."""

    def __init__(self, agent: DuplexAgent, tts: Any, *, seed: int = 0, atol: float = 0.0,
                 reference: bool = False) -> None:
        self.agent, self.tts, self.seed, self.atol, self.reference = agent, tts, seed, atol, reference
        self.results: list[CheckResult] = []
        self.step_s: list[float] = []
        self.batch_step_s: list[float] = []
        self.runs: dict[str, Run] = {}
        self.stim: Stimuli | None = None
        self.reproducible = True

    # -- stepping ----------------------------------------------------------------------------------------------
    def play(self, audio: np.ndarray, prompt: str | None = None, forced: np.ndarray | None = None) -> Run:
        """reset, then one step per frame; every returned frame is checked as it comes back."""
        agent, n, sr = self.agent, self.agent.frame_size, self.agent.sample_rate
        try:
            agent.reset(prompt, self.seed)
        except Exception as err:
            raise Nonconformance(f"reset({'a prompt' if prompt else 'None'}, seed) raised "
                                 f"{type(err).__name__}: {err}") from err
        stream = audio.copy()  # frames are views of it: reading past a frame would see the future
        frames, texts, given = [], [], []
        wall0 = time.perf_counter()
        for k in range(len(audio) // n):
            user = stream[k * n:(k + 1) * n]
            force = forced[k * n:(k + 1) * n] if forced is not None and (k + 1) * n <= len(forced) else None
            t0 = time.perf_counter()
            try:
                out = agent.step(user, None if force is None else force.copy())
            except Exception as err:
                raise Nonconformance(f"step {k} (t={k * n / sr:.2f}s{', forced' if force is not None else ''}) "
                                     f"raised {type(err).__name__}: {err}") from err
            self.step_s.append(time.perf_counter() - t0)
            problem = frame_problem(out, n)
            if problem:
                raise Nonconformance(f"step {k} (t={k * n / sr:.2f}s) {problem}")
            if not np.array_equal(user, audio[k * n:(k + 1) * n]):
                raise Nonconformance(f"step {k} (t={k * n / sr:.2f}s) modified the user frame it was given")
            frames.append(out[0])
            given.append(out[0].copy())
            texts.append(out[1])
            if agent.realtime:  # paced like `duplex-eval run`: one frame per frame duration
                time.sleep(max(0.0, (k + 1) * n / sr - (time.perf_counter() - wall0)))
        changed = [k for k, (f, g) in enumerate(zip(frames, given, strict=True)) if not np.array_equal(f, g)]
        return Run(frames, texts, changed)

    def check(self, name: str, fn: Callable[[], tuple[str, str]]) -> CheckResult:
        try:
            status, reason = fn()
        except Nonconformance as err:
            status, reason = FAIL, str(err)
        except Exception as err:  # a crash in a check is the agent's failure, said in one line
            status, reason = FAIL, f"{type(err).__name__}: {err}"
        result = CheckResult(name, status, reason)
        self.results.append(result)
        return result

    def needs(self, *runs: str) -> str | None:
        missing = [r for r in runs if r not in self.runs]
        return "not run: the stepping it builds on failed (see above)" if missing else None

    # -- the checks ----------------------------------------------------------------------------------------------
    def run_all(self, out_dir: Path | None = None) -> list[CheckResult]:
        declared = self.check("declared", self.declared)
        if declared.status == FAIL and not self.stimuli_possible():
            return self.results
        self.stim = make_stimuli(self.agent.sample_rate, self.agent.frame_size, self.tts)
        for name, fn in [("frames", self.frames), ("reset-determinism", self.determinism),
                         ("reset-isolation", self.isolation), ("causality", self.causality),
                         ("system-prompt", self.system_prompt), ("teacher-forcing", self.teacher_forcing),
                         ("text-output", self.text_output)]:
            self.check(name, fn)
        self.check("episode", lambda: self.episode(out_dir))
        if isinstance(self.agent, BatchedDuplexAgent):
            from eval.conformance_batch import batch_checks

            batch_checks(self)
        self.check("step-time", self.step_time)
        return self.results

    def stimuli_possible(self) -> bool:
        sr, n = getattr(self.agent, "sample_rate", None), getattr(self.agent, "frame_size", None)
        return isinstance(sr, int) and isinstance(n, int) and sr > 0 and n > 0

    def declared(self) -> tuple[str, str]:
        a, problems = self.agent, []
        for attr in ("name", "version"):
            if not isinstance(getattr(a, attr, None), str) or not getattr(a, attr):
                problems.append(f"{attr} must be a non-empty str")
        if not isinstance(a.realtime, bool):
            problems.append(f"realtime must be a bool, got {a.realtime!r}")
        if not self.stimuli_possible():
            problems.append(f"sample_rate and frame_size must be positive ints, got {a.sample_rate!r}, "
                            f"{a.frame_size!r}")
        else:
            if not 8_000 <= a.sample_rate <= 48_000:
                problems.append(f"sample_rate {a.sample_rate} Hz is outside 8-48 kHz")
            if a.frame_size * SESSION_SR % a.sample_rate:
                problems.append(f"a frame of {a.frame_size} samples at {a.sample_rate} Hz is not a whole number of "
                                f"{SESSION_SR} Hz session samples")
            if a.frame_size / a.sample_rate > MAX_FRAME_S:
                problems.append(f"frames of {a.frame_size / a.sample_rate:.3f}s are longer than {MAX_FRAME_S}s")
        caps = getattr(a, "capabilities", None)
        if not isinstance(caps, frozenset | set) or not caps <= CAPABILITIES:
            problems.append(f"capabilities must be a subset of {sorted(CAPABILITIES)}, got {caps!r}")
        elif "gold_cues" in caps and not self.reference:
            problems.append("declares gold_cues, which hands it each case's gold answers: only the harness's "
                            f"reference agents ({', '.join(REFERENCE_AGENTS)}) may")
        if problems:
            return FAIL, "; ".join(problems)
        return PASS, (f"{a.name} v{a.version}: {a.sample_rate} Hz, {a.frame_size}-sample frames "
                      f"({1000 * a.frame_size / a.sample_rate:g} ms), realtime={a.realtime}, capabilities "
                      f"{sorted(caps) or 'none'}")

    def frames(self) -> tuple[str, str]:
        s = self.stim
        assert s is not None
        self.runs["a1"] = self.play(s.a)
        self.runs["silence"] = self.play(np.zeros_like(s.a))
        n, sr = self.agent.frame_size, self.agent.sample_rate
        if changed := self.runs["a1"].changed or self.runs["silence"].changed:
            return FAIL, (f"frame {changed[0]} (t={changed[0] * n / sr:.2f}s) changed after step returned it "
                          f"({len(changed)} frames did): the agent rewrites or reuses arrays it has returned, and a "
                          "recording keeps the array, so it would hold audio produced later; return a new array "
                          "every step")
        n_frames = len(s.a) // n
        peak = max(float(np.max(np.abs(f))) if f.size else 0.0
                   for r in self.runs.values() for f in r.frames)
        note = f"; peak |sample| {peak:.2f} > 1 is clipped in the 16-bit recording" if peak > 1 else ""
        spoke = "silent throughout" if all(r.silent for r in self.runs.values()) else f"peak {peak:.2f}"
        return PASS, (f"2 x {n_frames} steps (speech then silence; digital silence): Frame of "
                      f"({self.agent.frame_size},) float32, finite, input untouched, never changed after return "
                      f"({spoke}){note}")

    def determinism(self) -> tuple[str, str]:
        s = self.stim
        assert s is not None
        if why := self.needs("a1"):
            return SKIP, why
        self.runs["a_after_cut"] = self.after_cut()
        self.runs["b"] = self.play(s.b)
        self.runs["a2"] = self.play(s.a)
        diff = first_difference(self.runs["a1"].frames, self.runs["a2"].frames, self.atol)
        if diff is None:
            return PASS, "the same input after reset with the same seed gave the same samples" + self.trivial("a1")
        self.reproducible = False
        where = self.at(diff)
        if self.agent.realtime:
            return SKIP, (f"realtime agent not sample-reproducible ({where}): a paced service need not be; "
                          "isolation and causality cannot be judged by comparison")
        return FAIL, (f"the same input after reset(seed={self.seed}) gave different output ({where}): "
                      "output must be reproducible with a fixed seed, and no state may survive reset")

    def a_after(self, audio: np.ndarray, prompt: str | None = None, forced: np.ndarray | None = None) -> Run:
        """Input A's run after a run of `audio` (with that prompt or forced audio)."""
        self.play(audio, prompt=prompt, forced=forced)
        return self.play(self.stim.a)  # type: ignore[union-attr]

    def after_cut(self) -> Run:
        """Input A after a case cut off mid-speech, as a failed one is."""
        s = self.stim
        assert s is not None
        return self.a_after(s.b[:s.t_frame * self.agent.frame_size])

    def isolation(self) -> tuple[str, str]:
        if why := self.needs("a_after_cut", "a2"):
            return SKIP, why
        if not self.reproducible:
            return SKIP, "not judged: the agent is not reproducible (reset-determinism)"
        diff = first_difference(self.runs["a_after_cut"].frames, self.runs["a2"].frames, self.atol)
        if diff is None:
            return PASS, ("input A gave the same samples after another case cut off mid-speech as after that case "
                          "played out: no state survives reset" + self.trivial("a2"))
        if why := self.jitter(len(self.runs["a2"].frames), self.runs["a_after_cut"], self.after_cut):
            return SKIP, f"{why}: isolation cannot be judged by comparison"
        return FAIL, (f"state leaks across reset: input A after reset gave different output when the case before "
                      f"was cut off mid-speech than when it played out ({self.at(diff)})")

    def jitter(self, n_frames: int, first: Run, again: Callable[[], Run]) -> str | None:
        """For a realtime agent whose run `first` differed from input A's run `a2`: why it cannot be judged, unless
        both runs reproduce, REALTIME_RERUNS times each -- input A again gives `a2`'s first `n_frames`, and
        `again()` (the run that differed, set up the same way) gives `first`'s. A real leak or look-ahead is
        reproducible and shows every time; a paced service's output moves with the network's and the server's
        timing (a frame that arrives after its step shifts the stream), and a loaded machine can repeat the same
        lateness in one rerun by luck (reset-determinism may have passed by luck too), which must not make jitter
        a FAIL. None when it can be judged."""
        if not self.agent.realtime:
            return None
        for earlier, rerun in ((self.runs["a2"], lambda: self.play(self.stim.a)), (first, again)):  # type: ignore[union-attr]
            for _ in range(REALTIME_RERUNS):
                diff = first_difference(earlier.frames[:n_frames], rerun().frames[:n_frames], self.atol)
                if diff is not None:
                    return f"realtime agent not sample-reproducible on a rerun of the same input ({self.at(diff)})"
        return None

    def causality(self) -> tuple[str, str]:
        s = self.stim
        assert s is not None
        if why := self.needs("a2"):
            return SKIP, why
        if not self.reproducible:
            return SKIP, "not judged: the agent is not reproducible (reset-determinism)"
        self.runs["a_changed"] = self.play(s.a_changed)
        # Strict: the frame played in slot t is heard while user frame t is still being spoken, so it may not
        # depend on it either (docs/adding-a-model.md, "One timing rule").
        t, diff = s.t_frame, self.changed_up_to(s.t_frame, self.runs["a_changed"])
        probes = () if self.agent.realtime else s.more_probes
        for p in probes:
            if diff is not None:
                break
            t, diff = p, self.changed_up_to(p, self.play(np.concatenate([s.a[:p * self.agent.frame_size],
                                                                         s.b[p * self.agent.frame_size:]])))
        t_s = t * self.agent.frame_size / self.agent.sample_rate
        if diff is None:
            where = f"t={t_s:.2f}s" if not probes else f"any of {len(probes) + 1} points of the turn"
            return PASS, (f"user audio changed from {where} on left every output frame up to and including "
                          f"the one played at that point unchanged" + self.trivial("a2"))
        if why := self.jitter(t + 1, self.runs["a_changed"], lambda: self.play(s.a_changed)):
            return SKIP, f"{why}: causality cannot be judged by comparison"
        if diff[0] == t:
            return FAIL, (f"the output frame played at t={t_s:.2f}s changed when only the user audio from t on "
                          f"changed ({self.at(diff)}): the agent answers within the frame it is hearing; a reply "
                          "to user frame t belongs in frame t + 1 or later (docs/adding-a-model.md, "
                          "\"One timing rule\")")
        return FAIL, (f"output before t={t_s:.2f}s changed when only the user audio after t changed "
                      f"({self.at(diff)}): the agent uses audio it has not yet been given")

    def changed_up_to(self, t: int, changed: Run) -> tuple[int, float] | None:
        """The first output frame up to and including `t` where `changed` (input A, then B from frame t on) differs
        from input A's run."""
        return first_difference(self.runs["a2"].frames[:t + 1], changed.frames[:t + 1], self.atol)

    def system_prompt(self) -> tuple[str, str]:
        s = self.stim
        assert s is not None
        if "system_prompt" not in self.agent.capabilities:
            return SKIP, "not declared (benchmarks that need a prompt speak it or skip the case)"
        if why := self.needs("a1"):
            return SKIP, why
        after = self.a_after(s.b, prompt=PROMPT)
        if self.reproducible and "a2" in self.runs:
            diff = first_difference(after.frames, self.runs["a2"].frames, self.atol)
            if diff is not None and (why := self.jitter(len(after.frames), after,
                                                        lambda: self.a_after(s.b, prompt=PROMPT))):
                return SKIP, f"{why}: whether the prompt outlived reset cannot be judged by comparison"
            if diff is not None:
                return FAIL, (f"the prompt outlived reset: input A after reset(None) gave different output after a "
                              f"prompted case ({self.at(diff)})")
        return PASS, "reset took a prompt, stepped cleanly, and reset(None) after it behaved as before"

    def teacher_forcing(self) -> tuple[str, str]:
        s = self.stim
        assert s is not None
        if "teacher_forcing" not in self.agent.capabilities:
            return SKIP, "not declared (M3 Full cases are recorded as skipped)"
        if why := self.needs("a1"):
            return SKIP, why
        n = self.agent.frame_size
        forced = self.play(s.b, forced=s.forced)
        k = len(s.forced) // n
        same = sum(np.array_equal(f, s.forced[i * n:(i + 1) * n]) for i, f in enumerate(forced.frames[:k]))
        after = self.play(s.a)
        if self.reproducible and "a2" in self.runs:
            diff = first_difference(after.frames, self.runs["a2"].frames, self.atol)
            if diff is not None and (why := self.jitter(len(after.frames), after,
                                                        lambda: self.a_after(s.b, forced=s.forced))):
                return SKIP, f"{why}: whether forced audio outlived reset cannot be judged by comparison"
            if diff is not None:
                return FAIL, f"forced audio outlived reset: input A afterwards gave different output ({self.at(diff)})"
        return PASS, (f"{k} forced frames then free running stepped cleanly ({same} of them returned the forced "
                      "audio itself)")

    def text_output(self) -> tuple[str, str]:
        texts = [t for r in self.runs.values() for t in r.texts if t]
        declared = "text_output" in self.agent.capabilities
        if texts and not declared:
            return FAIL, (f"emits text ({len(texts)} frames, e.g. {texts[0][:40]!r}) but does not declare "
                          "text_output")
        if not declared:
            return SKIP, "not declared, and no text emitted"
        return PASS, (f"text is str or None; {len(texts)} frames carried text" if texts else
                      "text is str or None; none emitted on this input (allowed)")

    def episode(self, out_dir: Path | None) -> tuple[str, str]:
        """One whole episode through the real orchestrator (worker-thread stepping, pacing, VAD-driven waits)."""
        from eval.orchestrator import RunOptions, run_episode
        from eval.schedule import EpisodePlan, Play, Silence, TakeTurn
        from metrics.vad import VAD_PRESETS

        s = self.stim
        assert s is not None
        if why := self.needs("a1"):
            return SKIP, why
        if "gold_cues" in self.agent.capabilities:
            return SKIP, "a gold_cues agent is bound to a real case: try `duplex-eval run ... --limit 1`"
        sr = self.agent.sample_rate
        steps = [Silence(seconds_to_samples(LEAD_S, sr)), Play("turn-a", "T", s.speech_a),
                 TakeTurn(endpoint_s=0.8, timeout_s=2.0, cap_s=15.0), Play("turn-b", "N3", s.speech_b),
                 Silence(seconds_to_samples(0.5, sr))]
        plan = EpisodePlan(steps=steps, vad=VAD_PRESETS["mpe"], vad_preset="mpe", protocol={})
        case = _Case("check-adapter", "check", getattr(self.tts, "name", "tts"))
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(out_dir or tmp)
            folder.mkdir(parents=True, exist_ok=True)
            ep = run_episode(self.agent, case, plan, folder, seed=self.seed, options=RunOptions())
        if ep.status != "ok":
            return FAIL, f"the orchestrator recorded the episode as {ep.status}: {ep.failure}"
        return PASS, (f"a {ep.duration_s:.1f}s episode (turn, wait for the reply, turn) ran through run_episode "
                      f"in {ep.wall_s:.2f}s wall")

    def step_time(self) -> tuple[str, str]:
        frame_ms = 1000 * self.agent.frame_size / self.agent.sample_rate
        parts = []
        for what, times, per in [("step", self.step_s, 1), ("step_batch", self.batch_step_s,
                                                            getattr(self.agent, "batch_size", 1))]:
            if times:
                p50, p99 = percentile_ms(times, 50), percentile_ms(times, 99)
                live = "keeps up live" if p99 <= frame_ms else ("keeps up at p50 only" if p50 <= frame_ms
                                                                 else "slower than live")
                parts.append(f"{what} p50 {p50:.2f} ms, p99 {p99:.2f} ms over {len(times)} calls"
                             f"{f' ({per} slots)' if per > 1 else ''}: {live}")
        paced = " (realtime: paced one frame per frame duration; timed is the step call alone)" if \
            self.agent.realtime else ""
        return INFO, f"{'; '.join(parts) or 'no steps timed'} against {frame_ms:g} ms frames{paced}"

    # -- wording ---------------------------------------------------------------------------------------------------
    def at(self, diff: tuple[int, float]) -> str:
        k, d = diff
        return (f"first at frame {k}, t={k * self.agent.frame_size / self.agent.sample_rate:.2f}s, "
                f"max |diff| {d:.3g}{f' > atol {self.atol:g}' if self.atol else ''}")

    def trivial(self, run: str) -> str:
        return " (the agent was silent throughout, so this held trivially)" if self.runs[run].silent else ""


@dataclass(frozen=True)
class _Case:
    case_id: str
    benchmark: str
    tts_backend: str


def close(agent: DuplexAgent) -> tuple[str, str]:
    agent.close()
    return PASS, "close() returned"


def is_reference(agent: DuplexAgent) -> bool:
    cls = type(agent)
    return f"{cls.__module__}:{cls.__qualname__}" in {adapter_target(n) for n in REFERENCE_AGENTS}


def check_agent(agent: DuplexAgent, *, seed: int = 0, atol: float = 0.0, tts: Any = None,
                out_dir: Path | None = None) -> list[CheckResult]:
    """Every check on a built agent (closed afterwards); `tts` defaults to the project's cached piper voice."""
    if tts is None:
        from dataset_builder.tts import get_tts
        from dataset_builder.tts.cache import CachedTTS, default_cache_dir

        tts = CachedTTS(get_tts("piper"), default_cache_dir())
    suite = Suite(agent, tts, seed=seed, atol=atol, reference=is_reference(agent))
    try:
        suite.run_all(out_dir)
    finally:
        suite.check("close", lambda: close(agent))
    return suite.results


def check_adapter(name: str, adapter_args: dict[str, Any] | None = None, **kwargs: Any) -> list[CheckResult]:
    """Build the adapter by registered name or "module:Class" (a UsageError for a wrong name or argument) and check
    it; a constructor that raises is a failed `load` check."""
    from adapters.registry import load_adapter
    from dataset_builder.errors import UsageError

    try:
        agent = load_adapter(name, **(adapter_args or {}))
    except UsageError:
        raise
    except Exception as err:
        return [CheckResult("load", FAIL, f"constructing {name} raised {type(err).__name__}: {err}")]
    return check_agent(agent, **kwargs)


def format_results(results: list[CheckResult]) -> str:
    width = max(len(r.name) for r in results)
    lines = [f"{'check':<{width}}  result  reason"]
    lines += [f"{r.name:<{width}}  {r.status:<6}  {r.reason}" for r in results]
    counts = {s: sum(r.status == s for r in results) for s in (PASS, FAIL, SKIP)}
    lines.append(f"{counts[PASS]} passed, {counts[FAIL]} failed, {counts[SKIP]} skipped")
    return "\n".join(lines)


def failed(results: list[CheckResult]) -> list[CheckResult]:
    return [r for r in results if r.status == FAIL]


def results_json(results: list[CheckResult]) -> list[dict[str, str]]:
    return [asdict(r) for r in results]

