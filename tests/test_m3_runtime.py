"""M3-DuplexBench at run time (docs/benchmarks/m3.md): the user stream of each condition, teacher forcing, skipped
cases, and the oracle's behaviour at each event, on one hand-built two-party dialogue spoken by piper.

The dialogue holds one event of each type (times on the clip clock, which here is the dialogue clock):

    u01 user   "Hi there, ..."                          context
    s01 system "Sure, the new library ..."               context
    u02 user   "That sounds lovely."                     PAUSE: s = its end, t = start of u03, b = its start
    u03 user   "When is it open on the weekend?"         SHIFT: b = its start, s = its end, t = start of s02
    s02 system "It is open from nine to five ..."        the reference reply
    s03 system a long turn, with u04 "Yeah." inside it   BC: s = start of u04, t = its end
    s04 system a long turn, cut 0.9 s after u05 starts   BARGE_IN: s = start of u05, t = its end

Each event's row is the dialogue cut to [0, s + 10 s). The plan's user stream is checked sample for sample against
a stream built here from the rule in DESIGN.md; the oracle's model channel is measured with the project's Silero VAD
under the M3 protocol's settings (segments split at gaps > 0.5 s).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from adapters.oracle import OracleAgent
from adapters.protocol import Frame
from adapters.silent import SilentAgent
from dataset_builder.atomic import round_ms
from dataset_builder.audio import SESSION_SR, read_wav, to_pcm16, wav_bytes
from dataset_builder.benchmark_params import M3Protocol
from dataset_builder.episode import Episode
from dataset_builder.m3.schema import WINDOW_S, M3Case, M3Event, Utterance, cases_of
from eval.orchestrator import run_episode
from eval.plans.m3 import plan, vad_params
from eval.run import finished, outcome
from eval.schedule import Ctx, EpisodePlan, StepScheduler
from metrics.episodes import accounting_flags, load_run_folder, skipped_summary
from metrics.spans import Span
from metrics.vad import SileroVAD
from tests.fake_agents import MimiStyleAgent

MS = SESSION_SR // 1000
EDGE = 1e-3
DIALOGUE_ID = "en-chat-d001"

# (utt id, speaker, kind, text, where): where = ("after", gap_s) after the previous utterance's end, or
# ("into", utt_id, offset_s) that far into another utterance.
SCRIPT: list[tuple[str, str, str, str, tuple[Any, ...]]] = [
    ("u01", "user", "turn", "Hi there, I wanted to ask you about the new library downtown.", ("after", 0.5)),
    ("s01", "system", "turn", "Sure, the new library opened last spring and it has a big reading room.",
     ("after", 0.6)),
    ("u02", "user", "turn", "That sounds lovely.", ("after", 0.7)),
    ("u03", "user", "turn", "When is it open on the weekend?", ("after", 1.6)),
    ("s02", "system", "turn", "It is open from nine to five on Saturdays and Sundays.", ("after", 0.5)),
    ("s03", "system", "turn", "The reading room on the second floor is very quiet, and there is a small cafe next "
     "to the entrance where you can get coffee and cake.", ("after", 1.0)),
    ("u04", "user", "bc", "Yeah.", ("into", "s03", 2.0)),
    ("s04", "system", "turn", "They also run workshops for children every Wednesday afternoon, and in the summer "
     "there are outdoor reading sessions in the park.", ("after", 0.8)),
    ("u05", "user", "turn", "Sorry, do I need a library card for that?", ("into", "s04", 2.0)),
]
BARGE_CUT_AFTER_S = 0.9  # s04 is cut this long after u05 starts (overlap > 0.4 s: a barge-in)


def trim_ms(audio: np.ndarray) -> np.ndarray:
    loud = np.flatnonzero(np.abs(audio) > EDGE)
    audio = audio[loud[0]:loud[-1] + 1]
    return audio[: len(audio) // MS * MS].astype(np.float32)


@dataclass
class Dialogue:
    utts: dict[str, Utterance]
    audio: np.ndarray  # (n, 2): ch0 user, ch1 system

    def row(self, event_id: str, event_type: str, b: float, s: float, t: float, **extra: Any
            ) -> tuple[M3Event, np.ndarray]:
        end = s + WINDOW_S
        utts = tuple(u for u in self.utts.values() if u.start_s < end)
        ev = M3Event(event_id=f"{DIALOGUE_ID}-{event_id}", dialogue_id=DIALOGUE_ID, language="en", domain="chat",
                     event_type=event_type, prompt_start_s=b, event_start_s=s, event_end_s=t,
                     window_end_s=round_ms(end), dialogue_offset_s=0.0, utterances=utts, user_voice="u",
                     system_voice="s", tts_backend="piper", **extra)
        ev.validate()
        n = round(end * SESSION_SR)
        audio = np.zeros((n, 2), np.float32)
        k = min(n, len(self.audio))
        audio[:k] = self.audio[:k]
        return ev, audio


@pytest.fixture(scope="module")
def dialogue(piper) -> Dialogue:
    voices = piper.voices()
    voice = {"user": voices[0], "system": voices[1]}
    placed: dict[str, tuple[int, np.ndarray]] = {}
    utts: dict[str, Utterance] = {}
    cursor = 0
    for uid, speaker, _kind, text, where in SCRIPT:
        clip = trim_ms(piper.synthesize(text, voice[speaker]))
        if where[0] == "after":
            start = cursor + round(where[1] * SESSION_SR)
        else:
            start = placed[where[1]][0] + round(where[2] * SESSION_SR)
        placed[uid] = (start, clip)
        cursor = max(cursor, start + len(clip))
    # The barge-in: the system turn is cut once the user has talked over it for BARGE_CUT_AFTER_S.
    s04_start, s04 = placed["s04"]
    cut = placed["u05"][0] + round(BARGE_CUT_AFTER_S * SESSION_SR) - s04_start
    placed["s04"] = (s04_start, s04[:cut])
    total = max(a + len(x) for a, x in placed.values()) + round(WINDOW_S * SESSION_SR)
    audio = np.zeros((total, 2), np.float32)
    for uid, speaker, kind, text, _ in SCRIPT:
        start, clip = placed[uid]
        audio[start:start + len(clip), 0 if speaker == "user" else 1] = clip
        utts[uid] = Utterance(uid, speaker, kind, text, round_ms(start / SESSION_SR),
                              round_ms((start + len(clip)) / SESSION_SR), cut=uid == "s04")
    assert utts["u04"].end_s - utts["u04"].start_s <= 0.8, "the BC clip must be a BC"
    assert utts["s03"].end_s > utts["u04"].end_s, "the system must talk through the BC"
    return Dialogue(utts, audio)


@pytest.fixture(scope="module")
def events(dialogue: Dialogue) -> dict[str, tuple[M3Event, np.ndarray]]:
    u = dialogue.utts
    return {
        "PAUSE": dialogue.row("e01", "PAUSE", u["u02"].start_s, u["u02"].end_s, u["u03"].start_s),
        "SHIFT": dialogue.row("e02", "SHIFT", u["u03"].start_s, u["u03"].end_s, u["s02"].start_s,
                              question=u["u03"].text, reply=u["s02"].text),
        "BC": dialogue.row("e03", "BC", u["u04"].start_s, u["u04"].start_s, u["u04"].end_s),
        "BARGE_IN": dialogue.row("e04", "BARGE_IN", u["u05"].start_s, u["u05"].start_s, u["u05"].end_s),
    }


class NoModel:
    """The scheduler's view of a model that never speaks (the M3 schedule is fixed and never asks)."""

    speaking = False
    silence_s = float("inf")
    onsets: list[float] = []


