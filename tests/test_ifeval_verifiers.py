"""Known-answer tests of the nine DSB-IFEval verifiers (docs/benchmarks/ifeval.md, App. E.2-E.5).

Part 1 measures hand-placed spans (no VAD) on cases built through the data contract, so every boundary is exact
to the millisecond: each threshold on both sides, over-talk that already holds the floor, a backchannel vs a
floor-take, readback coverage 0.89 vs 0.90. Part 2 scores hand-built two-channel recordings (real piper speech on
both channels at chosen times) with the real Silero VAD and whisper ASR; there every timing sits >= 0.3 s clear
of the threshold it is tested against. Part 3 checks the "ifeval" VAD preset's own numbers.
"""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

from dataset_builder.audio import SESSION_SR
from metrics.ifeval.measure import measure_case
from metrics.ifeval.score import score_run
from metrics.ifeval.verdicts import Thresholds, passes, vad_label
from metrics.spans import Span
from metrics.vad import VAD_PRESETS, VADParams, _SpanTracker
from tests import ifeval_handmade as H

C1 = "My car broke down on the highway <pause:3.5s> and I am not sure what to do now."
C4 = "He bumped his head on the table <check:are you still with me?> <pause:1.5s> and now he seems fine."
R3A = ("I am at forty two Oak Street <trigger:no wait, it is forty two Elm Street> near the old church by the "
       "river.")
C2 = ("The number is <chunk:five five five> <chunk_gap:1.2s> <chunk:two oh one> <chunk_gap:1.2s> "
      "<chunk:four eight seven three> and that is my cell.")
C3 = "<barge_in:Sorry, she says her neck hurts when she looks down.>"
TARGET = "555-201-4873"


# --- part 1: exact spans ------------------------------------------------------------------------------------

def _one_second(text: str) -> np.ndarray:
    """Every user speech segment lasts exactly 1 s, so windows fall on round numbers."""
    return np.zeros(SESSION_SR, np.float32)


def _case(role: str, probe: str, markup: str, action: str, event: str, level: str = "L1", **kw) -> H.Built:
    return H.build(_one_second, role, probe, level, markup, action, event, **kw)


def _measure(b: H.Built, model: list[tuple[float, float]], user: list[tuple[float, float]] | None = None,
             readback: tuple[str, str] | None = None) -> dict:
    return measure_case(b.case_id, b.gold, (b.t2_start, b.t2_end), b.duration,
                        [Span(a, z) for a, z in model], [Span(a, z) for a, z in (user or [])], readback)


def test_windows_follow_the_contract() -> None:
    """t1 0.5-1.5 s, 3 s gap: turn 2 starts at 4.5 s; each window is placed from the realised t2 start."""
    b = _case("R3", "C1", C1, "TAKE_TURN", "pause")
    assert (b.t2_start, b.w0, b.w1) == (4.5, 5.5, 9.0)  # [pause start, pause end]
    b = _case("R1", "C4", C4, "BACKCHANNEL", "check")
    assert (b.w0, b.w1) == (5.5, 8.0)  # [check phrase start, end of its pause]
    b = _case("R3", "R3_A", R3A, "INTERRUPT", "trigger")
    assert (b.w0, b.w1) == (6.5, 9.0)  # [trigger end, + 2.5 s]
    b = _case("R3", "C2", C2, "READBACK", "dictation", readback_target=TARGET)
    assert (b.w0, b.w1) == (5.5, b.duration)  # [first chunk, end of recording]
    b = _case("R1", "C3", C3, "YIELD", "barge")
    assert (b.w0 - b.t2_start, b.w1 - b.t2_start) == (0.0, 3.0)


@pytest.mark.parametrize(("role", "onset", "ok"), [
    ("R8", 0.8, True), ("R8", 0.801, False), ("R6", 1.2, True), ("R6", 1.201, False),
    ("R3", 1.5, True), ("R3", 1.501, False), ("R1", 2.0, True), ("R1", 2.001, False),
])
def test_take_turn_wait_per_role(role: str, onset: float, ok: bool) -> None:
    b = _case(role, "C1", C1, "TAKE_TURN", "pause")
    m = _measure(b, [(b.w0 + onset, b.w0 + onset + 2.0)])
    assert m["genuine_onset_s"] == onset and passes(m) is ok


