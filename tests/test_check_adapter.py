"""`duplex-eval check-adapter`: passes on every registered adapter (each built as its tests build it), fails with
a clear reason on deliberately broken ones, and the one-file model of docs/adding-a-model.md passes it and runs an
MPE episode.

The broken agents below are importable as "tests.test_check_adapter:<Class>" for the command-line tests. Each is
a small, correct echo with exactly one realistic bug.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from adapters.protocol import Frame
from adapters.registry import adapter_names, load_adapter
from dataset_builder.episode import Episode
from dataset_builder.errors import UsageError
from eval.cli import main
from eval.conformance import FAIL, INFO, PASS, SKIP, CheckResult, check_agent, format_results

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "adapters" / "examples" / "echo_model.py"
TTS_CACHE = REPO / ".cache" / "tts"  # the suite's shared clip cache (conftest)


# -- how each registered adapter is built in tests -------------------------------------------------------------------
# Each registered adapter is checked as its own tests build it: a factory (tmp folder, TTS) -> a context manager
# yielding its constructor arguments, which may start the local fake server it talks to for as long as the check.
Factory = Callable[[Path, Any], contextlib.AbstractContextManager[dict[str, Any]]]
REALTIME_KEY_ENV = "DUPLEX_EVAL_TEST_REALTIME_KEY"


def fixed(**kwargs: Any) -> Factory:
    @contextlib.contextmanager
    def factory(tmp: Path, tts: Any) -> Iterator[dict[str, Any]]:
        yield kwargs

    return factory


def assistant_says(tts: Any, text: str) -> np.ndarray:
    return tts.synthesize(text, tts.assistant_voice)


@contextlib.contextmanager
def fake_minicpm_o(tmp: Path, tts: Any) -> Iterator[dict[str, Any]]:
    import soundfile as sf

    from tests.fake_minicpm_o import FakeMiniCPMODuplex

    voice = tmp / "ref.wav"
    sf.write(voice, assistant_says(tts, "This is how I sound."), 24_000)
    yield {"model": FakeMiniCPMODuplex(voice=assistant_says(tts, "Sure, twelve times three is thirty six.")),
           "ref_audio": str(voice)}


@contextlib.contextmanager
def fake_freeze_omni(tmp: Path, tts: Any) -> Iterator[dict[str, Any]]:
    from tests.fake_freeze_omni import fake_freeze_omni

    yield {"parts": fake_freeze_omni(voice=assistant_says(tts, "Sure, twelve times three is thirty six.")).parts(),
           "device": "cpu"}


@contextlib.contextmanager
def fake_realtime_server(tmp: Path, tts: Any) -> Iterator[dict[str, Any]]:
    from tests.realtime_fake import Behaviour, FakeRealtimeServer

    answer = "Twelve times three is thirty six."
    old = os.environ.get(REALTIME_KEY_ENV)
    os.environ[REALTIME_KEY_ENV] = "sk-test-check-adapter"
    try:
        with FakeRealtimeServer(Behaviour(reply=assistant_says(tts, answer), transcript=answer)) as server:
            yield {"url": server.url, "model": "fake-realtime", "api_key_env": REALTIME_KEY_ENV}
    finally:
        if old is None:
            os.environ.pop(REALTIME_KEY_ENV, None)
        else:
            os.environ[REALTIME_KEY_ENV] = old


@contextlib.contextmanager
def stand_in_server(tts: Any, kind: str) -> Iterator[dict[str, Any]]:
    """The local stand-in of a served model: moshi's /api/chat, or vLLM-Omni's /v1/realtime?duplex=1."""
    answer = "Twelve times three is thirty six."
    if kind == "moshi":
        from tests.moshi_server_fake import FakeMoshiServer, MoshiBehaviour

        with FakeMoshiServer(MoshiBehaviour(reply=assistant_says(tts, answer), transcript=answer)) as server:
            yield {"url": server.url}
        return
    from tests.vllm_omni_fake import FakeVllmOmniServer, vllm_behaviour

    with FakeVllmOmniServer(vllm_behaviour(assistant_says(tts, answer), answer)) as server:
        yield {"url": server.url, "ref_audio": "data:audio/wav;base64,UklGRg=="}


@contextlib.contextmanager
def fake_flm_audio(tmp: Path, tts: Any) -> Iterator[dict[str, Any]]:
    from tests.fake_flm_audio import fake_parts

    yield {"parts": fake_parts(), "device": "cpu"}


@contextlib.contextmanager
def fake_voila(tmp: Path, tts: Any) -> Iterator[dict[str, Any]]:
    from tests.fake_voila import fake_parts

    yield {"parts": fake_parts(), "device": "cpu"}


@contextlib.contextmanager
def fake_f_actor(tmp: Path, tts: Any) -> Iterator[dict[str, Any]]:
    from tests.fake_f_actor import fake_parts

    yield {"parts": fake_parts(), "device": "cpu"}


SETUPS: dict[str, Factory] = {
    "silent": fixed(),
    "oracle": fixed(cache_dir=str(TTS_CACHE)),
    "cascade": fixed(cache_dir=str(TTS_CACHE)),
    "moshi": fixed(tiny=True, batch_size=2),  # two slots, so slot isolation is checked too
    "personaplex": fixed(tiny=True),
    "minicpm-o": fake_minicpm_o,
    "freeze-omni": fake_freeze_omni,
    "openai-realtime": fake_realtime_server,
    "moshi-server": lambda tmp, tts: stand_in_server(tts, "moshi"),
    "vllm-omni-duplex": lambda tmp, tts: stand_in_server(tts, "vllm"),
    "turn-based": fixed(inner="tests.test_turn_based:FixedReply", inner_args='{"min_turn_s": 0.5}'),
    # The Moshi-family presets (adapters/moshi.py PRESETS): PersonaPlex's code path is its own; the others (below)
    # step exactly as `moshi` does on the same tiny random model.
    "moshiko": fixed(tiny=True),
    "moshika": fixed(tiny=True),
    "j-moshi": fixed(tiny=True),
    "llm-jp-moshi": fixed(tiny=True),
    "flm-audio": fake_flm_audio,
    "voila": fake_voila,
    # A fake of Fun-Audio-Chat's library; a short end of turn, so the check's short turns get replies.
    "fun-audio-chat": fixed(parts="tests.fake_fun_audio_chat:fake_parts", end_of_turn_s=0.6),
    "f-actor": fake_f_actor,
}


@contextlib.contextmanager
def built(name: str, tmp: Path, tts: Any) -> Iterator[Any]:
    with SETUPS.get(name, fixed())(tmp, tts) as kwargs:
        try:
            agent = load_adapter(name, **kwargs)
        except UsageError as err:
            if "which is not installed" in str(err):
                pytest.skip(f"{name}: an optional dependency is missing ({err})")
            if name not in SETUPS:
                pytest.fail(f"{name} cannot be built without arguments ({err}): add how its tests build it to "
                            "SETUPS in tests/test_check_adapter.py")
            raise
        except ModuleNotFoundError as err:  # a backend imported in the constructor
            pytest.skip(f"{name}: optional package {err.name!r} is not installed")
        yield agent


def by_name(results: list[CheckResult]) -> dict[str, CheckResult]:
    return {r.name: r for r in results}


def assert_all_pass(results: list[CheckResult]) -> None:
    assert not [r for r in results if r.status == FAIL], format_results(results)


# Presets that change only where `moshi` reads its weights: on the tiny random model each gives `moshi`'s samples
# bit for bit (tests/test_moshi_presets.py checks that for each of them), so `moshi`'s checks are theirs, and the
# suite does not pay four more full runs of the same computation.
SAME_STEPS_AS_MOSHI = ("moshiko", "moshika", "j-moshi", "llm-jp-moshi")


def test_presets_checked_through_moshi_are_moshi_presets_without_prompts() -> None:
    from adapters.moshi import PRESETS, MoshiAgent

    for name in SAME_STEPS_AS_MOSHI:
        agent = load_adapter(name, tiny=True)
        assert isinstance(agent, MoshiAgent) and PRESETS[name].prompts == "none", name


@pytest.mark.parametrize("name", [n for n in adapter_names() if n not in SAME_STEPS_AS_MOSHI])
def test_every_registered_adapter_passes(name: str, tmp_path: Path, tts: Any) -> None:
    with built(name, tmp_path, tts) as agent:
        results = check_agent(agent, tts=tts, out_dir=tmp_path / "episode")
    assert_all_pass(results)
    checks = by_name(results)
    assert checks["step-time"].status == INFO and "p50" in checks["step-time"].reason
    assert checks["frames"].status == PASS and checks["close"].status == PASS
    if name != "oracle":  # gold_cues agents are bound to a real case, so no synthetic episode
        assert checks["episode"].status == PASS, format_results(results)


# -- a correct echo and its broken variants ----------------------------------------------------------------------------
class Echo:
    """Says back what it hears 5 frames (100 ms) later. Correct: every check passes."""

    name = "echo-fake"
    version = "1"
    sample_rate = 24_000
    frame_size = 480
    realtime = False
    capabilities: frozenset[str] = frozenset()
    DELAY = 5

    def __init__(self) -> None:
        self.reset(None, 0)

    def reset(self, system_prompt: str | None, seed: int) -> None:
        self.line = [np.zeros(self.frame_size, np.float32) for _ in range(self.DELAY)]

    def step(self, user_frame: np.ndarray, forced_model_frame: np.ndarray | None = None) -> Frame:
        self.line.append(np.asarray(user_frame, np.float32).copy())
        return Frame(self.line.pop(0))

    def close(self) -> None:
        pass


class WrongFrameSize(Echo):
    """Declares 480-sample frames but returns 20 ms at 16 kHz (320 samples): a resampling slip."""

    def step(self, user_frame: np.ndarray, forced_model_frame: np.ndarray | None = None) -> Frame:
        return Frame(super().step(user_frame).audio[:320])


class LeakyReset(Echo):
    """reset() only reseeds: the delay line (its "cache") is built once, so one case's audio spills into the next."""

    def __init__(self) -> None:
        super().__init__()

    def reset(self, system_prompt: str | None, seed: int) -> None:
        if not hasattr(self, "line"):
            super().reset(system_prompt, seed)