def render(p: EpisodePlan, sr: int, n: int) -> np.ndarray:
    """The user stream a plan hands out, frame by frame, exactly as the orchestrator draws it."""
    sched, ctx, out = StepScheduler(p.steps), Ctx(sample=0, sr=sr, model=NoModel()), []
    while not sched.done:
        out.append(sched.fill(n, ctx))
    return np.concatenate(out)


def expected_stream(ev: M3Event, audio: np.ndarray, condition: str, lead: int, frame: int) -> tuple[np.ndarray, int]:
    """The user stream by DESIGN.md's rule, built independently of the plan: (stream without frame padding at the
    end, offset of clip time 0)."""
    s, b, t = (round(x * SESSION_SR) for x in (ev.event_start_s, ev.prompt_start_s, ev.event_end_s))
    w = s + round(WINDOW_S * SESSION_SR)
    user = audio[:w, 0].copy()
    window = np.zeros(w - s, np.float32)
    if t > s:
        window[: t - s] = user[s:t]
    user[s:] = window
    first = b if condition == "none" else 0  # None starts at b: the model never hears C
    pad = (-(lead + s - first)) % frame
    return np.concatenate([np.zeros(lead + pad, np.float32), user[first:]]), lead + pad - first


# --- the user stream ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("frame", [480, 1920])
@pytest.mark.parametrize("greets", [0, 1])
def test_user_stream_per_condition_sample_exact(events, frame: int, greets: int) -> None:
    proto = M3Protocol(greets_first=greets, frame_size=frame)
    for ev, audio in events.values():
        for case in cases_of(ev):
            p = plan(case, audio, proto, SESSION_SR)
            lead = round(proto.lead_silence_s * SESSION_SR) if greets and case.condition != "full" else 0
            want, offset = expected_stream(ev, audio, case.condition, lead, frame)
            got = render(p, SESSION_SR, frame)
            where = f"{case.case_id} frame={frame} greets={greets}"
            assert 0 <= len(got) - len(want) <= frame, where  # the scheduler's closing frame of silence
            np.testing.assert_array_equal(got[:len(want)], want, err_msg=where)
            assert not got[len(want):].any(), where
            s_stream = offset + round(ev.event_start_s * SESSION_SR)
            first = round(ev.prompt_start_s * SESSION_SR) if case.condition == "none" else 0
            assert s_stream % frame == 0 and 0 <= offset + first - lead < frame, where
            # W: the stream ends Δ after s (up to the last frame), and in W only [s, t] carries user audio.
            assert len(want) - s_stream == round(WINDOW_S * SESSION_SR), where
            g = p.gold
            assert g["event_start_s"] == round_ms(s_stream / SESSION_SR), where
            assert g["context_start_s"] == round_ms(offset / SESSION_SR), where
            assert g["prompt_start_s"] == round_ms(offset / SESSION_SR + ev.prompt_start_s), where
            assert g["window_end_s"] == round_ms(g["event_start_s"] + WINDOW_S), where
            assert g["lead_silence_s"] == round_ms(lead / SESSION_SR), where
            assert g["forced_end_s"] == (g["event_start_s"] if case.condition == "full" else 0.0), where
            assert (g["condition"], g["event_type"], p.condition, p.group_id) == (
                case.condition, ev.event_type, case.condition, ev.event_id), where
            assert [c[0] for c in g["context"]] == [u.speaker for u in ev.utterances
                                                    if u.start_s < ev.event_start_s], where
            if case.condition == "full":
                assert p.forced is not None and len(p.forced) == s_stream and p.needs() == {"teacher_forcing"}
                np.testing.assert_array_equal(p.forced[offset:], audio[:s_stream - offset, 1])
                assert not p.forced[:offset].any()
            else:
                assert p.forced is None and not p.needs()


