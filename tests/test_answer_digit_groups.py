"""The answer rule on numbers whisper writes as digit groups (metrics/answer_match.py, module docstring).

Whisper base writes "one hundred eighty-nine" as "100 89" or "10089" and "one thousand five hundred twenty-nine"
as "1500 29" or "150029" (benchmarks/bench_asr.py, the oracle's spoken answers): a right answer must still be
right, and a wrong one still wrong. Each row is a Duplex-MPE question with its gold and aliases as the dataset
writes them, a transcript, and the exact verdict and reason.
"""

from __future__ import annotations

import pytest

from metrics.answer_match import digit_groups, match, spoken_terms

ROOM = ("What was the function room number, as stated earlier in the conversation?", "189",
        ["room 189", "room one hundred eighty-nine", "one eight nine", "one hundred eighty-nine", "one eighty-nine"])
PIES = ("Pies cost 21 dollars each and 9 are needed. What is the total cost in dollars?", "189",
        ["$189", "189 dollars", "one hundred eighty-nine dollars"])
TICKETS = ("Tickets cost 15 dollars each and 7 are needed. What is the total cost in dollars?", "105",
           ["$105", "105 dollars", "one hundred five dollars"])
DOOR = ("What was the building door code, as stated earlier in the conversation?", "1529",
        ["1 5 2 9", "one five two nine"])
HALL = ("What was the hall door code, as stated earlier in the conversation?", "1546", ["1 5 4 6", "one five four six"])
WIFI = ("What was the building door code, as stated earlier in the conversation?", "8814",
        ["8 8 1 4", "eight eight one four"])
GATE = ("What was the gate code, as stated earlier in the conversation?", "0409", ["0 4 0 9", "oh four oh nine"])
LOCKER = ("What was my locker number, as stated earlier in the conversation?", "78",
          ["locker 78", "locker seventy-eight", "seven eight", "seventy-eight"])
TIMES = ("6 boxes hold 7 pens each. How many pens are there?", "42", ["42 pens", "forty-two"])
CHAIRS = ("100 adults and 89 children each need one of the chairs. How many chairs are needed?", "189",
          ["189 chairs", "one hundred eighty-nine"])
CLOCK = ("An exam starts at 9:40 and lasts 35 minutes. At what time does it finish?", "10:15",
         ["10 15", "quarter past ten"])
LABEL = ("Which gate does the flight leave from, as stated earlier in the conversation?", "B112", ["B 112"])
SEATS = ("The hall had 1500 seats before the new balcony. How many seats does it have now?", "1529",
         ["1529 seats"])


@pytest.mark.parametrize("n, terms", [
    (0, []), (7, [7]), (42, [42]), (100, [100]), (189, [100, 89]), (105, [100, 5]), (1000, [1000]),
    (1529, [1000, 500, 29]), (2009, [2000, 9]), (2400, [2000, 400]), (189_529, [189_000, 500, 29]),
    (1_500_029, [1_500_000, 29]),
])
def test_spoken_terms(n: int, terms: list[int]) -> None:
    assert spoken_terms(n) == terms


@pytest.mark.parametrize("n, groups", [
    (0, []), (7, []), (42, []), (100, []), (1000, []),
    (189, [(100, 89)]), (105, [(100, 5)]), (2009, [(2000, 9)]),
    (1529, [(1000, 529), (1500, 29), (1000, 500, 29)]),
    (189_529, [(189_000, 529), (189_500, 29), (189_000, 500, 29)]),
])
def test_digit_groups(n: int, groups: list[tuple[int, ...]]) -> None:
    assert digit_groups(n) == groups