class BuffersAhead(Echo):
    """Looks time-aligned with no latency: it hands out a frame, then, having heard the next user frame, writes
    that into the frame it already returned (its output buffer), so the recording holds audio from the future."""

    def reset(self, system_prompt: str | None, seed: int) -> None:
        self.last: np.ndarray | None = None

    def step(self, user_frame: np.ndarray, forced_model_frame: np.ndarray | None = None) -> Frame:
        if self.last is not None:
            self.last[:] = user_frame
        self.last = np.zeros(self.frame_size, np.float32)
        return Frame(self.last)


class ReadsAhead(Echo):
    """Reads the next frame from the buffer its user frame is a view of: zero latency by peeking."""

    def step(self, user_frame: np.ndarray, forced_model_frame: np.ndarray | None = None) -> Frame:
        whole = user_frame.base if isinstance(user_frame.base, np.ndarray) else user_frame
        start = (user_frame.__array_interface__["data"][0] - whole.__array_interface__["data"][0]) // 4
        ahead = np.zeros(self.frame_size, np.float32)
        nxt = whole[start + self.frame_size:start + 2 * self.frame_size]
        ahead[:len(nxt)] = nxt
        return Frame(ahead)


class SameFrame(Echo):
    """Answers within the frame it is hearing: output frame t is computed from user frame t, as the Moshi family's
    offline loop places it. Live, that reply could only be heard a frame later, so the strict check fails it."""

    DELAY = 0