def test_user_stream_differs_where_the_conditions_say(events) -> None:
    """None silences C and plays P; User and Full play the same user audio; W is muted outside the event."""
    ev, audio = events["SHIFT"]
    proto = M3Protocol(frame_size=1920)
    streams = {c.condition: render(plan(c, audio, proto, SESSION_SR), SESSION_SR, 1920) for c in cases_of(ev)}
    np.testing.assert_array_equal(streams["user"], streams["full"])
    off = plan(M3Case(ev, "none"), audio, proto, SESSION_SR).gold["context_start_s"]
    assert off < 0  # None starts at b: clip time 0 lies before the recording
    bn, sn = (round((off + x) * SESSION_SR) for x in (ev.prompt_start_s, ev.event_start_s))
    off_u = plan(M3Case(ev, "user"), audio, proto, SESSION_SR).gold["context_start_s"]
    b, s = (round((off_u + x) * SESSION_SR) for x in (ev.prompt_start_s, ev.event_start_s))
    assert 0 <= bn < 1920 and not streams["none"][:bn].any() and streams["user"][:b].any()  # C only under User
    np.testing.assert_array_equal(streams["none"][bn:sn], streams["user"][b:s])  # P under all three
    assert np.abs(streams["none"][bn:sn]).max() > 0.05
    # After the question, the user's next words in the row (none here) and anything later are muted.
    assert not streams["user"][s:].any()
    bc, bc_audio = events["BC"]
    stream = render(plan(M3Case(bc, "user"), bc_audio, proto, SESSION_SR), SESSION_SR, 1920)
    off = plan(M3Case(bc, "user"), bc_audio, proto, SESSION_SR).gold["context_start_s"]
    s, t = (round((off + x) * SESSION_SR) for x in (bc.event_start_s, bc.event_end_s))
    assert np.abs(stream[s:t]).max() > 0.05 and not stream[t:].any()  # the BC plays; the user's barge-in later doesn't