def test_over_talk_holding_the_floor_is_not_a_genuine_onset() -> None:
    """Speech carried into the window (started before w0) is no onset: TAKE_TURN fails, LISTEN passes."""
    tt = _case("R3", "C1", C1, "TAKE_TURN", "pause")
    m = _measure(tt, [(tt.w0 - 1.0, tt.w0 + 2.0)])
    assert m["carried_in"] == [tt.w0 - 1.0, tt.w0 + 2.0] and m["n_onsets"] == 0 and m["genuine_onset_s"] is None
    assert not passes(m)
    li = _case("R2", "C1", C1, "LISTEN", "pause", level="L2")
    m = _measure(li, [(li.w0 - 1.0, li.w0 + 2.0)])
    assert passes(m) and m["vad_label"] == "silent"
    # the same speech starting exactly at w0 is a genuine onset at 0.0; one starting at w1 is outside
    m = _measure(tt, [(tt.w0, tt.w0 + 2.0)])
    assert m["genuine_onset_s"] == 0.0 and passes(m)
    assert not passes(_measure(li, [(li.w0, li.w0 + 0.2)]))
    assert passes(_measure(li, [(li.w1, li.w1 + 1.0)]))


@pytest.mark.parametrize(("role", "latency", "ok"), [
    ("R3", 1.2, True), ("R3", 1.201, False), ("R6", 1.2, True), ("R6", 1.201, False),
    ("R1", 1.5, True), ("R1", 1.501, False), ("R5", 1.5, True), ("R5", 1.501, False),
])
def test_interrupt_latency_per_role(role: str, latency: float, ok: bool) -> None:
    probe = f"{role}_A"
    b = _case(role, probe, R3A, "INTERRUPT", "trigger")
    m = _measure(b, [(b.w0 + latency, b.w0 + latency + 1.5)])
    assert passes(m) is ok
    assert not passes(_measure(b, []))  # a silent model never interrupts
    assert not passes(_measure(b, [(b.w0 - 0.5, b.w0 + 2.0)]))  # already talking: not a cut-in


@pytest.mark.parametrize(("offset", "yield_ok"), [(0.6, True), (0.601, False), (0.0, True), (2.9, False)])
def test_yield_and_continue_600_ms(offset: float, yield_ok: bool) -> None:
    y = _case("R1", "C3", C3, "YIELD", "barge")
    c = _case("R7", "C3", C3, "CONTINUE", "barge", level="L2")
    for b, want in ((y, yield_ok), (c, not yield_ok)):
        m = _measure(b, [(b.w0 - 3.0, b.w0 + offset)])
        assert m["first_offset_s"] == offset and passes(m) is want


def test_continue_needs_the_floor_at_the_barge_in() -> None:
    """A model that was not speaking when the user barged in did not continue anything: silent fails CONTINUE."""
    c = _case("R7", "C3", C3, "CONTINUE", "barge", level="L2")
    assert not passes(_measure(c, []))
    assert not passes(_measure(c, [(c.w0 + 0.2, c.w0 + 4.0)]))  # started after the barge-in
    assert passes(_measure(c, [(c.w0 - 3.0, c.w0 + 4.0)]))  # held on through it


def test_yield_needs_an_offset() -> None:
    y = _case("R1", "C3", C3, "YIELD", "barge")
    silent = _measure(y, [])
    assert silent["first_offset_s"] is None and not passes(silent)
    # still talking when the recording ends: no offset, not a yield
    to_end = _measure(y, [(y.w0 - 3.0, y.duration)])
    assert to_end["speaking_at_end"] and to_end["first_offset_s"] is None and not passes(to_end)
    # the first offset at or after w0 counts, even of a span that starts after w0 (App. E.4)
    later = _measure(y, [(y.w0 - 3.0, y.w0 - 0.5), (y.w0 + 0.1, y.w0 + 0.4)])
    assert later["first_offset_s"] == 0.4 and passes(later)