class SameFrameLate(Echo):
    """Echoes 5 frames late, except from frame 80 (1.6 s, late in the check's spoken turn) on, where it answers within
    the frame it is hearing: a single probe at the middle of the turn would pass it."""

    def reset(self, system_prompt: str | None, seed: int) -> None:
        super().reset(system_prompt, seed)
        self.k = 0

    def step(self, user_frame: np.ndarray, forced_model_frame: np.ndarray | None = None) -> Frame:
        out = super().step(user_frame)
        self.k += 1
        return Frame(np.asarray(user_frame, np.float32).copy()) if self.k > 80 else out


class NaNOutput(Echo):
    """log(0) on digital silence: NaN samples."""

    def step(self, user_frame: np.ndarray, forced_model_frame: np.ndarray | None = None) -> Frame:
        with np.errstate(divide="ignore"):
            level = np.log10(np.mean(user_frame**2))
        return Frame(np.full(self.frame_size, 1e-3 * level, np.float32))


class ForcingRaises(Echo):
    capabilities = frozenset({"teacher_forcing"})

    def step(self, user_frame: np.ndarray, forced_model_frame: np.ndarray | None = None) -> Frame:
        if forced_model_frame is not None:
            raise NotImplementedError("teacher forcing is not wired up yet")
        return super().step(user_frame)