def test_lead_silence_only_for_greeters_outside_full(events) -> None:
    class Greeter(SilentAgent):
        greets_first = True

    ev, audio = events["SHIFT"]
    base = M3Protocol()
    assert base.for_agent(SilentAgent(frame_size=480)) == replace(base, frame_size=480)
    greeter = base.for_agent(Greeter(frame_size=480))
    assert greeter.greets_first == 1 and greeter.frame_size == 480
    leads = {c.condition: plan(c, audio, greeter, SESSION_SR).gold["lead_silence_s"] for c in cases_of(ev)}
    assert leads == {"none": 5.0, "user": 5.0, "full": 0.0}
    plain = {c.condition: plan(c, audio, base.for_agent(SilentAgent()), SESSION_SR).gold["lead_silence_s"]
             for c in cases_of(ev)}
    assert plain == {"none": 0.0, "user": 0.0, "full": 0.0}


def test_other_agent_rate_keeps_s_on_a_frame(events) -> None:
    """A 16 kHz agent with 20 ms frames: the plan resamples and still puts s on a frame boundary."""
    ev, audio = events["BC"]
    for cond in ("user", "full"):
        p = plan(M3Case(ev, cond), audio, M3Protocol(frame_size=320), 16_000)
        stream = render(p, 16_000, 320)
        s = round(p.gold["event_start_s"] * 16_000)
        assert s % 320 == 0 and 0 <= len(stream) - (s + round(WINDOW_S * 16_000)) <= 320
        if cond == "full":
            assert p.forced is not None and len(p.forced) == s


# --- teacher forcing, and the skip for agents without it ---------------------------------------------------------

def test_teacher_forced_fake_records_the_forced_frames_exactly(events, tmp_path: Path) -> None:
    ev, audio = events["BC"]
    agent = MimiStyleAgent()
    case = M3Case(ev, "full")
    p = plan(case, audio, M3Protocol().for_agent(agent), agent.sample_rate)
    ep = run_episode(agent, case, p, tmp_path)
    assert ep.status == "ok", ep.failure
    assert p.forced is not None
    n_forced = len(p.forced) // agent.frame_size
    assert agent.forced_at == list(range(n_forced))  # every frame before s forced, none after
    pcm, sr = read_wav(tmp_path / f"{case.case_id}.wav")
    raw = np.round(pcm * 32768).astype(np.int16)  # the PCM16 the recording holds
    np.testing.assert_array_equal(raw[:len(p.forced), 1], to_pcm16(p.forced))
    s = len(p.forced)
    assert ep.gold["forced_end_s"] == round_ms(s / SESSION_SR)
    # From s the model runs free: the fake echoes the user stream one frame late.
    np.testing.assert_array_equal(raw[s + agent.frame_size:, 1], raw[s:-agent.frame_size, 0])


