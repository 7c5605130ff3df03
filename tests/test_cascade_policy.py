"""The cascade's text policy on transcripts as whisper tiny.en actually writes them ("Aria" -> "area")."""

from __future__ import annotations

import pytest

from adapters.cascade_policy import Policy, addressed_request


@pytest.mark.parametrize(
    "heard, answer",
    [
        (["Hugo, the tickets are 23 each.", "We need 8 tickets.", "What's the total area?"], "184"),
        (["The sandwiches are 5 each. So that's 7 sandwiches we need.", "Area, how much will that cost?"], "35"),
        (["So the bill is 117 altogether.", "Nikhil, we agreed to divide it 3 ways.",
          "Area, could you calculate each person's share?"], "39"),
        (["Tom, the coach leaves at 505. And the trip takes 45 minutes apparently.", "So when do we arrive area?"],
         "5:50"),
        (["The bus departs at 9:40.", "The journey takes 1 hour and 35 minutes.", "Aria, what time do we get there?"],
         "11:15"),
        (["So the team dinner is on Friday.", "Oh, the email says it moved 2 days later.",
          "Aria, what day is the team dinner now?"], "Sunday"),
        (["Huh, the trip lasts 7 weeks.", "Aria, how many days is 7 weeks?"], "49"),
        (["Okay, 7 adults so far.", "Omar, and 7 kids as well.", "Aria, how many life jackets do we need in total?"],
         "14"),
        (["Felix, for the record, the room number is 147.", "Area, could you remind us of the room number?"], "147"),
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