@pytest.mark.parametrize("case, response, correct, reason", [
    # --- the gold's own digit groups read as the gold ---
    (ROOM, "The answer is 10089.", True, "digits: states 189 (heard as '10089')"),
    (ROOM, "The answer is 100 89.", True, "digits: states 189 (heard as '100 89')"),
    (ROOM, "Room 100 and 89.", True, "digits: states 189 (heard as '100 and 89')"),
    (ROOM, "The answer is 189.", True, "digits: states 189"),
    (ROOM, "One hundred eighty-nine.", True, "digits: states 189"),
    (PIES, "The answer is 10089.", True, "number: states 189 (heard as '10089')"),
    (PIES, "100 and 89 dollars.", True, "number: states 189 dollars (heard as '100 and 89')"),
    (PIES, "It's 100 89, that's 100 89 dollars.", True,
     "number: states 189, 189 dollars (heard as '100 89', '100 89')"),
    (TICKETS, "100 5 dollars.", True, "number: states 105 dollars (heard as '100 5')"),
    (DOOR, "The answer is 150029.", True, "digits: states 1529 (heard as '150029')"),
    (DOOR, "The answer is 1500 29.", True, "digits: states 1529 (heard as '1500 29')"),
    (DOOR, "1,000 529.", True, "digits: states 1529 (heard as '1000 529')"),
    (DOOR, "1000 500 29.", True, "digits: states 1529 (heard as '1000 500 29')"),
    (DOOR, "1000529", True, "digits: states 1529 (heard as '1000529')"),
    (DOOR, "1 5 2 9.", True, "digits: states 1 5 2 9"),  # read digit by digit, as before
    (HALL, "The answer is 1500 46.", True, "digits: states 1546 (heard as '1500 46')"),
    (SEATS, "1500 29 seats.", True, "number: states 1529 seats (heard as '1500 29')"),  # only 1500 is given
    (CHAIRS, "100 and 89, so 189 chairs.", True, "number: states 189 chairs"),
    # --- anything else stays what it says ---
    (ROOM, "100.", False, "digits: states 100, not only '189'"),
    (ROOM, "10088.", False, "digits: states 10088, not only '189'"),
    (ROOM, "100 88.", False, "digits: states 100 88, not only '189'"),
    (ROOM, "100 089.", False, "digits: states 100 089, not only '189'"),  # "089" is not a spoken group
    (ROOM, "1089.", False, "digits: states 1089, not only '189'"),
    (ROOM, "It is 42 and 100 89.", False, "digits: states 189, 42, not only '189' (heard as '100 89')"),
    (ROOM, "Not 100 89, it is 190.", False, "digits: states 190, not only '189' (heard as '100 89')"),
    (PIES, "100 or 89 dollars.", False, "number: states 100 or, 89 dollars, not only '189'"),
    (PIES, "100 dollars.", False, "number: states 100 dollars, not only '189'"),
    (PIES, "10,089 dollars.", True, "number: states 189 dollars (heard as '10089')"),  # indistinguishable: see rule
    (TICKETS, "1005 dollars.", False, "number: states 1005 dollars, not only '105'"),  # "one thousand five"
    (DOOR, "1500.", False, "digits: states 1500, not only '1529'"),
    (DOOR, "150 29.", False, "digits: states 150 29, not only '1529'"),
    (DOOR, "15029.", False, "digits: states 15029, not only '1529'"),
    (DOOR, "1500 529.", False, "digits: states 1500 529, not only '1529'"),
    (WIFI, "The answer is 88814.", False, "digits: states 88814, not only '8814'"),  # a mishearing, not a format
    (WIFI, "8-8-1-4.", True, "digits: states 8 8 1 4"),
    (LOCKER, "The answer is 178.", False, "digits: states 178, not only '78'"),
    (GATE, "400 9.", False, "digits: states 400 9, not only '0409'"),  # "oh four oh nine" has no hundreds
    (TIMES, "4 2.", False, "number: states 4, 2, not only '42'"),  # an amount is said as a number
    (TIMES, "42.", True, "number: states 42"),
    (CHAIRS, "100 and 89 make 190.", False, "number: states 190, not only '189'"),  # the question's numbers
    (CHAIRS, "100 89 chairs.", False, "number: no answer of this kind stated"),
    (SEATS, "1500 seats and 29 more.", False, "number: states 29, not only '1529'"),
    # --- other kinds of gold are not composed ---
    (CLOCK, "At 10 15.", True, "clock: states 10 15"),
    (CLOCK, "At 1015.", True, "clock: states 1015"),
    (LABEL, "Gate B 100 12.", False, "label: states b 100 12, not only 'B112'"),
])
def test_digit_groups_in_transcripts(case: tuple[str, str, list[str]], response: str, correct: bool,
                                     reason: str) -> None:
    question, gold, aliases = case
    assert match(question, gold, aliases, response) == (correct, reason)