class ClaimsGold(Echo):
    capabilities = frozenset({"gold_cues"})

    def bind_case(self, case: Any) -> None:
        pass

    def cue(self, event: Any) -> None:
        pass


class UndeclaredText(Echo):
    def step(self, user_frame: np.ndarray, forced_model_frame: np.ndarray | None = None) -> Frame:
        return Frame(super().step(user_frame).audio, "hello")


class StickyPrompt(Echo):
    """reset(None) keeps the previous case's prompt, which halves its volume."""

    capabilities = frozenset({"system_prompt"})
    prompt: str | None = None

    def reset(self, system_prompt: str | None, seed: int) -> None:
        super().reset(system_prompt, seed)
        self.prompt = system_prompt or self.prompt

    def step(self, user_frame: np.ndarray, forced_model_frame: np.ndarray | None = None) -> Frame:
        out = super().step(user_frame).audio
        return Frame(out * 0.5 if self.prompt else out)


class Unseeded(Echo):
    """Adds dither from an unseeded generator: no two runs agree."""

    def step(self, user_frame: np.ndarray, forced_model_frame: np.ndarray | None = None) -> Frame:
        noise = np.random.default_rng().normal(0, 1e-4, self.frame_size).astype(np.float32)
        return Frame(super().step(user_frame).audio + noise)


class RealtimeUnseeded(Unseeded):
    realtime = True
    frame_size = 2400  # 100 ms, so the paced runs are few steps


class RealtimeReadsAhead(ReadsAhead):
    """A paced agent that peeks: its runs reproduce each other, so the peek is caught."""

    realtime = True
    frame_size = 2400


class RealtimeLateJitter(Echo):
    """A paced service whose second frame carries codec noise (a reply's packets arriving a step earlier) from
    the causality check's run on, the seventh run of the check: the runs before it agree."""

    realtime = True
    frame_size = 2400
    DELAY = 1

    def __init__(self) -> None:
        super().__init__()
        self.runs = 0  # resets by the check (the constructor's own is not one)

    def reset(self, system_prompt: str | None, seed: int) -> None:
        super().reset(system_prompt, seed)
        self.runs = getattr(self, "runs", -1) + 1
        self.k = 0

    def step(self, user_frame: np.ndarray, forced_model_frame: np.ndarray | None = None) -> Frame:
        out = super().step(user_frame).audio
        self.k += 1
        if self.late(self.runs) and self.k == 2:
            out = out + np.float32(6e-5)
        return Frame(out)

    def late(self, run: int) -> bool:
        return run >= 7


