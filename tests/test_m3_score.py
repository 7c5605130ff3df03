"""M3-DuplexBench `score_run` end to end on hand-built episodes (rec.json gold written in tests/m3_handmade.py).

- Known answers to the millisecond: model channels of planted bursts read back exactly, one episode per case the
  rules tell apart, scored under the paper's rules and `rules=authors` (the stored measurements re-scored with
  `--reuse`, no VAD).
- Real components: piper speech placed at known times, the real Silero VAD and whisper: TOR exact, latencies
  within the VAD's resolution, the SHIFT response transcribed and its QA accuracy judged by the heuristic judge.
- A silent model: SHIFT TOR 0 and PAUSE TOR 0 under both rule sets.
- Content through a served-judge stand-in (`ask`): 0–2 scores normalised, strict JSON with retries, unparseable;
  Japanese content not computed with the reason when the ASR is English-only.
- Skipped episodes reported, never scored; failed ones counted against the model; tables and plot windows.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dataset_builder.audio import SESSION_SR
from dataset_builder.errors import UsageError
from metrics.m3.content import NO_TRANSCRIPT, NOT_COMPUTED, parse_score
from metrics.m3.score import score_run
from metrics.m3.tables import plot_windows, tables
from metrics.scoring import ASR_PAD_S
from tests import m3_handmade as H
from tests.handmade import DeafASR, NoASR

S = 4.0  # every episode's event start
D = S + 10.0  # recordings end at the window end, as the runtime plan's do


def _group(res: dict[str, Any], cond: str = "user", ld: str = "en_task") -> dict[str, Any]:
    return res["scores"][f"{ld}_{cond}"]


# --- known answers to the millisecond (planted bursts) -----------------------------------------------------------

# (event type, t, b, model spans, context): each differs between the paper's rules and the authors' code, or pins
# one boundary.
KNOWN: dict[str, tuple[str, float, float | None, list[tuple[float, float]], list[list[Any]] | None]] = {
    "shift_at_0.4_before": ("SHIFT", S + 0.2, None, [(S - 0.4, S + 1.0)], None),
    "shift_0.5_gap": ("SHIFT", S + 0.2, None, [(S - 0.3, S - 0.1), (S + 0.4, S + 2.0)], None),
    "shift_none": ("SHIFT", S + 0.2, None, [(S - 0.401, S + 3.0)], None),
    "pause_carried_in": ("PAUSE", S + 2.0, S - 3.0, [(S - 3.5, S + 0.6)], None),
    "pause_backchannel": ("PAUSE", S + 2.0, S - 3.0, [(S + 0.5, S + 0.9)], None),
    "pause_silent": ("PAUSE", S + 2.0, S - 3.0, [], None),
    "bc_talked_through": ("BC", S + 0.5, None, [(S - 3.0, S + 2.75)], [["system", "a long system turn", 0.5, S + 3]]),
    "bc_starts_after_s": ("BC", S + 0.5, None, [(S + 0.3, S + 1.5)], [["system", "a long system turn", 0.5, S + 3]]),
    "barge_in_yields": ("BARGE_IN", S + 2.0, None, [(S - 3.0, S + 0.25)],
                        [["system", "a long system turn", 0.5, S + 1.0]]),
    "barge_in_runs_on": ("BARGE_IN", S + 2.0, None, [(S - 3.0, D)], [["system", "a long system turn", 0.5, S + 1]]),
}

# Expected outcome per case: paper, authors. SHIFT / PAUSE: latency in ms or None (no takeover) or
# ("none", latency) for the authors' PAUSE fallback; BC / BARGE_IN: stop latency in ms or None.
EXPECTED: dict[str, tuple[Any, Any]] = {
    "shift_at_0.4_before": (-400, -400),
    "shift_0.5_gap": (-300, 400),  # (8): joined by the paper; the code splits, and the blip ends before s
    "shift_none": (None, None),  # begins 1 ms too early for both
    "pause_carried_in": (None, -3000),  # (2): the code counts a turn begun before the pause (its view cuts it to b)
    "pause_backchannel": (500, ("none", 10000)),  # (2): a 0.4 s "mm" is no takeover for the code; (3) fallback
    "pause_silent": (None, ("none", 10000)),  # (3): the code's latency without a takeover is the window end
    "bc_talked_through": (2750, 2750),
    "bc_starts_after_s": (None, 1500),  # (4): the code takes speech starting before s + 0.5 s
    "barge_in_yields": (250, 250),
    "barge_in_runs_on": (10000, 10000),  # censored at the window end
}


class WordsASR:
    """Hears one word in anything shorter than a second of speech with the scorer's padding on both sides, a
    sentence otherwise (for the code's backchannel filter, which reads word counts)."""

    name = "words-stub"

    def transcribe(self, audio: np.ndarray, sr: int) -> str:
        return "mm" if audio.size < (1.0 + 2 * ASR_PAD_S) * sr else "well I think we should go there"


@pytest.fixture(scope="module")
def known(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("m3-known")
    for n, (kind, t, b, spans, context) in enumerate(KNOWN.values(), start=1):
        g = H.gold(kind, s=S, t=t, b=b, event_n=n, context=context)
        H.write(out, f"{g['event_id']}-user", g, H.bursts(D, spans))
    return out


def _outcome(m: dict[str, Any], rules: str, folder: Path) -> Any:
    from metrics.m3.rules import RULE_SETS, verdict

    v = verdict(m, RULE_SETS[rules])
    if m["event_type"] in ("SHIFT", "PAUSE"):
        if not v["takeover"]:
            return None if v["latency_s"] is None else ("none", round(v["latency_s"] * 1000))
        return round(v["latency_s"] * 1000)
    return None if v["stop_latency_s"] is None else round(v["stop_latency_s"] * 1000)


def test_known_answers_both_rule_sets(known: Path) -> None:
    paper = score_run(known, asr=WordsASR(), vad_factory=H.planted)
    assert paper["rules"]["name"] == "paper" and Path(paper["scores_file"]).name == "scores.json"
    stored = [json.loads(x) for x in (known / "measurements.jsonl").read_text().splitlines()]
    by_name = {name: next(m for m in stored if m["case_id"].endswith(f"-e{n:02d}-user"))
               for n, name in enumerate(KNOWN, start=1)}
    got = {name: (_outcome(m, "paper", known), _outcome(m, "authors", known)) for name, m in by_name.items()}
    assert got == EXPECTED
    g = _group(paper)
    assert (g["shift_tor"]["k"], g["shift_tor"]["n"]) == (2, 3)
    assert g["shift_latency"]["value"] == pytest.approx(-0.35)
    assert (g["pause_tor"]["k"], g["pause_tor"]["n"]) == (1, 3) and g["pause_latency"]["value"] == pytest.approx(0.5)
    assert g["bc_stop_latency"]["value"] == pytest.approx(2.75) and g["bc_stop_latency"]["n_undefined"] == 1
    assert g["barge_in_stop_latency"]["value"] == pytest.approx((0.25 + 10.0) / 2)
    assert g["barge_in_stop_latency"]["n_censored"] == 1
    # The same measurements under the authors' rules, without VAD or ASR: its own scores file.
    authors = score_run(known, overrides={"rules": "authors"}, reuse_measurements=True)
    assert Path(authors["scores_file"]).name == "scores-rules=authors.json"
    a = _group(authors)
    assert (a["shift_tor"]["k"], a["shift_tor"]["n"]) == (2, 3) and a["shift_latency"]["value"] == pytest.approx(0.0)
    assert (a["pause_tor"]["k"], a["pause_tor"]["n"]) == (1, 3)
    assert a["pause_latency"]["value"] == pytest.approx((-3.0 + 10.0 + 10.0) / 3, abs=1e-4)
    assert a["bc_stop_latency"]["value"] == pytest.approx((2.75 + 1.5) / 2) and a["shift_tor"]["ci"] is None
    assert json.loads((known / "scores.json").read_text())["rules"]["name"] == "paper"  # untouched


def test_reuse_needs_no_vad_and_rejects_typos(known: Path) -> None:
    score_run(known, asr=WordsASR(), vad_factory=H.planted)

    def no_vad(params: Any) -> Any:
        raise AssertionError("--reuse must not run the VAD")

    res = score_run(known, overrides={"shift_pick": "closest"}, reuse_measurements=True, vad_factory=no_vad)
    assert res["rules"]["name"] == "paper+shift_pick=closest"
    with pytest.raises(UsageError, match="unknown M3 rule parameter"):
        score_run(known, overrides={"shift_pik": "closest"}, reuse_measurements=True)


def test_word_counts_of_the_backchannel_filter_are_measured(known: Path) -> None:
    score_run(known, asr=WordsASR(), vad_factory=H.planted)
    stored = [json.loads(x) for x in (known / "measurements.jsonl").read_text().splitlines()]
    bc = next(m for m in stored if m["case_id"].endswith("-e05-user"))
    assert bc["words_status"] == "asr:words-stub" and set(bc["words"].values()) == {1}
    carried = next(m for m in stored if m["case_id"].endswith("-e04-user"))
    assert carried.get("words", {}) == {}  # a 2.6 s segment is no backchannel whatever it says: not transcribed


# --- real speech, real VAD and ASR ------------------------------------------------------------------------------

ANSWER = "It opened in nineteen oh five."
LONG = "Well, the old bridge was rebuilt after the flood, and then it reopened to traffic in the spring."


@pytest.fixture(scope="module")
def spoken(tmp_path_factory: pytest.TempPathFactory, speak: Any) -> tuple[Path, dict[str, Any]]:
    out = tmp_path_factory.mktemp("m3-real")
    ctx = [["user", "Tell me about the old bridge.", 1.0, S], ["system", LONG, 0.5, S + 3]]
    cases = [
        ("SHIFT", S + 0.3, H.place(H.silence(D), speak(ANSWER), S + 0.5), "1905", ("nineteen oh five", "1905")),
        ("SHIFT", S + 0.3, H.silence(D), "1905", ("nineteen oh five", "1905")),
        ("PAUSE", S + 2.0, H.place(H.silence(D), speak(ANSWER), S + 1.0), "", ()),
        ("BC", S + 0.5, H.place(H.silence(D), speak(LONG), S - 1.0), "", ()),
        ("BARGE_IN", S + 2.0, H.place(H.silence(D), speak(LONG), S - 1.0, until_s=S + 0.3), "", ()),
    ]
    for n, (kind, t, model, gold_answer, aliases) in enumerate(cases, start=1):
        g = H.gold(kind, s=S, t=t, event_n=n, gold_answer=gold_answer if kind == "SHIFT" else "",
                   gold_aliases=aliases, context=ctx)
        H.write(out, f"{g['event_id']}-user", g, model)
    return out, score_run(out)


def test_real_speech_known_answers(spoken: tuple[Path, dict[str, Any]]) -> None:
    out, res = spoken
    g = _group(res)
    assert (g["shift_tor"]["k"], g["shift_tor"]["n"]) == (1, 2)
    assert 0.5 <= g["shift_latency"]["value"] <= 0.65  # placed at s + 0.5 s; piper's lead-in and the 32 ms VAD grid
    assert (g["pause_tor"]["k"], g["pause_tor"]["n"]) == (1, 1) and 1.0 <= g["pause_latency"]["value"] <= 1.15
    assert 2.0 < g["bc_stop_latency"]["value"] < 10.0  # talked through the backchannel, stopped in W
    assert 0.2 <= g["barge_in_stop_latency"]["value"] <= 0.4  # cut 0.3 s after the barge-in
    qa = g["qa_accuracy"]
    assert qa["computed"] and qa["heuristic"] and qa["value"] == pytest.approx(0.5) and qa["n"] == 2
    assert qa["n_no_response"] == 1
    assert g["relevance"]["computed"] is False and g["relevance"]["reason"] == NOT_COMPUTED
    assert res["judge"]["heuristic"] is True and "heuristic" in res["judge"]["content"]
    shift = next(json.loads(x) for x in (out / "measurements.jsonl").read_text().splitlines())
    assert "1905" in shift["response"]["text"] or "nineteen" in shift["response"]["text"].lower()


def test_silent_model_takes_no_turn(tmp_path: Path) -> None:
    """Done-means: `silent` has SHIFT TOR 0 and PAUSE TOR 0 (and nothing needs transcribing)."""
    for n, kind in enumerate(("SHIFT", "SHIFT", "PAUSE", "PAUSE", "BC", "BARGE_IN"), start=1):
        ctx = [["system", "a long system turn", 0.5, S + 3.0]] if kind in ("BC", "BARGE_IN") else None
        g = H.gold(kind, s=S, t=S + (0.5 if kind in ("SHIFT", "BC") else 2.0), event_n=n, context=ctx)
        H.write(tmp_path, f"{g['event_id']}-user", g, H.silence(D))
    res = score_run(tmp_path, asr=NoASR())
    for rules in ("paper", "authors"):
        r = res if rules == "paper" else score_run(tmp_path, overrides={"rules": rules}, reuse_measurements=True)
        g = _group(r)
        assert (g["shift_tor"]["value"], g["shift_tor"]["n"]) == (0.0, 2)
        assert (g["pause_tor"]["value"], g["pause_tor"]["n"]) == (0.0, 2)
        assert g["bc_stop_latency"]["n"] == 0 and g["bc_stop_latency"]["n_undefined"] == 1
    assert any("no model speech" in f for f in res["health"]["flags"])


# --- content through a served judge -------------------------------------------------------------------------------


class ChatStub:
    """A served-judge stand-in: `ask(prompt)` as OpenAIJudge has it; replies chosen per prompt kind."""

    name = "stub-llm"
    heuristic = False

    def __init__(self, relevance: list[str], consistency: str, qa: str) -> None:
        self.replies = {"relevance": list(relevance), "consistency": [consistency], "qa": [qa]}
        self.prompts: list[str] = []

    def ask(self, prompt: str) -> str:
        self.prompts.append(prompt)
        kind = ("qa" if "Reference answer" in prompt else "consistency" if "conversation so far" in prompt
                else "relevance")
        queue = self.replies[kind]
        return queue.pop(0) if len(queue) > 1 else queue[0]


def test_content_through_a_served_judge(tmp_path: Path) -> None:
    g = H.gold("SHIFT", s=S, t=S + 0.3, event_n=1, gold_answer="1905", gold_aliases=("nineteen oh five",),
               context=[["user", "Tell me about the old bridge.", 1.0, S]])
    H.write(tmp_path, f"{g['event_id']}-user", g, H.bursts(D, [(S + 0.5, S + 2.0)]))
    judge = ChatStub(relevance=["Sure! it is relevant", '{"score": 2, "reason": "answers"}'],
                     consistency='```json\n{"score": 1, "reason": "generic"}\n```', qa="no json at all")
    res = score_run(tmp_path, asr=_Fixed("it opened in nineteen oh five"), judge=judge, vad_factory=H.planted)
    grp = _group(res)
    assert grp["relevance"]["value"] == pytest.approx(1.0) and grp["relevance"]["judge"] == "stub-llm"
    assert grp["consistency"]["value"] == pytest.approx(0.5)
    assert grp["qa_accuracy"]["value"] == pytest.approx(0.0) and grp["qa_accuracy"]["n_unparseable"] == 1
    m = json.loads((tmp_path / "measurements.jsonl").read_text())
    assert m["content"]["relevance"]["attempts"] == 2 and m["content"]["qa_accuracy"]["attempts"] == 3
    assert "could not be used" in judge.prompts[1]  # the retry says what was wrong
    consistency_prompt = next(p for p in judge.prompts if "conversation so far" in p)
    assert "User: Tell me about the old bridge." in consistency_prompt and "nineteen oh five" in consistency_prompt
    assert res["judge"] == {"name": "stub-llm", "heuristic": False, "llm": True,
                            "content": "relevance, consistency and QA accuracy by stub-llm"}


def test_untranscribed_import_is_not_judged(tmp_path: Path) -> None:
    """A row imported without txt_align has no question: a served judge is never asked to grade against nothing."""
    g = H.gold("SHIFT", s=S, t=S + 0.3, event_n=1) | {"question": "", "reply": "", "transcribed": False}
    H.write(tmp_path, f"{g['event_id']}-user", g, H.bursts(D, [(S + 0.5, S + 2.0)]))
    judge = ChatStub(relevance='{"score": 2, "reason": "x"}', consistency='{"score": 2, "reason": "x"}', qa="")
    res = score_run(tmp_path, asr=_Fixed("it opened in nineteen oh five"), judge=judge, vad_factory=H.planted)
    grp = _group(res)
    assert not judge.prompts
    assert grp["relevance"]["value"] is None and grp["consistency"]["value"] is None
    m = json.loads((tmp_path / "measurements.jsonl").read_text())
    assert m["content"]["relevance"]["reason"] == NO_TRANSCRIPT


def test_parse_score_is_strict() -> None:
    assert parse_score('{"score": 2, "reason": "x"}') == (2, "")
    for bad in ('{"score": 3}', '{"score": "2"}', "2", '{"score": 1.5}', "[1]", '{"score": true}'):
        assert parse_score(bad)[0] is None


class _Fixed:
    name = "fixed"

    def __init__(self, text: str) -> None:
        self.text = text

    def transcribe(self, audio: np.ndarray, sr: int) -> str:
        assert sr == SESSION_SR and audio.size > 0
        return self.text


def test_text_stamped_before_the_vad_onset_is_the_responses_own(tmp_path: Path) -> None:
    """Run health compares the ASR with the model's own text of the same speech. A text stream stamps each piece at
    the start of its frame, before the audio and before the VAD's onset (the oracle's 80 ms frame at s + 0.40 s,
    its speech found at s + 0.51 s): that text is the response's, so the same words raise no flag. Text stamped
    before the window (during the user's turn, when the model's earlier speech ended) is not; other words are
    still flagged."""
    answer = "it opened in nineteen oh five"
    texts = {"same": [[S - 2.0, "earlier words "], [S + 0.4, answer]],
             "other": [[S + 0.4, "the bridge was closed for repairs last winter"]]}
    for n, (cid, said) in enumerate(texts.items(), start=1):
        g = H.gold("SHIFT", s=S, t=S + 0.3, event_n=n, gold_answer="1905")
        ep = H.write(tmp_path, cid, g, H.bursts(D, [(S - 3.0, S - 1.5), (S + 0.51, S + 2.0)]))
        ep.model_text = said
        ep.save(tmp_path / f"{cid}.rec.json")
    res = score_run(tmp_path, asr=_Fixed(answer), vad_factory=H.planted)
    ms = {m["case_id"]: m for m in map(json.loads, (tmp_path / "measurements.jsonl").read_text().splitlines())}
    assert ms["same"]["response"]["onset_s"] == pytest.approx(S + 0.51)
    assert ms["same"]["model_text"] == answer and ms["same"]["transcript"] == answer
    assert res["health"]["asr_text_disagreements"] == 1
    assert any(f.startswith("the ASR disagrees with the model's own text in 1 transcribed windows (e.g. other "
                            "SHIFT: text 'the bridge was closed") for f in res["health"]["flags"])


def test_japanese_content_not_computed_with_an_english_asr(tmp_path: Path) -> None:
    g = H.gold("SHIFT", s=S, t=S + 0.3, event_n=1, lang="ja", gold_answer="1905")
    H.write(tmp_path, f"{g['event_id']}-user", g, H.bursts(D, [(S + 0.5, S + 2.0)]))
    g = H.gold("PAUSE", s=S, t=S + 2.0, event_n=2, lang="ja")
    H.write(tmp_path, f"{g['event_id']}-user", g, H.bursts(D, [(S + 0.5, S + 0.9)]))
    res = score_run(tmp_path, asr=DeafASR(), vad_factory=H.planted)
    grp = _group(res, ld="ja_task")
    assert grp["shift_tor"]["k"] == 1
    for key in ("relevance", "consistency", "qa_accuracy"):
        assert grp[key]["computed"] is False and "not Japanese" in grp[key]["reason"]
    # Scored with an ASR that does not transcribe Japanese, the authors' backchannel filter has no word counts:
    # not applied, and counted.
    authors = score_run(tmp_path, overrides={"rules": "authors"}, reuse_measurements=True)
    assert _group(authors, ld="ja_task")["pause_latency"]["n_bc_filter_not_applied"] == 1
    assert any("ja:" in note for note in res["content_notes"])


def test_the_offline_asrs_declare_their_languages() -> None:
    """The scorer reads an ASR's `languages`: tiny.en is English only, whisper base told Japanese hears Japanese."""
    from metrics.asr import asr_for_language, get_asr
    from metrics.m3.content import language_problem

    assert language_problem(get_asr(), "en") is None and language_problem(get_asr(), "ja")
    assert language_problem(asr_for_language("ja"), "ja") is None
    assert language_problem(get_asr("whisper-base", language="ja"), "en")


# --- skipped and failed, tables, plot windows --------------------------------------------------------------------


def test_skipped_reported_failed_counted_and_tables(tmp_path: Path) -> None:
    for n, cond in enumerate(("none", "user", "full"), start=1):
        g = H.gold("SHIFT", s=S, t=S + 0.3, event_n=1, condition=cond)
        spans = [(S + 0.2 * n, S + 2.0)]
        if cond == "full":
            H.write(tmp_path, f"{g['event_id']}-full", g, H.bursts(D, spans), status="skipped",
                    failure="the adapter has no teacher_forcing capability (Full context)")
        else:
            H.write(tmp_path, f"{g['event_id']}-{cond}", g, H.bursts(D, spans))
    g = H.gold("PAUSE", s=S, t=S + 2.0, event_n=2, condition="user")
    H.write(tmp_path, f"{g['event_id']}-user", g, H.bursts(D, []), status="failed", failure="step raised")
    res = score_run(tmp_path, asr=DeafASR(), vad_factory=H.planted)
    assert res["skipped"]["n"] == 1 and res["skipped"]["by_group"] == {"en_task_full": 1}
    assert "en_task_full" not in res["scores"]
    assert res["n_failed"] == 1 and _group(res)["pause_tor"]["k"] == 1  # the failed PAUSE counts as taken over
    assert res["representative"]["en_task"]["shift_tor"]["value"] is None  # no Full: no representative
    text = dict(tables({"handmade": res}))
    assert "full" in text["handmade: en task"] and "skipped (1): the adapter has no teacher_forcing" in \
        text["handmade: notes"]
    assert any("skipped, not scored" in f for f in res["health"]["flags"])
    ms = [json.loads(x) for x in (tmp_path / "measurements.jsonl").read_text().splitlines()]
    windows = plot_windows(ms, res)
    assert len(windows) == 2 and all(ok for _, _, ok, _ in windows) and windows[0][:2] == (S, D)
