"""Templates for the turns around the task: side talk (N1/N2/N3), the N4 question/resolution and the cue turn.

All wording is data, keyed by style ("casual" / "formal", picked by the scene's register). Placeholders:
{to} a human addressee, {item}/{chore} from the activity, {hm} a register interjection, {device}/{command} the
other device, {ref} how the implicit condition refers to Aria, {asker}/{answer} for N4.
Filler text never contains digits, so the numbers in a scene are exactly the task's facts.
"""

from __future__ import annotations

# N1: Aria is mentioned, never asked. Statements only (no question marks, no imperatives to Aria).
# Templates with {to} are said to a human (addressee = that human), the others to nobody in particular.
N1: dict[str, list[str]] = {
    "casual": [
        "Aria played the wrong playlist at my birthday.",
        "I swear Aria understands my accent better than my mum does.",
        "{to}, Aria woke me up an hour early on Monday.",
        "My little brother talks to Aria more than he talks to me.",
        "{to}, I showed Aria to my gran and she loved it.",
        "Aria mixed up my shopping list last week.",
        "Honestly, Aria is better at trivia than I am.",
    ],
    "formal": [
        "I find Aria quite useful for reminders, to be honest.",
        "{to}, Aria has been rather reliable lately.",
        "Aria set up all of my reminders last month.",
        "{to}, I mentioned Aria to my manager yesterday.",
        "Aria once read out the wrong address for me.",
        "I believe Aria was installed here last spring.",
    ],
}

# N2 to another human in the room.
N2_HUMAN: dict[str, list[str]] = {
    "casual": [
        "{to}, can you grab {item}?",
        "{to}, have you seen {item}?",
        "{to}, can you {chore}?",
        "{to}, your turn to {chore}.",
        "{to}, did you bring {item}?",
        "{to}, pass me {item} when you can.",
        "{to}, I think {item} is behind you.",
        "{to}, you said you'd {chore}, right?",
        "{to}, don't forget to {chore} later.",
    ],
    "formal": [
        "{to}, could you pass me {item}, please?",
        "{to}, would you mind if I borrowed {item}?",
        "{to}, would you be able to {chore}?",
        "{to}, I believe it is your turn to {chore}.",
        "{to}, do you know where {item} went?",
        "{to}, please remind me to {chore} afterwards.",
        "{to}, thank you for bringing {item}.",
        "{to}, shall we {chore} next?",
    ],
}

# N2 to the other device ("Hey Juniper, ...").
N2_DEVICE: dict[str, list[str]] = {
    "casual": ["Hey {device}, {command}.", "{device}, {command}."],
    "formal": ["{device}, please {command}.", "Hey {device}, {command}, please."],
}

# N3: nobody addressed — self-talk and thinking aloud. {hm} is the register's interjection.
N3: dict[str, list[str]] = {
    "casual": [
        "{hm} where did I put {item}?",
        "{hm} I still need to {chore}.",
        "{hm} I always forget {item}.",
        "{hm} what was I doing again?",
        "{hm} my back is killing me today.",
        "{hm} I really should {chore} soon.",
        "{hm} this is taking forever.",
        "{hm} I'm starving already.",
    ],
    "formal": [
        "{hm} where did I leave {item}?",
        "{hm} I ought to {chore} soon.",
        "{hm} where was I?",
        "{hm} I must remember {item} next time.",
        "{hm} this is going rather well.",
        "{hm} I think that is everything.",
        "{hm} it is later than I thought.",
    ],
}