class RealtimeLeakyReset(LeakyReset):
    """A paced agent whose state survives reset: every run reproduces, so the leak is caught."""

    realtime = True
    frame_size = 2400


class RealtimeOneLateRun(RealtimeLateJitter):
    """A paced service whose run after the cut-off case alone (the check's fourth run) caught a packet a step late:
    input A once more reproduces the earlier run, so only a rerun of the cut-off case shows it was timing."""

    def late(self, run: int) -> bool:
        return run == 4


class RealtimeLateAgain(RealtimeLateJitter):
    """A paced service late in the causality check's run and again, by chance, two runs later (a loaded machine
    can repeat the same lateness): input A's first rerun and the changed input's first rerun would agree with the
    runs before them, so only a second rerun shows it was timing."""

    def late(self, run: int) -> bool:
        return run in (7, 9)


@pytest.fixture
def unpaced(monkeypatch: pytest.MonkeyPatch) -> None:
    """What the check decides of a realtime fake does not depend on wall-clock pacing (the fakes' jitter is
    planted, not timed), so these runs skip the sleeps; `test_realtime_agents_are_paced...` keeps them."""
    import eval.conformance
    import eval.orchestrator

    clock = SimpleNamespace(**{k: getattr(time, k) for k in dir(time) if not k.startswith("_")})
    clock.sleep = lambda _seconds: None
    for module in (eval.conformance, eval.orchestrator):
        monkeypatch.setattr(module, "time", clock)


@pytest.fixture(scope="module")
def tts() -> Any:
    from dataset_builder.tts import get_tts
    from dataset_builder.tts.cache import CachedTTS

    return CachedTTS(get_tts("piper"), TTS_CACHE)


def test_a_correct_echo_passes_every_check(tts: Any) -> None:
    results = check_agent(Echo(), tts=tts)
    assert_all_pass(results)
    checks = by_name(results)
    for name in ("declared", "frames", "reset-determinism", "reset-isolation", "causality", "episode"):
        assert checks[name].status == PASS, format_results(results)
        assert "trivially" not in checks[name].reason  # it spoke, so the comparisons compared something
    for name in ("system-prompt", "teacher-forcing", "text-output"):
        assert checks[name].status == SKIP and "not declared" in checks[name].reason


BROKEN: list[tuple[Callable[[], Any], str, str]] = [
    (WrongFrameSize, "frames", r"step 0 \(t=0\.00s\) returned audio of shape \(320,\), expected \(480,\)"),
    (LeakyReset, "reset-isolation", r"state leaks across reset: input A .*first at frame 0,"),
    (BuffersAhead, "frames", r"frame \d+ \(t=\d\.\d\ds\) changed after step returned it \(\d+ frames did\)"),
    (BuffersAhead, "causality", r"output before t=\d\.\d\ds changed when only the user audio after t changed"),
    (ReadsAhead, "causality", r"output before t=.* the agent uses audio it has not yet been given"),
    (SameFrame, "causality", r"the output frame played at t=\d\.\d\ds changed .* answers within the frame it is "
                             r"hearing; a reply to user frame t belongs in frame t \+ 1"),
    (SameFrameLate, "causality", r"the output frame played at t=1\.\d\ds changed .* answers within the frame"),
    (NaNOutput, "frames", r"non-finite samples \(NaN/inf\)"),
    (ForcingRaises, "teacher-forcing", r"step 0 \(t=0\.00s, forced\) raised NotImplementedError: teacher forcing"),
    (ClaimsGold, "declared", r"declares gold_cues, .* only the harness's reference agents"),
    (UndeclaredText, "text-output", r"emits text .*'hello'.* but does not declare text_output"),
    (StickyPrompt, "system-prompt", r"the prompt outlived reset"),
    (Unseeded, "reset-determinism", r"the same input after reset\(seed=0\) gave different output"),
]