def test_agent_without_teacher_forcing_gets_full_cases_skipped(events, tmp_path: Path) -> None:
    ev, audio = events["SHIFT"]
    agent = SilentAgent()
    reasons = []
    for case in cases_of(ev):
        p = plan(case, audio, M3Protocol().for_agent(agent), agent.sample_rate)
        ep = run_episode(agent, case, p, tmp_path)
        assert ep.status == ("skipped" if case.condition == "full" else "ok")
        if ep.status == "skipped":
            reasons.append(ep.failure)
            assert ep.condition == "full" and ep.pair_id == ev.event_id and ep.gold == p.gold
            assert finished(tmp_path, case.case_id) == "skipped"  # a rerun treats it as done
    assert reasons == ["adapter silent lacks teacher_forcing, which this case (full) needs"]
    folder = load_run_folder(tmp_path, "m3")
    assert sorted(e.condition for e in folder.ok) == ["none", "user"]
    assert not folder.failures  # skipped is not a failure ...
    summary = skipped_summary(folder)  # ... but is counted, with its reason
    assert summary == {"n": 1, "reasons": {reasons[0]: 1}, "case_ids": [f"{ev.event_id}-full"]}
    assert accounting_flags({"case_ids": []}, folder.n_episodes, None, folder.skipped) == [
        f"1 case(s) skipped, not scored: {reasons[0]}"]
    code, line = outcome({"cases": 3, "skipped_done": 0, "ok": 2, "failed": 0, "failed_kept": 0, "skipped": 1})
    assert code == 0 and "1 case(s) skipped" in line


def test_forced_audio_must_be_whole_frames(events, tmp_path: Path) -> None:
    ev, audio = events["PAUSE"]
    agent = MimiStyleAgent()
    case = M3Case(ev, "full")
    p = plan(case, audio, M3Protocol().for_agent(agent), agent.sample_rate)
    assert p.forced is not None
    bad = replace(p, forced=p.forced[:-1])
    ep = run_episode(agent, case, bad, tmp_path)
    assert ep.status == "failed" and "whole number" in (ep.failure or "")


def test_full_needs_the_frame_size(events) -> None:
    ev, audio = events["PAUSE"]
    with pytest.raises(ValueError, match="frame size"):
        plan(M3Case(ev, "full"), audio, M3Protocol(), SESSION_SR)


# --- the oracle ----------------------------------------------------------------------------------------------------

def model_spans(tmp_path: Path, ep: Episode) -> list[Span]:
    stereo, _ = read_wav(tmp_path / f"{ep.case_id}.wav")
    return SileroVAD(vad_params(M3Protocol())).spans(stereo[:, 1], SESSION_SR)


@pytest.fixture(scope="module")
def oracle_runs(events, piper, tmp_path_factory) -> dict[tuple[str, str, int], tuple[Episode, list[Span]]]:
    """Every case of the dialogue through the oracle, at 80 ms and 20 ms frames."""
    out = tmp_path_factory.mktemp("m3-oracle")
    runs = {}
    for frame in (1920, 480):
        oracle = OracleAgent(frame_size=frame)
        for ev, audio in events.values():
            for case in cases_of(ev):
                p = plan(case, audio, M3Protocol().for_agent(oracle), oracle.sample_rate)
                folder = out / str(frame)
                folder.mkdir(exist_ok=True)
                ep = run_episode(oracle, case, p, folder)
                assert ep.status == "ok", ep.failure
                runs[(ev.event_type, case.condition, frame)] = (ep, model_spans(folder, ep))
    return runs


