"""The heuristic judge's two rules with known answers: what counts as a brief acknowledgement (the silence
windows' exemption, docs/benchmarks/mpe.md) and when an answer matches its gold (tests/MUTATION.md).

The acknowledgement lists below are written here, independently of `metrics/judges.py`: every entry must be
accepted on its own, and short utterances that say something (an answer, a place, an instruction, a number)
must not be, whatever their length.
"""

from __future__ import annotations

import pytest

from metrics.judges import HeuristicJudge

JUDGE = HeuristicJudge()

# Backchannels as an ASR writes them, one per entry (spellings with hyphens split into two tokens).
ACKNOWLEDGEMENTS = [
    "ok", "Okay.", "k", "Mm.", "mmm", "Hmm.", "hm", "mhm", "mmhmm", "Mm-hm.", "Mm-hmm.", "uh", "huh", "uhhuh",
    "Uh-huh.", "Yeah.", "yep", "yup", "Yes.", "Sure.", "Right.", "alright", "Noted.", "Understood.", "Cool.",
    "ah", "oh", "aha", "Gotcha.", "Got it.", "I see.", "All right.", "Sounds good.", "Of course.",
    "Okay, got it.", "Yeah, yeah.", "Oh, I see.", "Sure, sounds good.", "Mm-hm, okay.",
    "Got it, okay.", "I see, yeah.", "Of course, sure.",  # a phrase followed by more
]  # fmt: skip

# Short utterances that take the floor: answers, places, directions, bare numbers, times.
NOT_ACKNOWLEDGEMENTS = [
    "It is 21", "Paris", "Turn left now", "Seven", "Ten past three", "21", "It's 5:15.", "Monday.",
    "No.", "Thanks.", "Hello.", "Yes, 21.", "Okay, Paris.", "Sure thing.", "Got", "Course.", "Sounds",
    "I", "See.", "All", "Good.", "It", "Of", "Got you.", "Okay sure twenty", "Right, Tuesday.",
    "Got it, Paris.", "I see, Monday.", "Sounds good, 21.",  # an acknowledgement phrase, then an answer
]  # fmt: skip


@pytest.mark.parametrize("transcript", ACKNOWLEDGEMENTS)
def test_real_acknowledgements_are_exempt(transcript: str) -> None:
    assert JUDGE.classify_ack(transcript).label == "acknowledgement"


@pytest.mark.parametrize("transcript", NOT_ACKNOWLEDGEMENTS)
def test_short_non_acknowledgements_are_intrusions(transcript: str) -> None:
    """tests/MUTATION.md bug 2: a short transcript is not an acknowledgement for being short ("It is 21", "Paris")."""
    assert JUDGE.classify_ack(transcript).label == "intrusion"


@pytest.mark.parametrize("transcript, label", [
    ("okay okay okay", "acknowledgement"),
    ("okay okay okay okay", "acknowledgement"),            # four tokens: the longest brief acknowledgement
    ("okay okay okay okay okay", "intrusion"),             # five: it holds the floor
    ("Mm-hm, okay, sure.", "acknowledgement"),             # mm hm okay sure: four tokens
    ("Mm-hm, okay, got it.", "intrusion"),                 # five tokens, every one an acknowledgement
])  # fmt: skip
def test_acknowledgement_length_boundary(transcript: str, label: str) -> None:
    assert JUDGE.classify_ack(transcript).label == label


@pytest.mark.parametrize("transcript", ["", "   ", "...", "?!"])
def test_empty_transcript_gets_no_exemption(transcript: str) -> None:
    v = JUDGE.classify_ack(transcript)
    assert v.label == "unparseable" and v.label != "acknowledgement"


def test_ack_evidence_is_the_normalised_tokens() -> None:
    assert JUDGE.classify_ack("Mm-hm, OK.").raw == "mm hm ok"
    assert JUDGE.classify_ack("It is 21.").raw == "it is 21"


@pytest.mark.parametrize("gold, aliases, response, label", [
    # numbers, spelled or written, compared numerically
    ("21", [], "It is 21.", "correct"),
    ("21", [], "twenty-one dollars each", "correct"),
    ("21", [], "21.0000005", "correct"),                # within the 1e-6 tolerance
    ("0", [], "0.000001", "correct"),                   # exactly 1e-6 away (the float 1e-6 itself): still equal
    ("0", [], "0.0000011", "incorrect"),                # just past it
    ("21", [], "21.0001", "incorrect"),
    ("21", [], "It is 12.", "incorrect"),
    ("21", [], "It is 20 or 22.", "incorrect"),
    ("4000", ["4000 metres"], "four thousand metres", "correct"),
    # clock times: h:mm, spoken, or ASR's digit run
    ("5:15", [], "at five fifteen", "correct"),            # a spoken reading needs no alias...
    ("5:15", ["5 15", "five fifteen"], "at five fifteen", "correct"),  # ...and the alias changes nothing
    ("5:15", [], "at six fifteen", "incorrect"),
    ("5:15", [], "quarter past five is 5:15", "correct"),
    ("5:15", [], "It arrives at 515.", "correct"),
    ("5:15", [], "It arrives at 5:20.", "incorrect"),
    ("5:15", [], "It arrives at 15.", "incorrect"),
    ("5:15", [], "It arrives at 5.", "incorrect"),
    ("10:05", ["10 05", "10.05", "ten oh five"], "ten oh five", "correct"),
    # phrases: token containment, articles ignored
    ("Thursday", [], "It's on Thursday now.", "correct"),
    ("Thursday", [], "It's on Tuesday now.", "incorrect"),
    ("the team dinner", [], "Team dinner.", "correct"),
    ("B12", ["B 12", "gate B12"], "Gate B 12.", "correct"),
    ("B12", [], "Gate B 12.", "correct"),                     # a label is read as letter + number
    ("B12", [], "Gate C 12.", "incorrect"),
    ("4567", ["4 5 6 7"], "four five six seven", "correct"),  # a spoken digit run is one number
    ("4567", [], "4 5 6 7", "incorrect"),                     # four numbers, none of them 4567
    ("4567", ["4 5 6 7"], "4 5 6 7", "correct"),              # the alias is a phrase of four numbers
    # nothing to judge: an empty response, or a gold that normalises to no words at all
    ("?", [], "Anything at all.", "incorrect"),
    ("the", [], "the", "incorrect"),
    ("21", ["21 dollars"], "", "incorrect"),
    ("21", ["21 dollars"], "   ", "incorrect"),
])  # fmt: skip
def test_answer_matching(gold: str, aliases: list[str], response: str, label: str) -> None:
    assert JUDGE.judge_answer("q", gold, aliases, response).label == label


def test_judge_is_labelled_heuristic() -> None:
    assert (JUDGE.name, JUDGE.heuristic) == ("heuristic-v2", True)