@pytest.mark.parametrize(("cls", "check", "reason"), BROKEN, ids=[f"{c.__name__}-{k}" for c, k, _ in BROKEN])
def test_broken_agents_fail_the_check_that_names_their_bug(cls: Callable[[], Any], check: str, reason: str,
                                                           tts: Any) -> None:
    results = check_agent(cls(), tts=tts)
    result = by_name(results)[check]
    assert result.status == FAIL, format_results(results)
    assert re.search(reason, result.reason), result.reason


def test_a_broken_frame_stops_the_checks_that_would_repeat_it(tts: Any) -> None:
    checks = by_name(check_agent(WrongFrameSize(), tts=tts))
    assert [n for n, r in checks.items() if r.status == FAIL] == ["frames"]
    for name in ("reset-determinism", "reset-isolation", "causality", "episode"):
        assert checks[name].status == SKIP and "failed" in checks[name].reason


def test_unreproducible_agent_is_not_judged_on_isolation_or_causality(tts: Any) -> None:
    checks = by_name(check_agent(Unseeded(), tts=tts))
    for name in ("reset-isolation", "causality"):
        assert checks[name].status == SKIP and "not reproducible" in checks[name].reason


@pytest.mark.parametrize(("check", "at_fault", "jittery", "fault"), [
    ("causality", RealtimeReadsAhead, RealtimeLateJitter, "the agent uses audio it has not yet been given"),
    ("reset-isolation", RealtimeLeakyReset, RealtimeOneLateRun, "state leaks across reset"),
    ("causality", RealtimeReadsAhead, RealtimeLateAgain, "the agent uses audio it has not yet been given"),
])
def test_a_realtime_agent_fails_a_comparison_only_when_both_runs_reproduce(check: str, at_fault: type, jittery: type,
                                                                          fault: str, tts: Any, unpaced: None) -> None:
    caught = by_name(check_agent(at_fault(), tts=tts))[check]
    assert caught.status == FAIL and fault in caught.reason
    results = check_agent(jittery(), tts=tts)
    checks = by_name(results)
    assert checks["reset-determinism"].status == PASS, format_results(results)
    assert checks[check].status == SKIP, format_results(results)
    assert "not sample-reproducible on a rerun of the same input" in checks[check].reason


def test_realtime_agents_are_paced_and_need_not_be_reproducible(tts: Any) -> None:
    agent = RealtimeUnseeded()
    started: list[float] = []
    step = agent.step

    def timed(user_frame: np.ndarray, forced_model_frame: np.ndarray | None = None) -> Frame:
        import time

        started.append(time.perf_counter())
        return step(user_frame, forced_model_frame)

    agent.step = timed  # type: ignore[method-assign]
    results = check_agent(agent, tts=tts)
    assert_all_pass(results)
    checks = by_name(results)
    assert checks["reset-determinism"].status == SKIP and "realtime agent not sample-reproducible" in checks[
        "reset-determinism"].reason
    assert "realtime: paced one frame per frame duration" in checks["step-time"].reason
    # Pacing is a lower bound: step k of a run starts no earlier than k frame durations after step 0.
    n_steps = int(re.search(r"2 x (\d+) steps", checks["frames"].reason).group(1))  # type: ignore[union-attr]
    first_run = started[:n_steps]
    assert first_run[-1] - first_run[0] >= (n_steps - 2) * agent.frame_size / agent.sample_rate