def _runs(oracle_runs: dict, event_type: str) -> list[tuple[str, int, Episode, list[Span]]]:
    return [(c, f, ep, sp) for (t, c, f), (ep, sp) in oracle_runs.items() if t == event_type]


def test_oracle_takes_shifts_within_half_a_second(oracle_runs) -> None:
    for cond, frame, ep, spans in _runs(oracle_runs, "SHIFT"):
        s = ep.gold["event_start_s"]
        taken = [sp for sp in spans if sp.start_s >= s - 0.4]
        assert taken, (cond, frame, spans)
        assert s <= taken[0].start_s <= s + 0.5, (cond, frame, taken[0], s)
        if cond != "full":
            assert not [sp for sp in spans if sp.start_s < s - 0.4], (cond, frame, spans)  # silent before
        assert ep.model_text and ep.model_text[0][1] == ep.gold["reply"]


def test_oracle_never_takes_a_pause(oracle_runs) -> None:
    for cond, frame, ep, spans in _runs(oracle_runs, "PAUSE"):
        s, w = ep.gold["event_start_s"], ep.gold["window_end_s"]
        assert not [sp for sp in spans if sp.end_s > s and sp.start_s < w], (cond, frame, spans)


def test_oracle_talks_through_backchannels(oracle_runs) -> None:
    for cond, frame, ep, spans in _runs(oracle_runs, "BC"):
        s, w = ep.gold["event_start_s"], ep.gold["window_end_s"]
        through = [sp for sp in spans if sp.start_s < s < sp.end_s]
        assert through and through[0].end_s >= w - 0.05, (cond, frame, through, w)


def test_oracle_stops_on_barge_in(oracle_runs) -> None:
    for cond, frame, ep, spans in _runs(oracle_runs, "BARGE_IN"):
        s = ep.gold["event_start_s"]
        at_s = [sp for sp in spans if sp.start_s < s < sp.end_s]
        assert at_s, (cond, frame, spans)
        assert at_s[0].end_s <= s + 0.3, (cond, frame, at_s[0], s)
        assert not [sp for sp in spans if sp.start_s >= s], (cond, frame, spans)


def test_oracle_replays_its_context_under_user_and_returns_forced_frames_under_full(oracle_runs, events,
                                                                                  tmp_path: Path) -> None:
    """Before a BC the oracle is speaking at s under User too (it replays the reference system side of C)."""
    ev, audio = events["BC"]
    oracle = OracleAgent(frame_size=1920)
    p = plan(M3Case(ev, "user"), audio, M3Protocol().for_agent(oracle), oracle.sample_rate)
    run_episode(oracle, M3Case(ev, "user"), p, tmp_path)
    stereo, _ = read_wav(tmp_path / f"{ev.event_id}-user.wav")
    s, off = (round(p.gold[k] * SESSION_SR) for k in ("event_start_s", "context_start_s"))
    assert not stereo[:off, 1].any()
    raw = np.round(stereo * 32768).astype(np.int16)  # the PCM16 the recording holds
    np.testing.assert_array_equal(raw[off:s, 1], to_pcm16(audio[:s - off, 1]))
    oracle.reset(None, 0)
    forced = np.full(1920, 0.25, np.float32)
    frame: Frame = oracle.step(np.zeros(1920, np.float32), forced)
    np.testing.assert_array_equal(frame.audio, forced)


def test_silent_says_nothing(events, tmp_path: Path) -> None:
    agent = SilentAgent()
    for ev, audio in events.values():
        for case in cases_of(ev):
            ep = run_episode(agent, case, plan(case, audio, M3Protocol().for_agent(agent), SESSION_SR), tmp_path)
            if ep.status == "ok":
                stereo, _ = read_wav(tmp_path / f"{case.case_id}.wav")
                assert not stereo[:, 1].any()