def test_backchannel_vs_floor_take() -> None:
    b = _case("R1", "C4", C4, "BACKCHANNEL", "check")
    pause0 = b.seg("pause")[0]
    short = _measure(b, [(pause0 + 0.2, pause0 + 0.2 + 0.999)])
    assert short["vad_label"] == "backchannel" and short["user_resumes"] and passes(short)
    at_ceiling = _measure(b, [(pause0 + 0.2, pause0 + 1.2)])  # shorter than 1.0 s is required: 1.0 is not
    assert at_ceiling["vad_label"] == "floor_take" and not passes(at_ceiling)
    assert passes(at_ceiling, Thresholds(bc_ceiling_s=1.2))  # the ceiling is a threshold, not a measurement
    two = _measure(b, [(pause0 + 0.1, pause0 + 0.4), (pause0 + 0.9, pause0 + 1.2)])
    assert two["n_onsets"] == 2 and two["vad_label"] == "backchannel" and not passes(two)  # count <= 1
    none = _measure(b, [])
    assert none["vad_label"] == "silent" and not passes(none)  # count >= 1
    long = _measure(b, [(pause0 + 0.2, pause0 + 3.0)])
    assert long["vad_label"] == "floor_take" and not passes(long)


def test_backchannel_needs_the_user_to_resume() -> None:
    b = _case("R1", "C4", C4, "BACKCHANNEL", "check")
    m = _measure(b, [(b.seg("pause")[0] + 0.2, b.seg("pause")[0] + 0.6)])
    assert m["user_resumes_at_s"] == b.seg("pause")[1]
    assert vad_label(m | {"user_resumes": False}, 1.0) == "floor_take"
    assert not passes(m | {"user_resumes": False})


def test_no_backchannel_and_listen() -> None:
    b = _case("R4", "C4", C4, "NO_BACKCHANNEL", "check", level="L2")
    assert passes(_measure(b, []))
    assert not passes(_measure(b, [(b.w0 + 2.0, b.w0 + 2.3)]))
    assert passes(_measure(b, [(b.w1, b.w1 + 0.3)]))  # after the window
    assert passes(_measure(b, [(b.w0 - 0.5, b.w0 + 0.3)]))  # carried in, not started in the window


def test_accept_overlap() -> None:
    b = _case("R8", "C3", C3, "ACCEPT_OVERLAP", "barge")
    user = [(b.w0, b.w0 + 2.0)]
    assert _measure(b, [(b.w0 - 2.0, b.w0 + 0.001)], user)["overlap_s"] == 0.001
    assert passes(_measure(b, [(b.w0 - 2.0, b.w0 + 0.001)], user))
    m = _measure(b, [(b.w0 - 2.0, b.w0)], user)
    assert m["overlap_s"] == 0.0 and not passes(m)  # stopped exactly as the user came in
    m = _measure(b, [(b.w0 - 2.0, b.w0 + 2.5)], user)
    assert m["overlap_s"] == 2.0 and passes(m)  # overlap counted inside the window only, with user speech only


def test_readback_coverage_boundary() -> None:
    """Coverage 0.90 passes, 0.89 fails (100 target digits; the transcript drops 10 or 11 of them)."""
    target = "0123456789" * 10
    b = _case("R3", "C2", C2, "READBACK", "dictation", readback_target=target)
    b.gold["readback_target"] = target
    digits = list(target)
    for dropped, ok in ((10, True), (11, False)):
        said = " ".join(digits[dropped:])
        m = _measure(b, [], readback=("model_text", said))
        assert m["readback"]["coverage"] == pytest.approx((100 - dropped) / 100) and passes(m) is ok
    m = _measure(b, [], readback=("model_text", " ".join(digits[11:])))
    assert passes(m, Thresholds(readback_min_coverage=0.89))


def test_readback_normalisation() -> None:
    b = _case("R3", "C2", C2, "READBACK", "dictation", readback_target=TARGET)
    spoken = "Okay, that's five five five, two oh one, four eight seven three."
    m = _measure(b, [], readback=("asr", spoken))
    assert m["readback"] == {"source": "asr", "target": TARGET, "text": spoken, "coverage": 1.0} and passes(m)
    # a multiset: the target's three fives need three fives in the transcript
    m = _measure(b, [], readback=("asr", "5 201 4873"))
    assert m["readback"]["coverage"] == pytest.approx(8 / 10) and not passes(m)
    assert not passes(_measure(b, []))  # nothing said: coverage 0