# -- batched agents ----------------------------------------------------------------------------------------------
class BatchEcho(Echo):
    """Echo with `batch_size` independent slots; `reset`/`step` are slot 0 (a batch of one). Teacher forcing
    returns the forced frame and puts it in the delay line's place."""

    capabilities = frozenset({"teacher_forcing"})
    batch_size = 3

    def reset(self, system_prompt: str | None, seed: int) -> None:
        self.lines = [self.fresh() for _ in range(self.batch_size)]

    def fresh(self) -> list[np.ndarray]:
        return [np.zeros(self.frame_size, np.float32) for _ in range(self.DELAY)]

    def reset_slot(self, slot: int, system_prompt: str | None, seed: int) -> None:
        self.lines[slot] = self.fresh()

    def tick(self, slot: int, user: np.ndarray, forced: np.ndarray | None) -> Frame:
        self.lines[slot].append(np.asarray(user, np.float32).copy())
        out = self.lines[slot].pop(0)
        return Frame(out if forced is None else np.asarray(forced, np.float32).copy())

    def step(self, user_frame: np.ndarray, forced_model_frame: np.ndarray | None = None) -> Frame:
        return self.tick(0, user_frame, forced_model_frame)

    def step_batch(self, user_frames: np.ndarray, forced: np.ndarray | None = None,
                   forced_mask: np.ndarray | None = None) -> list[Frame]:
        mask = np.ones(self.batch_size, bool) if forced_mask is None else forced_mask
        return [self.tick(i, user_frames[i], forced[i] if forced is not None and mask[i] else None)
                for i in range(self.batch_size)]


class BatchPeakNormalised(BatchEcho):
    """Normalises loudness over the whole batch instead of per slot: each slot hears its neighbours."""

    def step_batch(self, user_frames: np.ndarray, forced: np.ndarray | None = None,
                   forced_mask: np.ndarray | None = None) -> list[Frame]:
        frames = super().step_batch(user_frames / max(1.0, 4 * float(np.max(np.abs(user_frames)))), forced,
                                    forced_mask)
        return frames


class BatchResetsAll(BatchEcho):
    def reset_slot(self, slot: int, system_prompt: str | None, seed: int) -> None:
        self.reset(system_prompt, seed)


class BatchIgnoresMask(BatchEcho):
    def step_batch(self, user_frames: np.ndarray, forced: np.ndarray | None = None,
                   forced_mask: np.ndarray | None = None) -> list[Frame]:
        return super().step_batch(user_frames, forced, None)


def test_a_correct_batched_agent_passes_the_batch_checks(tts: Any) -> None:
    results = check_agent(BatchEcho(), tts=tts)
    assert_all_pass(results)
    checks = by_name(results)
    for name in ("batch-frames", "batch-equals-single", "batch-slot-isolation", "batch-reset-slot",
                 "batch-forced-mask"):
        assert checks[name].status == PASS, format_results(results)
    assert "step_batch p50" in checks["step-time"].reason and "(3 slots)" in checks["step-time"].reason


BATCH_BROKEN: list[tuple[Callable[[], Any], str, str]] = [
    (BatchPeakNormalised, "batch-slot-isolation", r"its output changed with what the other slots heard"),
    (BatchPeakNormalised, "batch-equals-single", r"slot 0 .* differs from the same input and seed stepped one at"),
    (BatchResetsAll, "batch-reset-slot", r"reset_slot\(2\) changed slot 0's output"),
    (BatchIgnoresMask, "batch-forced-mask", r"slot 0 was masked off from forcing but its output changed"),
]


@pytest.mark.parametrize(("cls", "check", "reason"), BATCH_BROKEN,
                         ids=[f"{c.__name__}-{k}" for c, k, _ in BATCH_BROKEN])
def test_broken_batched_agents_fail_with_their_reason(cls: Callable[[], Any], check: str, reason: str,
                                                      tts: Any) -> None:
    results = check_agent(cls(), tts=tts)
    result = by_name(results)[check]
    assert result.status == FAIL, format_results(results)
    assert re.search(reason, result.reason), result.reason