def test_rows_round_trip_through_the_plan(events) -> None:
    """The builder's row format (dataset_builder/m3/rows.py) carries what the plan needs."""
    from dataset_builder.m3.rows import event_to_row, row_to_event

    ev, audio = events["SHIFT"]
    back = row_to_event(event_to_row(ev, wav_bytes(audio)))
    assert back == ev
    a = plan(M3Case(back, "user"), audio, M3Protocol(frame_size=1920), SESSION_SR).gold
    assert a == plan(M3Case(ev, "user"), audio, M3Protocol(frame_size=1920), SESSION_SR).gold


# --- through the runner ------------------------------------------------------------------------------------------

CONFIG = "m3_chat_en"


@pytest.fixture(scope="module")
def m3_dataset(events, tmp_path_factory) -> Path:
    """The dialogue's four events as a one-shard `m3_chat_en` config, in the builder's row format."""
    from dataset_builder.hf_dataset import write_config
    from dataset_builder.m3.rows import event_to_row, m3_features

    out = tmp_path_factory.mktemp("m3-rows")
    write_config(out, CONFIG, [event_to_row(ev, wav_bytes(audio)) for ev, audio in events.values()], m3_features())
    return out


@pytest.fixture
def m3_registered(monkeypatch: pytest.MonkeyPatch) -> None:
    """M3 as the runner finds it: the registered entry once the integrator adds it, else a stand-in for this test
    with the runtime pieces (rows, protocol, plan); nothing here builds or scores."""
    from dataset_builder import benchmarks

    try:
        benchmarks.benchmark_for_config(CONFIG)
        return
    except benchmarks.UsageError:
        pass
    monkeypatch.setitem(benchmarks._BENCHMARKS, "m3", benchmarks.Benchmark(
        name="m3", title="M3-DuplexBench", configs=(CONFIG,), presets=("mini",),
        protocol="dataset_builder.benchmark_params:M3Protocol", build="-:-", plan="eval.plans.m3:plan", score="-:-",
        tables="-:-", windows="-:-", cases="dataset_builder.m3.rows:list_items",
        case_audio="dataset_builder.m3.rows:iter_items"))


@pytest.mark.parametrize("adapter", ["silent", "cascade", "oracle"])
def test_runner_skips_full_for_agents_without_teacher_forcing(adapter: str, m3_dataset: Path, m3_registered: None,
                                                              tmp_path: Path) -> None:
    from eval.run import RunConfig, run

    # The cascade transcribes every user turn it hears: the PAUSE (all three conditions) and the BC (User, Full)
    # keep it short and still cover None, User and a skipped Full of each kind of event row.
    wanted = [f"{DIALOGUE_ID}-{e}-{c}" for e, c in [("e01", "none"), ("e01", "user"), ("e01", "full"),
                                                   ("e03", "user"), ("e03", "full")]] if adapter == "cascade" else None
    cfg = RunConfig(dataset=str(m3_dataset), adapter=adapter, out=str(tmp_path), config=CONFIG, cases=wanted)
    counts = run(cfg)
    forcing = adapter == "oracle"
    n_full = 2 if wanted else 4
    assert counts["failed"] == 0 and counts["ok"] == counts["cases"] - (0 if forcing else n_full), counts
    assert counts.get("skipped", 0) == (0 if forcing else n_full), counts
    folder = load_run_folder(tmp_path, "m3")
    assert not folder.failures and len(folder.ok) == counts["ok"]
    assert {f.case_id.rsplit("-", 1)[1] for f in folder.skipped} <= {"full"}
    for ep in folder.ok:
        assert ep.params["protocol"]["frame_size"] == 1920 and ep.params["vad"]["merge_gap_ms"] == 500
    again = run(cfg)  # resume: skipped episodes are done, like ok ones
    assert again["ok"] == 0 and again["skipped_done"] == counts["ok"]
    assert again.get("skipped_kept", 0) == counts.get("skipped", 0)