def test_silent_model_everywhere() -> None:
    """The silent agent passes LISTEN and NO_BACKCHANNEL and fails TAKE_TURN, INTERRUPT, READBACK, BACKCHANNEL."""
    cases = {"LISTEN": _case("R2", "C1", C1, "LISTEN", "pause"),
             "NO_BACKCHANNEL": _case("R4", "C4", C4, "NO_BACKCHANNEL", "check"),
             "TAKE_TURN": _case("R3", "C1", C1, "TAKE_TURN", "pause"),
             "INTERRUPT": _case("R3", "R3_A", R3A, "INTERRUPT", "trigger"),
             "READBACK": _case("R3", "C2", C2, "READBACK", "dictation", readback_target=TARGET),
             "BACKCHANNEL": _case("R1", "C4", C4, "BACKCHANNEL", "check")}
    got = {a: passes(_measure(b, [], readback=("asr", "") if a == "READBACK" else None)) for a, b in cases.items()}
    assert got == {"LISTEN": True, "NO_BACKCHANNEL": True, "TAKE_TURN": False, "INTERRUPT": False,
                   "READBACK": False, "BACKCHANNEL": False}


def test_failed_record_never_passes() -> None:
    b = _case("R2", "C1", C1, "LISTEN", "pause")
    from metrics.ifeval.measure import failed_record

    assert not passes(failed_record(b.case_id, b.gold, "step raised"))


# --- part 3: the VAD preset ---------------------------------------------------------------------------------

