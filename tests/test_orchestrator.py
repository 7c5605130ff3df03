"""The MPE orchestrator end to end with fake agents of every real shape, on a hand-built case with piper speech.

Each fake is an echo with a known latency, so the recording's alignment is checked exactly: the model channel
must be the user channel delayed by the agent's latency, and rec.json's realised timeline must sit where the user
audio actually is. The scheduler's waits are checked against the protocol's numbers.
"""

from __future__ import annotations

import threading
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from scipy.signal import correlate

from adapters.protocol import DuplexAgent
from dataset_builder.atomic import round_ms
from dataset_builder.audio import SESSION_SR, read_wav
from dataset_builder.benchmark_params import MPEProtocol
from dataset_builder.episode import Episode
from dataset_builder.schema import Case, Clip, Script, Speaker, Turn
from eval.orchestrator import STALL_PREFIX, EpisodeFailure, RunOptions, TimedCall, run_episode
from eval.plans.mpe import plan
from tests.fake_agents import (
    BrokenAgent,
    ChunkedAgent,
    CueTalkerAgent,
    MimiStyleAgent,
    RealtimeAgent,
)

MS = SESSION_SR // 1000  # samples per millisecond on the session clock
EDGE = 1e-3  # clips are trimmed to their first/last sample above this, so "non-zero" marks them exactly

# (turn id, label, speaker, text, gap before); gaps differ so a wrong one would show.
FOUR_TURNS = [
    ("t00", "N3", "Maya", "Hmm, where did I put my keys.", 0.5),
    ("t01", "T", "Liam", "Aria, what is twelve times three?", 0.6),
    ("t02", "N4Q", "Noah", "Aria, can you check the weather?", 0.7),
    ("t03", "N4R", "Maya", "Never mind, it is sunny outside.", 0.8),
]
THREE_TURNS = [
    ("t00", "N3", "Maya", "Okay then.", 0.4),
    ("t01", "T", "Liam", "Aria, what time is it?", 0.4),
    ("t02", "N2", "Noah", "Thanks, Maya.", 0.4),
]


