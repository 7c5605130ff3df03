"""Known-answer tests: hand-built 2-channel recordings with exact timings give exact MPE scores.

The model channel holds real piper speech placed at chosen times; scoring runs the real Silero VAD, whisper
ASR and the heuristic judge. Every timing sits well clear (>= 0.3 s) of the thresholds it is tested against.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from dataset_builder.audio import SESSION_SR, write_wav
from dataset_builder.benchmark_params import MPEProtocol
from dataset_builder.episode import Episode, TimelineEvent
from metrics.mpe.measure import measure_episode
from metrics.mpe.score import score_run
from metrics.mpe.verdicts import Thresholds, outcomes
from metrics.spans import Span
from tests.handmade import GOLD, LABELS

TIMES = {"preamble": (0.0, 3.0), "t00": (4.0, 6.0), "t01": (7.0, 9.0), "t02": (12.0, 14.0),
         "t03": (15.0, 17.0), "t04": (20.0, 22.0), "t05": (25.0, 27.0)}
DURATION = 30.0

ANSWER = "The answer is twenty one."
WRONG_EARLY = "I believe it is twenty."
INTRUSION = "I think it is probably going to rain later today."
HOLDING = ("Sure, let me look into that for you, I am checking what I know about it right now, "
           "and I will be back with an answer very soon.")
ACK = "Okay."
NEW_ONSET = "I can help with that question."


def episode(case_id: str, pair_id: str, condition: str) -> Episode:
    return Episode(
        case_id=case_id, benchmark="mpe", condition=condition, pair_id=pair_id, status="ok",
        adapter={"name": "handmade"}, params={"protocol": MPEProtocol().to_dict(), "vad": {"min_speech_ms": 250,
                                                                                           "merge_gap_ms": 300}},
        seed=0, timeline=[TimelineEvent(k, LABELS.get(k, "PRE"), a, b) for k, (a, b) in TIMES.items()],
        duration_s=DURATION, gold=GOLD)


def place(model: np.ndarray, audio: np.ndarray, start_s: float, stop_s: float | None = None) -> None:
    a = int(start_s * SESSION_SR)
    clip = audio if stop_s is None else audio[: int((stop_s - start_s) * SESSION_SR)]
    model[a:a + len(clip)] += clip


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory, speak) -> Path:
    out = tmp_path_factory.mktemp("known")
    n = int(DURATION * SESSION_SR)
    user = np.zeros(n, np.float32)  # the scorer never listens to the user channel
    # A (p0, explicit): fresh correct answer, silent in N windows, yields 0.5 s into N4R.
    a = np.zeros(n, np.float32)
    place(a, speak(ANSWER), 9.5)
    place(a, speak(HOLDING), 17.5, stop_s=20.5)
    # B (p0, implicit): speech already active at T end (wrong answer), speech spanning the N1 window
    # boundary, keeps talking through N4R, a brief acknowledgement in N2.
    b = np.zeros(n, np.float32)
    place(b, speak(WRONG_EARLY), 8.0)
    place(b, speak(INTRUSION), 11.0)
    place(b, speak(HOLDING), 17.5)
    assert 17.5 + len(speak(HOLDING)) / SESSION_SR > 21.5  # still talking well past the yield tolerance
    place(b, speak(ACK), 25.5)
    # C (p1, explicit): no response to T, silent in the answering window, then a new onset during N4R.
    c = np.zeros(n, np.float32)
    place(c, speak(NEW_ONSET), 20.5)
    for case_id, pair, cond, model in (("A", "p0", "explicit", a), ("B", "p0", "implicit", b),
                                       ("C", "p1", "explicit", c)):
        write_wav(out / f"{case_id}.wav", np.stack([user, model], axis=1))
        episode(case_id, pair, cond).save(out / f"{case_id}.rec.json")
    return out


def test_exact_scores(run_dir: Path) -> None:
    res = score_run(run_dir)
    s = res["scores"]
    got = {k: (s[k]["k"], s[k]["n"]) for k in s}
    assert got == {
        "fresh_onset_rate": (1, 3),
        "response_presence": (2, 3),
        "answer_accuracy": (1, 2),
        "silence_preservation": (8, 9),
        "window_response": (2, 3),
        "answering_window_yield": (1, 3),
    }
    ex = res["by_condition"]["explicit"]
    assert (ex["fresh_onset_rate"]["k"], ex["fresh_onset_rate"]["n"]) == (1, 2)
    im = res["by_condition"]["implicit"]
    assert (im["response_presence"]["k"], im["fresh_onset_rate"]["k"]) == (1, 0)
    assert res["by_label"]["N1"]["silence_preservation"]["k"] == 2
    assert res["by_label"]["N2"]["silence_preservation"]["k"] == 3  # B's "Okay." is exempt
    paired = res["paired"]["response_presence"]
    assert (paired["n_pairs"], paired["explicit_only"], paired["implicit_only"]) == (1, 0, 0)
    assert res["judge"] == {"name": "heuristic-v2", "heuristic": True}
    assert res["n_failed"] == 0


def test_measurements_are_continuous(run_dir: Path) -> None:
    rows = [__import__("json").loads(x) for x in (run_dir / "measurements.jsonl").read_text().splitlines()]
    t_a = next(r for r in rows if r["case_id"] == "A" and r["kind"] == "T")
    assert t_a["onset_latency_s"] == pytest.approx(0.5, abs=0.1)
    n4_a = next(r for r in rows if r["case_id"] == "A" and r["kind"] == "N4")
    assert n4_a["active_at_r_start"] and n4_a["stop_latency_s"] == pytest.approx(0.5, abs=0.15)
    n4_c = next(r for r in rows if r["case_id"] == "C" and r["kind"] == "N4")
    assert n4_c["new_onsets_in_r"] == 1 and not n4_c["active_at_r_start"]
    assert "let me look" in n4_a["transcript"].lower() and "help" in n4_c["transcript"].lower()  # what it said


def test_thresholds_change_without_rerunning(run_dir: Path) -> None:
    score_run(run_dir)
    # A yielded after ~0.5 s: with a 0.3 s tolerance it fails; A's onset came ~0.5 s after T: a 0.3 s
    # window drops it. Only stored measurements are used.
    res = score_run(run_dir, overrides={"yield_tolerance_s": 0.3, "t_onset_window_s": 0.3},
                    reuse_measurements=True)
    assert res["scores"]["answering_window_yield"]["k"] == 0
    assert res["scores"]["fresh_onset_rate"]["k"] == 0
    assert res["thresholds"] == {"t_onset_window_s": 0.3, "yield_tolerance_s": 0.3}


class _Judge:
    name, heuristic = "exact", True

    def judge_answer(self, question, gold, aliases, response):
        return type("V", (), {"label": "correct" if gold in response else "incorrect"})()

    def classify_ack(self, transcript):
        return type("V", (), {"label": "acknowledgement" if transcript == "ok" else "intrusion"})()


def test_exact_timings_from_spans() -> None:
    """Exact span timings (no VAD): latencies and edge cases are exact to the millisecond."""
    ep = episode("S", "p9", "explicit")
    spans = [Span(8.5, 9.25), Span(13.9, 14.4), Span(17.25, 20.75), Span(21.5, 21.9)]
    texts = {(8.5,): "21", (13.9,): "ok", (17.25,): "hmm", (21.5,): "x"}

    def transcribe(sp: list[Span], window: tuple[float, float]) -> str:
        return " ".join(texts.get((s.start_s,), "") for s in sp)

    rows = {r["turn_id"]: r for r in measure_episode(ep, spans, transcribe, _Judge())}
    t = rows["t01"]
    assert t["active_at_end"] and t["onset_latency_s"] is None and t["transcript"] == "21"
    th = Thresholds()
    assert outcomes(t, th) == {"fresh_onset_rate": False, "response_presence": True, "answer_accuracy": True}
    n1 = rows["t02"]  # speech 13.9-14.4 inside [12, 15): judged acknowledgement -> passes
    assert n1["speech_s"] == 0.5 and outcomes(n1, th) == {"silence_preservation": True}
    n4 = rows["t03"]
    assert n4["window_speech_s"] == 2.75 and n4["stop_latency_s"] == 0.75 and n4["new_onsets_in_r"] == 1
    # what it said there (the report's row shows it): its answer and the new onset during N4R, both heard
    assert n4["transcript"] == "hmm x" and n4["transcribed_s"] == 3.9
    assert outcomes(n4, th) == {"window_response": True, "answering_window_yield": False}
    assert outcomes(n4 | {"new_onsets_in_r": 0}, th)["answering_window_yield"]
    assert not outcomes(n4 | {"new_onsets_in_r": 0}, Thresholds(yield_tolerance_s=0.7))["answering_window_yield"]


def test_the_models_text_is_read_from_the_speech_the_asr_heard() -> None:
    """Run health compares the model's own text with the transcript of the same speech: a T response already
    running at the turn's end is heard whole, so its text, stamped at the start of the frame before the speech,
    is read whole too (not from the turn's end on)."""
    ep = episode("S", "p9", "explicit")
    ep.model_text = [[8.42, "21"]]  # its frame starts before the VAD's onset at 8.5 s
    spans = [Span(8.5, 9.25)]
    t = next(r for r in measure_episode(ep, spans, lambda sp, w: "21", _Judge()) if r["turn_id"] == "t01")
    assert t["model_text"] == "21" and t["text_verdict"] == t["answer_verdict"] == "correct"