def _tracker_spans(params: VADParams, probs: list[float]) -> list[tuple[int, int]]:
    t = _SpanTracker(params)
    for p in probs:
        t.step(p)
    t.finish(len(probs) * 512)
    return [(a // 512, b // 512) for a, b in t.done]


def test_ifeval_vad_preset() -> None:
    """DSB-IFEval App. E.2: min speech 90 ms, min silence 90 ms, spans merged within 0.3 s (on the 32 ms chunk grid;
    padding off here, see the next test)."""
    p = replace(VAD_PRESETS["ifeval"], speech_pad_ms=0)
    assert (p.min_speech_ms, p.min_silence_ms, p.merge_gap_ms) == (90, 90, 300)
    on, off = [0.9], [0.0]
    # a 3-chunk (96 ms) burst is kept, a 2-chunk (64 ms) one dropped
    assert _tracker_spans(p, off * 5 + on * 3 + off * 30) == [(5, 8)]
    assert _tracker_spans(p, off * 5 + on * 2 + off * 30) == []
    # a 2-chunk dip (64 ms, under the 90 ms min silence) does not end speech at all
    assert _tracker_spans(p, off * 5 + on * 10 + off * 2 + on * 10 + off * 30) == [(5, 27)]
    # gaps of 9 chunks (288 ms) merge, 10 chunks (320 ms) do not
    assert _tracker_spans(p, off * 5 + on * 10 + off * 9 + on * 10 + off * 30) == [(5, 34)]
    assert _tracker_spans(p, off * 5 + on * 10 + off * 10 + on * 10 + off * 30) == [(5, 15), (25, 35)]


def _padded(probs: list[float]) -> list[tuple[int, int]]:
    t = _SpanTracker(VAD_PRESETS["ifeval"])
    for p in probs:
        t.step(p)
    t.finish(len(probs) * 512)
    return t.done


def test_ifeval_vad_pads_speech_like_silero() -> None:
    """The paper keeps Silero's library defaults beyond min speech/silence: speech_pad_ms 30 (480 samples at 16 kHz)
    widens each span on both sides, clipped to the signal; min speech counts the speech, not the padding; the 0.3 s
    merge joins padded spans (gaps 60 ms shorter than the raw ones)."""
    assert VAD_PRESETS["ifeval"].speech_pad_ms == 30
    on, off = [0.9], [0.0]
    assert _padded(off * 5 + on * 3 + off * 30) == [(5 * 512 - 480, 8 * 512 + 480)]
    assert _padded(off * 5 + on * 2 + off * 30) == []  # 64 ms of speech: padded to 124 ms, still dropped
    assert _padded(on * 3 + off * 30) == [(0, 3 * 512 + 480)]  # clipped at the start ...
    assert _padded(off * 30 + on * 5) == [(30 * 512 - 480, 35 * 512)]  # ... and at the end
    # raw gaps of 11 chunks (352 ms, padded 292 ms) merge, 12 chunks (384 ms, padded 324 ms) do not
    assert _padded(off * 5 + on * 10 + off * 11 + on * 10 + off * 30) == [(5 * 512 - 480, 36 * 512 + 480)]
    assert _padded(off * 5 + on * 10 + off * 12 + on * 10 + off * 30) == [(5 * 512 - 480, 15 * 512 + 480),
                                                                          (27 * 512 - 480, 37 * 512 + 480)]


def test_each_benchmark_vad_lives_in_its_protocol() -> None:
    """One home per benchmark's VAD: the protocol (the plan and the scorer's fallback read it through `vad_of`);
    DSB-IFEval's padding is the installed Silero's own default, a run-wide --param changes it."""
    import inspect

    from silero_vad.utils_vad import get_speech_timestamps

    from dataset_builder.benchmark_params import IFEvalProtocol, M3Protocol, MPEProtocol
    from metrics.vad import vad_of

    lib = {k: v.default for k, v in inspect.signature(get_speech_timestamps).parameters.items()}
    ifeval = vad_of(IFEvalProtocol())
    assert ifeval == VAD_PRESETS["ifeval"] == VADParams(threshold=lib["threshold"], neg_threshold=0.35,
                                                        min_speech_ms=90, min_silence_ms=90, merge_gap_ms=300,
                                                        speech_pad_ms=lib["speech_pad_ms"], rules="silero")
    assert lib["speech_pad_ms"] == 30 and lib["neg_threshold"] is None  # None: threshold - 0.15
    assert vad_of(IFEvalProtocol().override(["vad_speech_pad_ms=0"])).speech_pad_ms == 0
    assert vad_of(MPEProtocol()) == VAD_PRESETS["mpe"] == VADParams(min_speech_ms=250, merge_gap_ms=300,
                                                                    speech_pad_ms=0, min_silence_ms=0)
    assert vad_of(M3Protocol()) == VAD_PRESETS["m3"] == VADParams(min_speech_ms=250, merge_gap_ms=500,
                                                                  speech_pad_ms=0, min_silence_ms=0)


# --- part 2: real recordings --------------------------------------------------------------------------------

BC = "Mm-hmm."
MM = "Mm."
SENT = "Tell me more about what happened after that."
LONG = ("Fever in a child can come from many different things and most of them are not serious at all but there "
        "are some signs that we always want you to watch for very closely tonight")
READ = "That is five five five, two oh one, four eight seven three."


@pytest.fixture(scope="module")
def voices(piper):
    memo: dict[tuple[str, str], np.ndarray] = {}

    def say(text: str, voice: str) -> np.ndarray:
        if (text, voice) not in memo:
            memo[(text, voice)] = piper.synthesize(text, voice)
        return memo[(text, voice)]

    return (lambda t: say(t, piper.assistant_voice)), (lambda t: say(t, H.USER_VOICE))


@pytest.fixture(scope="module")
def scored(tmp_path_factory, voices) -> dict[str, dict]:
    """One folder of hand-built recordings, scored once; measurements by scenario key."""
    model, user = voices
    out = tmp_path_factory.mktemp("ifeval-known")
    plan: dict[str, tuple[H.Built, tuple[str, ...]]] = {}

    def add(key: str, b: H.Built, caps: tuple[str, ...] = ("system_prompt",)) -> H.Built:
        b.case_id = f"{b.case_id}-{key}"  # one folder, several recordings of one case
        plan[key] = (b, caps)
        return b

    def case(*args, **kw) -> H.Built:
        return H.build(user, *args, **kw)

    b = add("tt-fast", case("R3", "C1", "L1", C1, "TAKE_TURN", "pause"))
    b.say(model(SENT), b.w0 + 0.6)
    b = add("tt-slow", case("R3", "C1", "L1", C1, "TAKE_TURN", "pause"))
    b.say(model(SENT), b.w0 + 2.0)
    b = add("tt-overtalk", case("R3", "C1", "L1", C1, "TAKE_TURN", "pause"))
    b.say(model(LONG), b.w0 - 1.0)
    b = add("li-silent", case("R2", "C1", "L2", C1, "LISTEN", "pause"))
    b = add("li-speaks", case("R2", "C1", "L2", C1, "LISTEN", "pause"))
    b.say(model(SENT), b.w0 + 1.0)
    b = add("li-overtalk", case("R2", "C1", "L2", C1, "LISTEN", "pause"))
    b.say(model(LONG), b.w0 - 1.0)
    b = add("bc-once", case("R1", "C4", "L1", C4, "BACKCHANNEL", "check"))
    b.say(model(BC), b.seg("pause")[0] + 0.3)
    b = add("bc-floor", case("R1", "C4", "L1", C4, "BACKCHANNEL", "check"))
    b.say(model(SENT), b.seg("pause")[0] + 0.2)
    b = add("bc-twice", case("R1", "C4", "L1", C4, "BACKCHANNEL", "check"))
    b.say(model(MM), b.seg("pause")[0] + 0.1).say(model(MM), b.seg("pause")[0] + 0.1 + len(model(MM)) / 24000 + 0.5)
    b = add("bc-merged", case("R1", "C4", "L1", C4, "BACKCHANNEL", "check"))
    b.say(model(MM), b.seg("pause")[0] + 0.1).say(model(MM), b.seg("pause")[0] + 0.1 + len(model(MM)) / 24000)
    b = add("bc-silent", case("R1", "C4", "L1", C4, "BACKCHANNEL", "check"))
    b = add("nb-silent", case("R4", "C4", "L2", C4, "NO_BACKCHANNEL", "check"))
    b = add("nb-speaks", case("R4", "C4", "L2", C4, "NO_BACKCHANNEL", "check"))
    b.say(model(BC), b.seg("pause")[0] + 0.3)
    b = add("in-fast", case("R3", "R3_A", "L1", R3A, "INTERRUPT", "trigger"))
    b.say(model(SENT), b.w0 + 0.5)
    b = add("in-slow", case("R3", "R3_A", "L1", R3A, "INTERRUPT", "trigger"))
    b.say(model(SENT), b.w0 + 1.6)
    b = add("rb-text", case("R3", "C2", "L1", C2, "READBACK", "dictation", readback_target=TARGET),
            ("system_prompt", "text_output"))
    b.say(model(READ), b.t2_end + 0.5)
    b.model_text = [[round(b.w0 - 2.0, 3), "Go ahead. "], [round(b.t2_end + 0.5, 3), "That is five five five, "],
                    [round(b.t2_end + 1.5, 3), "two oh one, four eight seven three."]]
    b = add("rb-text-wrong", case("R3", "C2", "L1", C2, "READBACK", "dictation", readback_target=TARGET),
            ("system_prompt", "text_output"))
    b.say(model(READ), b.t2_end + 0.5)  # the audio is right, but the model's own text is what counts
    b.model_text = [[round(b.t2_end + 0.5, 3), "That is five five five, two oh one."]]
    b = add("rb-asr", case("R3", "C2", "L1", C2, "READBACK", "dictation", readback_target=TARGET))
    b.say(model(READ), b.t2_end + 0.5)
    b = add("rb-silent", case("R3", "C2", "L1", C2, "READBACK", "dictation", readback_target=TARGET))
    b = add("yi-fast", case("R1", "C3", "L1", C3, "YIELD", "barge"))
    b.say(model(LONG), b.w0 - 3.0, until=b.w0 + 0.3)
    b = add("yi-slow", case("R1", "C3", "L1", C3, "YIELD", "barge"))
    b.say(model(LONG), b.w0 - 3.0, until=b.w0 + 1.2)
    b = add("co-keeps", case("R7", "C3", "L2", C3, "CONTINUE", "barge"))
    b.say(model(LONG), b.w0 - 3.0, until=b.w0 + 2.5)
    b = add("co-stops", case("R7", "C3", "L2", C3, "CONTINUE", "barge"))
    b.say(model(LONG), b.w0 - 3.0, until=b.w0 + 0.2)
    b = add("ov-overlaps", case("R8", "C3", "L1", C3, "ACCEPT_OVERLAP", "barge"))
    b.say(model(LONG), b.w0 - 2.0, until=b.w0 + 1.5)
    b = add("ov-stops", case("R8", "C3", "L1", C3, "ACCEPT_OVERLAP", "barge"))
    b.say(model(LONG), b.w0 - 2.0, until=b.w0 - 0.5)
    for b, caps in plan.values():
        H.write(out, b, capabilities=caps)
    score_run(out)
    rows = [json.loads(x) for x in (out / "measurements.jsonl").read_text().splitlines()]
    return {next(k for k in plan if m["case_id"].endswith(f"-{k}")): m for m in rows}


WANT = {
    "tt-fast": True, "tt-slow": False, "tt-overtalk": False,
    "li-silent": True, "li-speaks": False, "li-overtalk": True,
    "bc-once": True, "bc-floor": False, "bc-twice": False, "bc-merged": True, "bc-silent": False,
    "nb-silent": True, "nb-speaks": False,
    "in-fast": True, "in-slow": False,
    "rb-text": True, "rb-text-wrong": False, "rb-asr": True, "rb-silent": False,
    "yi-fast": True, "yi-slow": False, "co-keeps": True, "co-stops": False,
    "ov-overlaps": True, "ov-stops": False,
}


def test_known_verdicts(scored: dict[str, dict]) -> None:
    assert {k: passes(m) for k, m in scored.items()} == WANT


def test_known_measurements(scored: dict[str, dict]) -> None:
    s = scored
    assert s["tt-fast"]["genuine_onset_s"] == pytest.approx(0.6, abs=0.12)
    assert s["tt-slow"]["genuine_onset_s"] == pytest.approx(2.0, abs=0.12)
    assert passes(s["tt-slow"], Thresholds(take_turn_max_wait_s=2.5))  # the sweep's widest wait takes it
    for k in ("tt-overtalk", "li-overtalk"):
        assert s[k]["carried_in"] is not None and s[k]["n_onsets"] == 0
    assert s["bc-once"]["vad_label"] == "backchannel" and s["bc-once"]["n_onsets"] == 1
    assert s["bc-floor"]["vad_label"] == "floor_take"
    assert s["bc-twice"]["n_onsets"] == 2
    merged = s["bc-merged"]  # two "Mm."s back to back: one span (gaps under 0.3 s merge), still < 1 s
    assert merged["n_onsets"] == 1 and merged["onset_durations_s"][0] < 0.9
    assert s["in-fast"]["genuine_onset_s"] == pytest.approx(0.5, abs=0.12)
    assert s["in-slow"]["genuine_onset_s"] == pytest.approx(1.6, abs=0.12)
    assert passes(s["in-slow"], Thresholds(interrupt_max_latency_ms=2000))
    assert s["rb-text"]["readback"]["source"] == "model_text" and s["rb-text"]["readback"]["coverage"] == 1.0
    assert s["rb-text-wrong"]["readback"]["coverage"] == pytest.approx(0.6)
    assert s["rb-asr"]["readback"]["source"] == "asr" and s["rb-asr"]["readback"]["coverage"] >= 0.9
    assert s["rb-silent"]["readback"] == {"source": "asr", "target": TARGET, "text": "", "coverage": 0.0}
    assert s["yi-fast"]["first_offset_s"] == pytest.approx(0.3, abs=0.12)
    assert s["yi-slow"]["first_offset_s"] == pytest.approx(1.2, abs=0.12)
    assert passes(s["yi-slow"], Thresholds(yield_max_latency_ms=1500))
    assert s["ov-overlaps"]["overlap_s"] > 0.8 and s["ov-stops"]["overlap_s"] == 0.0