# -- the command -------------------------------------------------------------------------------------------------
def test_command_exits_non_zero_and_prints_the_table(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out = tmp_path / "results.json"
    assert main(["check-adapter", "tests.test_check_adapter:LeakyReset", "--json", str(out)]) == 1
    printed = capsys.readouterr().out
    assert re.search(r"^reset-isolation\s+FAIL\s+state leaks across reset", printed, re.M), printed
    assert re.search(r"^\d+ passed, [1-9]\d* failed, \d+ skipped$", printed, re.M), printed
    stored = {r["name"]: r for r in json.loads(out.read_text())}
    assert stored["reset-isolation"]["status"] == FAIL


def test_command_passes_adapter_args_and_keeps_the_episode(capsys: pytest.CaptureFixture[str],
                                                           tmp_path: Path) -> None:
    code = main(["check-adapter", "adapters.examples.echo_model:EchoModel", "--adapter-arg", "end_of_turn_s=0.4",
                 "--out", str(tmp_path)])
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert re.search(r"^0 failed|, 0 failed,", printed, re.M)
    assert Episode.load(tmp_path / "check-adapter.rec.json").status == "ok"
    assert main(["check-adapter", "adapters.examples.echo_model:EchoModel", "--adapter-arg", "nope=1"]) == 2


class NoWeights(Echo):
    def __init__(self) -> None:
        raise FileNotFoundError("checkpoints/model.safetensors")


def test_command_reports_a_constructor_that_raises_and_refuses_a_non_agent(capsys: pytest.CaptureFixture[str]
                                                                           ) -> None:
    assert main(["check-adapter", "tests.test_check_adapter:NoWeights"]) == 1
    assert re.search(r"^load\s+FAIL\s+constructing .*NoWeights raised FileNotFoundError: checkpoints/",
                     capsys.readouterr().out, re.M)
    assert main(["check-adapter", "adapters.base:SpeechQueue"]) == 2
    assert "does not implement the DuplexAgent protocol" in capsys.readouterr().err


# -- the documented one-file model (docs/adding-a-model.md) ------------------------------------------------------------
def readme_section() -> str:
    text = (REPO / "docs" / "adding-a-model.md").read_text()
    start = text.index("## Add your model in one file")
    end = re.compile(r"^#{2,3} ", re.M).search(text, start + 10)
    return text[start:end.start() if end else None]


def test_the_worked_example_is_one_file_under_50_lines_shown_verbatim_in_the_docs() -> None:
    source = EXAMPLE.read_text()
    assert len(source.splitlines()) < 50
    section = readme_section()
    block = re.search(r"<!-- readme-test: file echo_model\.py -->\n```python\n(.*?)```\n", section, re.S)
    assert block is not None, "docs/adding-a-model.md shows the file with a `readme-test: file echo_model.py` mark"
    assert block.group(1) == source, "the docs' copy of the example has drifted from adapters/examples/"


def test_the_worked_example_runs_as_the_docs_show_from_an_empty_folder(tmp_path: Path,
                                                                          mini_dataset: Path) -> None:
    """Every block of the docs' subsection, in order, from an empty folder holding only data/mpe-mini."""
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "mpe-mini").symlink_to(mini_dataset)
    bindir = Path(sys.executable).parent
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {
        "PATH": f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}", "HF_HUB_OFFLINE": "1"}
    section = readme_section()
    ran = []
    for m in re.finditer(r"(?:<!-- readme-test: (\w+):? ?(.*?) -->\n)?```(bash|python)\n(.*?)```\n", section, re.S):
        mark, arg, lang, code = m.groups()
        if mark == "file":
            (tmp_path / arg).write_text(code)
            continue
        assert mark is None and lang == "bash", f"unexpected block in the subsection: {m.group(0)[:80]}"
        proc = subprocess.run(["bash", "-euo", "pipefail", "-c", code], cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=900)
        assert proc.returncode == 0, f"{code}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        ran.append(proc.stdout)
    assert any(re.search(r"^\d+ passed, 0 failed", out, re.M) for out in ran), ran
    episodes = [Episode.load(p) for p in (tmp_path / "echo-run").glob("*.rec.json")]
    assert len(episodes) == 1 and episodes[0].status == "ok" and episodes[0].adapter["name"] == "echo-model"
    from dataset_builder.audio import read_wav

    stereo, _ = read_wav(tmp_path / "echo-run" / f"{episodes[0].case_id}.wav")
    assert np.max(np.abs(stereo[:, 1])) > 0.05, "the echo model answered in the episode"
