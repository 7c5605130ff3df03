"""The cascade's text policy on transcripts as an ASR writes them: whisper tiny.en ("Aria" -> "area", "$87",
"9 05", "905", "4, 7, 1, 9") and an ASR that spells numbers out as the TTS said them ("nine oh five")."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable

import pytest

from adapters.cascade_policy import Policy, addressed_request
from dataset_builder.mpe import FAMILIES, generate_scripts
from dataset_builder.mpe.numbers import clock_words, digit_words, number_words
from dataset_builder.schema import Script
from metrics.judges import HeuristicJudge
from metrics.textnorm import words_to_numbers


@pytest.mark.parametrize(
    "heard, answer",
    [
        # bill split: a sum, then "N ways" or "the N of us"; in dollars or with the unit lost
        (["Blimey, the tab came to $87.", "Tara, we're splitting it between the 3 of us, like we said.",
          "Area, what do we each owe?"], "29 dollars"),
        (["Omar, the van hire was 120.", "It's four ways, same for everyone.",
          "Aria, how much is it per person?"], "30 dollars"),
        # total cost: a price each, then a number of things
        (["Hmm, 12 dollars a go for the steaks.", "Put us down for seven steaks.",
          "Aria, what's that come to altogether?"], "84 dollars"),
        (["Each of the inner tubes costs eight dollars.", "We'll want 3 inner tubes, no more.",
          "Aria, what would the total cost be?"], "24 dollars"),
        # head count: two groups of people
        (["Okay, so 4 grown-ups so far.", "Sam, and two children on top of that.",
          "Hey Aria, how many slices of cake do we need?"], "6 slices"),
        (["Quick one, we've got 5 people from work coming.", "Plus 3 neighbours, I nearly forgot.",
          "Aria, how many plates is that altogether?"], "8 plates"),
        # a clock time and a duration, as whisper writes "nine oh five"
        (["Right, the train leaves at 905.", "And it's 1 hour and 20 minutes door to door.",
          "Aria, what time do we get in?"], "10:25"),
        (["The exam starts at 9 05.", "It lasts 50 minutes.", "Aria, when do we get out?"], "9:55"),
        (["The lamb goes in at seven thirty.", "The recipe says one hour and forty-five minutes.",
          "Aria, what time will it be ready?"], "9:15"),
        # a weekday and a shift
        (["Wait, the party is on Friday.", "Ugh, it's moved 2 days later.",
          "Aria, what day did the party end up on?"], "Sunday"),
        (["Now, the move was arranged for Tuesday.", "They have moved it three days earlier.",
          "Aria, which day is the move now?"], "Saturday"),
        # conversions: the unit asked for and the last amount in a unit that converts to it
        (["Each turn gets 3 minutes.", "Aria, how many seconds is that?"], "180 seconds"),
        (["We ordered four dozen cupcakes.", "Aria, what would that be in cupcakes?"], "48 cupcakes"),
        (["The recipe wants two kilograms of flour.", "Aria, how many grams is that?"], "2000 grams"),
        # recall: the value said with the thing the request names
        (["Felix, the cottage door code is 4, 7, 1, 9, don't lose it.", "Area, what was the cottage door code again?"],
         "4719"),
        (["Note to self, the key safe code is four seven one nine.", "Aria, remind me of the key safe code?"], "4719"),
        (["It's C-14, our gate at the ferry terminal.", "Aria, what was our gate at the ferry terminal?"], "C14"),
        (["For the record, the function room number is 147.", "Quick one, we need 5 chairs.",
          "Aria, could you remind us of the function room number?"], "147"),
    ],
)
def test_computes_from_what_it_heard(heard: list[str], answer: str) -> None:
    policy = Policy()
    replies = [policy.hear(t) for t in heard]
    assert replies[:-1] == [None] * (len(heard) - 1)
    assert replies[-1] == f"The answer is {answer}."


@pytest.mark.parametrize(
    "text, expected",
    [
        ("What's the total area?", "What's the total area?"),
        ("Orbit, go back to your dock. Hey, area. What's the capital of Chile?", "What's the capital of Chile?"),
        ("You, where did I put my glasses? Honestly, area is better at trivia than I am.", None),  # N1 after a question
        ("I swear area understands my accent better than my mum does.", None),
        ("Can you work out what each person owes?", None),  # implicit: no name, no answer
        ("You are Aria, a voice assistant. " + "When someone asks you for something, answer briefly. " * 8, None),
    ],
)
def test_answers_only_requests_that_name_it(text: str, expected: str | None) -> None:
    assert addressed_request(text) == expected


def test_unknown_request_gets_a_plain_refusal() -> None:
    assert Policy().hear("Aria, what's the capital of Chile?") == "Sorry, I am not sure."


def test_a_request_without_the_facts_gets_a_plain_refusal() -> None:
    policy = Policy()
    assert policy.hear("The bill came to 90 dollars.") is None
    assert policy.hear("Aria, what time do we get in?") == "Sorry, I am not sure."  # no clock time was said


# --- generated scenes ------------------------------------------------------------------------------------------

N_PAIRS, SEED = 300, 7
MIN_RATE = 0.9


def _spoken(text: str) -> str:
    """The turn as the TTS says it, spelled out: clock times "nine oh five", codes digit by digit, other numbers
    in words ("C fourteen", "eighty-seven dollars")."""
    text = re.sub(r"\b(\d{1,2}):(\d{2})\b", lambda m: clock_words(int(m.group(1)), int(m.group(2))), text)
    text = re.sub(r"\b\d(?: \d)+\b", lambda m: digit_words(m.group().replace(" ", "")), text)
    return re.sub(r"\d+", lambda m: number_words(int(m.group())), text)


# How the turn texts reach the policy: normalised by words_to_numbers (which drops "dollars"), normalised keeping
# units, and spelled out as spoken, then normalised ("nine oh five" -> "905").
TRANSCRIBE: dict[str, Callable[[str], str]] = {
    "digits": words_to_numbers,
    "digits_with_units": lambda t: words_to_numbers(t, keep_units=True),
    "spoken": lambda t: words_to_numbers(_spoken(t)),
}


@pytest.fixture(scope="module")
def scenes() -> list[Script]:
    return generate_scripts(N_PAIRS, SEED, ["voice-a", "voice-b", "voice-c", "voice-d", "voice-e"])


def test_spoken_transcripts_spell_clock_times_as_said() -> None:
    assert TRANSCRIBE["spoken"]("Hmm, the train leaves at 9:05, I think.") == "hmm, the train leaves at 905, i think."
    assert _spoken("Note to self, the wifi code is 4 7 1 9.") == "Note to self, the wifi code is four seven one nine."


@pytest.mark.parametrize("form", list(TRANSCRIBE))
def test_answers_every_family_of_generated_scenes(scenes: list[Script], form: str) -> None:
    """The explicit T is answered correctly (HeuristicJudge against the script's gold) in >= 90% of the scenes of
    every family; the implicit T is never answered."""
    transcribe, judge = TRANSCRIBE[form], HeuristicJudge()
    correct: dict[str, int] = defaultdict(int)
    total: dict[str, int] = defaultdict(int)
    answered_implicit = []
    for script in scenes:
        policy = Policy()
        replies = [policy.hear(transcribe(turn.text)) for turn in script.turns]
        reply = replies[script.t_index]
        if script.condition == "implicit":
            if reply is not None:
                answered_implicit.append(script.script_id)
            continue
        total[script.task_type] += 1
        verdict = judge.judge_answer(script.question, script.gold_answer, script.gold_aliases, reply or "")
        correct[script.task_type] += verdict.label == "correct"
    assert answered_implicit == []
    assert set(total) == set(FAMILIES) and min(total.values()) >= 25
    rates = {family: correct[family] / total[family] for family in total}
    assert min(rates.values()) >= MIN_RATE, rates


@pytest.mark.parametrize("heard, why", [
    ("Aria, go on then. What time do we get in?", "named, but no request it takes"),
    ("Maria, what time do we get in?", "not addressed by name"),
    ("Right, the train leaves at 905.", "not addressed by name"),
])
def test_the_cascade_says_why_it_stayed_silent(heard: str, why: str) -> None:
    """The note on a silent end of turn tells a missed name from a name heard without a request it takes."""
    from types import SimpleNamespace

    from adapters.cascade import CascadeAgent

    assert addressed_request(heard) is None
    assert CascadeAgent._why_silent(SimpleNamespace(policy=Policy()), heard) == why  # type: ignore[arg-type]