def trim_ms(audio: np.ndarray) -> np.ndarray:
    """Cut to the first/last sample above EDGE and to whole milliseconds, so stored times are exact."""
    loud = np.flatnonzero(np.abs(audio) > EDGE)
    audio = audio[loud[0]:loud[-1] + 1]
    return audio[: len(audio) // MS * MS].astype(np.float32)


def make_case(piper, turns: list[tuple[str, str, str, str, float]], case_id: str) -> tuple[Case, np.ndarray]:
    """A valid explicit MPE case placed on a nominal 24 kHz timeline (preamble, 1 s, then gap + clip per turn)."""
    names = sorted({t[2] for t in turns})
    voices = piper.voices()
    speakers = [Speaker(n, voices[i]) for i, n in enumerate(names)]
    script = Script(
        script_id=case_id, pair_id=case_id, condition="explicit", seed=0,
        attributes={"setting": "kitchen", "activity": "cooking", "relationship": "flatmates",
                    "device_context": "smart speaker", "register": "casual"},
        speakers=speakers, turns=[Turn(tid, spk, text, label, "Aria" if label in ("T", "N4Q") else None)
                                  for tid, label, spk, text, _ in turns],
        question="What is twelve times three?", gold_answer="36", task_type="arithmetic", t_position="early")
    script.validate()
    voice_of = {s.name: s.voice for s in speakers}
    preamble = trim_ms(piper.synthesize("You are Aria.", piper.assistant_voice))
    parts = [preamble, np.zeros(SESSION_SR, np.float32)]
    pos = sum(len(p) for p in parts)
    clips = []
    for tid, _, spk, text, gap in turns:
        audio = trim_ms(piper.synthesize(text, voice_of[spk]))
        pos += round(gap * SESSION_SR)
        clips.append(Clip(tid, round_ms(pos / SESSION_SR), round_ms((pos + len(audio)) / SESSION_SR), gap))
        parts += [np.zeros(round(gap * SESSION_SR), np.float32), audio]
        pos += len(audio)
    parts.append(np.zeros(SESSION_SR, np.float32))
    case = Case(case_id=case_id, benchmark="mpe", script=script, preamble_text="You are Aria.",
                preamble_end_s=round_ms(len(preamble) / SESSION_SR), clips=clips, tts_backend=piper.name)
    case.validate()
    return case, np.concatenate(parts)


@pytest.fixture(scope="module")
def case4(piper) -> tuple[Case, np.ndarray]:
    return make_case(piper, FOUR_TURNS, "hand-4")


@pytest.fixture(scope="module")
def case3(piper) -> tuple[Case, np.ndarray]:
    return make_case(piper, THREE_TURNS, "hand-3")


def run_case(agent: DuplexAgent, case_audio: tuple[Case, np.ndarray], out: Path,
             protocol: MPEProtocol | None = None, options: RunOptions | None = None
             ) -> tuple[Episode, np.ndarray]:
    case, audio = case_audio
    ep_plan = plan(case, audio, protocol or MPEProtocol(), agent.sample_rate)
    ep = run_episode(agent, case, ep_plan, out, options=options or RunOptions())
    stereo, sr = read_wav(out / f"{case.case_id}.wav")
    assert sr == SESSION_SR and stereo.ndim == 2 and stereo.shape[1] == 2
    assert Episode.load(out / f"{case.case_id}.rec.json") == ep  # rec.json holds exactly what was returned
    return ep, stereo


def check_timeline(ep: Episode, user: np.ndarray, frame_s: float) -> None:
    """Every realised clip lies where ch0 is non-zero (edges within one agent frame), and nowhere else is."""
    tol = int(round(frame_s * SESSION_SR))
    nonzero = np.abs(user) > 0
    covered = np.zeros(len(user), bool)
    assert [e.turn_id for e in ep.timeline][0] == "preamble" and len(ep.timeline) == len(ep.gold["labels"]) + 1
    for e in ep.timeline:
        a, b = round(e.start_s * SESSION_SR), round(e.end_s * SESSION_SR)
        inside = np.flatnonzero(nonzero[max(0, a - tol):b + tol]) + max(0, a - tol)
        assert abs(inside[0] - a) <= tol, (e, inside[0] - a)
        assert abs(inside[-1] + 1 - b) <= tol, (e, inside[-1] + 1 - b)
        covered[max(0, a - tol):b + tol] = True
    assert not nonzero[~covered].any(), "user audio outside every realised clip"


def test_mimi_style_echo_is_one_frame_late(case4, tmp_path: Path) -> None:
    agent = MimiStyleAgent()
    ep, stereo = run_case(agent, case4, tmp_path)
    assert ep.status == "ok" and ep.failure is None
    user, model = stereo[:, 0], stereo[:, 1]
    d = agent.frame_size  # 80 ms
    assert np.array_equal(model[d:], user[:-d]) and not model[:d].any()
    check_timeline(ep, user, d / SESSION_SR)
    n_frames = len(user) // d
    assert ep.model_text == [[round_ms(k * d / SESSION_SR), f"f{k}"] for k in range(0, n_frames, 25)]
    assert ep.adapter["capabilities"] == ["teacher_forcing", "text_output"]
    assert ep.duration_s == round_ms(len(user) / SESSION_SR)


def test_mimi_style_teacher_forcing_unit() -> None:
    """The MPE runner never forces; here the protocol's forced path is driven directly."""
    agent = MimiStyleAgent()
    agent.reset(None, 0)
    n = agent.frame_size
    ins = [np.full(n, (k + 1) / 10, np.float32) for k in range(4)]
    forced = np.full(n, -0.5, np.float32)
    outs = [agent.step(ins[0]), agent.step(ins[1], forced), agent.step(ins[2], forced), agent.step(ins[3])]
    assert not outs[0].audio.any() and outs[0].text == "f0"
    assert np.array_equal(outs[1].audio, forced) and np.array_equal(outs[2].audio, forced)
    assert np.array_equal(outs[3].audio, ins[2])  # forcing does not disturb the echo of the input
    assert agent.forced_at == [1, 2] and np.array_equal(agent.history[1], forced)
    agent.reset(None, 0)
    assert agent.history == [] and not agent.step(ins[0]).audio.any()


def test_chunked_16k_agent_one_second_late(case4, tmp_path: Path) -> None:
    agent = ChunkedAgent()
    ep, stereo = run_case(agent, case4, tmp_path)
    assert ep.status == "ok"
    user, model = stereo[:, 0].astype(np.float64), stereo[:, 1].astype(np.float64)
    # Both channels went 16 kHz -> 24 kHz through the resampler: compare by cross-correlation, not samples.
    xc = correlate(model, user, mode="full", method="fft")
    lag = int(np.argmax(xc)) - (len(user) - 1)
    assert abs(lag - round(ChunkedAgent.LATENCY_S * SESSION_SR)) <= MS, lag
    shift = round(ChunkedAgent.LATENCY_S * SESSION_SR)
    resid = model[shift:] - user[:-shift]
    assert np.sum(resid**2) < 1e-6 * np.sum(user**2)  # the whole channel is that echo, not just its peak
    check_timeline(ep, stereo[:, 0], agent.frame_size / agent.sample_rate)


def test_realtime_agent_paced_in_wall_time(case3, tmp_path: Path) -> None:
    # Short waits: this episode runs in real time.
    protocol = MPEProtocol(post_preamble_s=0.2, t_onset_window_s=1.0, tail_s=0.3)
    paced, fast = RealtimeAgent(realtime=True), RealtimeAgent(realtime=False)
    ep_rt, st_rt = run_case(paced, case3, tmp_path / "rt", protocol)
    ep_fast, st_fast = run_case(fast, case3, tmp_path / "fast", protocol)
    assert ep_rt.status == ep_fast.status == "ok"
    d = paced.frame_size * paced.DELAY_FRAMES
    user = st_rt[:, 0]
    assert np.array_equal(st_rt[:, 1][d:], user[:-d]) and not st_rt[:, 1][:d].any()
    check_timeline(ep_rt, user, paced.frame_size / SESSION_SR)
    # Pacing changes when frames are stepped, never what is recorded.
    assert np.array_equal(st_rt, st_fast) and ep_rt.timeline == ep_fast.timeline
    span_rt = paced.step_times[-1] - paced.step_times[0]
    span_fast = fast.step_times[-1] - fast.step_times[0]
    assert span_rt >= 0.9 * ep_rt.duration_s
    assert span_fast < 0.2 * span_rt


@pytest.mark.parametrize("mode, cause", [
    ("raise", "raised"), ("shape", "frame shape"), ("nan", "non-finite"), ("stall", "stalled"), ("reset", "reset"),
])
def test_broken_agent_is_recorded_failed(case4, tmp_path: Path, mode: str, cause: str) -> None:
    agent = BrokenAgent(mode=mode, at_frame=20, stall_s=5.0)
    options = RunOptions(step_timeout_s=0.5) if mode == "stall" else RunOptions()
    try:
        ep, stereo = run_case(agent, case4, tmp_path, options=options)
    finally:
        agent.close()  # releases the stalled step's worker thread
    assert ep.status == "failed" and cause in ep.failure, ep.failure
    if mode == "nan":
        assert "NaN" in ep.failure
    # What was streamed before the failure is kept: the frames before the broken one (none for reset).
    expected_frames = 0 if mode == "reset" else agent.at_frame
    assert len(stereo) == expected_frames * agent.frame_size
    if mode != "reset":
        assert f"t={agent.at_frame * agent.frame_size / SESSION_SR:.3f}s" in ep.failure


def _event(ep: Episode, turn_id: str):
    e = ep.event(turn_id)
    assert e is not None, turn_id
    return e


def test_silent_agent_waits_the_onset_window(case4, tmp_path: Path) -> None:
    from adapters.silent import SilentAgent

    protocol = MPEProtocol()
    case, _ = case4
    agent = SilentAgent()
    ep, _ = run_case(agent, case4, tmp_path, protocol)
    assert ep.status == "ok"
    frame_s = agent.frame_size / SESSION_SR
    t_end, nxt = _event(ep, "t01").end_s, _event(ep, "t02").start_s
    gap = case.clips[2].gap_before_s
    wait = nxt - t_end - gap
    expected = protocol.t_onset_window_s + protocol.vad_min_speech_ms / 1000
    # The wait is checked at frame boundaries: it can end up to one frame after the exact time, never before.
    assert expected - 0.001 <= wait <= expected + frame_s + 0.001, wait
    # N4R after the fixed answering window, to the sample.
    assert _event(ep, "t03").start_s - _event(ep, "t02").end_s == pytest.approx(protocol.n4_answer_window_s,
                                                                                abs=0.0011)
    # Before T, the user stream follows the nominal gaps exactly: no wait depends on the model there.
    assert _event(ep, "t01").start_s - _event(ep, "t00").end_s == pytest.approx(case.clips[1].gap_before_s,
                                                                                abs=0.0011)


def test_scheduler_waits_for_confirmed_silence_and_n4r_is_fixed(case4, speak, tmp_path: Path) -> None:
    protocol = MPEProtocol()
    case, _ = case4
    answer = trim_ms(speak("The answer is thirty six, twelve times three."))
    holding = trim_ms(speak("Sure, let me check the weather for you, one moment please, I am looking it up now."))
    assert 2.0 < len(answer) / SESSION_SR < 4.0
    assert len(holding) / SESSION_SR > protocol.n4_answer_window_s + 1.0  # still talking when N4R starts
    agent = CueTalkerAgent({"t01": answer, "t02": holding}, frame_size=480)
    ep, stereo = run_case(agent, case4, tmp_path, protocol)
    assert ep.status == "ok"
    frame_s = agent.frame_size / SESSION_SR
    t = _event(ep, "t01")
    said = agent.started["t01"] / SESSION_SR
    assert t.end_s <= said <= t.end_s + 2 * frame_s  # the cue arrives one frame late
    speech_end = said + len(answer) / SESSION_SR
    next_start = _event(ep, "t02").start_s - case.clips[2].gap_before_s
    assert next_start - speech_end == pytest.approx(protocol.endpoint_s, abs=0.15)
    # N4R: exactly the answering window after N4Q, although the model is still speaking then.
    q, r = _event(ep, "t02"), _event(ep, "t03")
    assert r.start_s - q.end_s == pytest.approx(protocol.n4_answer_window_s, abs=frame_s)
    held = agent.started["t02"] / SESSION_SR
    assert held < r.start_s < held + len(holding) / SESSION_SR
    at_r = stereo[round(r.start_s * SESSION_SR) - 2400:round(r.start_s * SESSION_SR) + 2400, 1]
    assert np.sqrt(np.mean(at_r**2)) > 0.01  # audibly talking across N4R's onset


def test_protocol_changes_move_the_waits(case4, tmp_path: Path) -> None:
    """The waits follow the protocol object, not constants: a shorter window gives a shorter realised gap."""
    from adapters.silent import SilentAgent

    protocol = replace(MPEProtocol(), t_onset_window_s=2.0, n4_answer_window_s=1.5)
    case, _ = case4
    ep, _ = run_case(SilentAgent(frame_size=480), case4, tmp_path, protocol)
    wait = _event(ep, "t02").start_s - _event(ep, "t01").end_s - case.clips[2].gap_before_s
    assert 2.25 - 0.001 <= wait <= 2.25 + 0.02 + 0.001
    assert _event(ep, "t03").start_s - _event(ep, "t02").end_s == pytest.approx(1.5, abs=0.0011)
    assert ep.params["protocol"]["t_onset_window_s"] == 2.0


def test_timed_call_worker_keeps_order_and_timeouts() -> None:
    """With a step timeout the agent runs in one worker thread: its value or its error comes back, a blocked step
    becomes a stall, and the next step waits behind it and gets its own result, never the abandoned one's."""
    inline = TimedCall(None)
    assert inline(threading.current_thread, t_s=0.0)[0] is threading.current_thread()
    call = TimedCall(0.5)
    try:
        thread, seconds = call(threading.current_thread, t_s=0.0)
        assert thread.name == "agent-step" and thread is not threading.current_thread() and seconds >= 0.0
        assert call(str.upper, "ok", t_s=None)[0] == "OK"
        with pytest.raises(EpisodeFailure, match=r"^reset raised ValueError: bad at t=1\.250s$"):
            call(_raise_value_error, t_s=1.25, what="reset")
        release = threading.Event()
        with pytest.raises(EpisodeFailure, match=f"^{STALL_PREFIX}: no frame within 0.5s at t=2.000s$"):
            call(lambda: release.wait(30) and "late", t_s=2.0)
        release.set()
        assert call(str.lower, "NEXT", t_s=3.0)[0] == "next"  # the late "late" is dropped
        for timed in (call, inline):
            with pytest.raises(EpisodeFailure, match=f"^{STALL_PREFIX}: "):
                timed(_raise_timeout, t_s=None)
    finally:
        call.close()
    with pytest.raises(EpisodeFailure, match="after shutdown"):
        call(str, t_s=None)


def _raise_timeout() -> None:
    raise TimeoutError  # an agent's own timeout reads as a stall, with a timeout set or not


def _raise_value_error() -> None:
    raise ValueError("bad")