# N4: a question to Aria with a short answer that a human then supplies (or waves off).
N4_FACTS: list[tuple[str, str]] = [
    ("what's the capital of Portugal", "Lisbon"),
    ("what's the capital of Canada", "Ottawa"),
    ("what's the capital of Australia", "Canberra"),
    ("what's the capital of Kenya", "Nairobi"),
    ("what's the capital of Norway", "Oslo"),
    ("what's the capital of Chile", "Santiago"),
    ("how many legs does a spider have", "eight"),
    ("how many players are on a football team", "eleven"),
    ("which planet is closest to the sun", "Mercury"),
    ("what's the tallest mountain in the world", "Everest"),
    ("who painted the Mona Lisa", "Leonardo da Vinci"),
    ("what's the largest ocean", "the Pacific"),
    ("how many sides does a hexagon have", "six"),
    ("what gas do plants breathe in", "carbon dioxide"),
]

N4Q: dict[str, list[str]] = {
    "casual": ["Aria, quick one, {question}?", "Hey Aria, {question}?", "Aria, {question}?"],
    "formal": ["Aria, may I ask, {question}?", "Aria, one question, {question}?"],
}

# N4R forms. "answer_other": another human answers the asker; "answer_self": the asker remembers;
# "dismiss": a human tells Aria it need not answer.
N4R: dict[str, dict[str, list[str]]] = {
    "answer_other": {
        "casual": ["{asker}, it's {answer}. No need, Aria.", "It's {answer}, {asker}. Don't worry, Aria.",
                   "{answer}, {asker}, everyone knows that. Skip it, Aria."],
        "formal": ["{asker}, it is {answer}. Aria, no need to answer.",
                   "It is {answer}, {asker}. That is fine, Aria."],
    },
    "answer_self": {
        "casual": ["Oh wait, it's {answer}. Never mind, Aria.", "Actually, it's {answer}, forget it, Aria."],
        "formal": ["Ah, it is {answer}, I remember now. Never mind, Aria.",
                   "Actually, it is {answer}. No need, Aria."],
    },
    "dismiss": {
        "casual": ["Actually, skip it, Aria, it doesn't matter.",
                   "Never mind, Aria, we'll look it up later."],
        "formal": ["Aria, please disregard that question.", "On second thought, Aria, there is no need."],
    },
}
N4R_WEIGHTS: dict[str, float] = {"answer_other": 0.5, "answer_self": 0.35, "dismiss": 0.15}

# The turn before T: a human speaks to the T speaker ({to}). Explicit and implicit share the label (N2) and
# addressee; only the implicit wording points at the assistant, because the implicit T itself carries no name.
# PRE_T fits any request; PRE_T_CALC only requests that need working out (not a plain recall).
PRE_T: dict[str, list[tuple[str, str]]] = {
    "casual": [
        ("{to}, don't bother with your phone.", "{to}, don't bother with your phone, just ask {ref}."),
        ("{to}, you're the one who wanted to know.", "{to}, you wanted to know, so ask {ref}."),
        ("Hang on, {to}, let's not guess.", "Hang on, {to}, let's check with {ref}."),
        ("{to}, you go, I'm hopeless with this stuff.", "{to}, you ask {ref}, I'm hopeless with this stuff."),
        ("{to}, don't look at me.", "{to}, don't look at me, ask {ref}."),
    ],
    "formal": [
        ("{to}, perhaps we should confirm that.", "{to}, perhaps {ref} can confirm that for us."),
        ("{to}, let us not guess.", "{to}, rather than guess, put it to {ref}."),
        ("{to}, would you check that for us?", "{to}, would you check that with {ref}?"),
        ("{to}, I am afraid I cannot recall.", "{to}, I cannot recall, but {ref} will know."),
    ],
}
PRE_T_CALC: dict[str, list[tuple[str, str]]] = {
    "casual": [
        ("{to}, stop counting on your fingers.", "{to}, stop counting on your fingers and ask {ref}."),
        ("{to}, put the calculator away.", "{to}, put the calculator away, {ref} can do it."),
    ],
    "formal": [
        ("{to}, there is no need to do that by hand.",
         "{to}, there is no need to do that by hand, ask {ref}."),
        ("{to}, let us not do the sums on paper.", "{to}, let us not do the sums on paper, ask {ref}."),
    ],
}
