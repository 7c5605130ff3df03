"""Scene attributes and speaker pools for Duplex-MPE, as data.

A scene is drawn from one value of each of the five attributes (SPEC §5). Values are plain strings (they are
stored verbatim in `Script.attributes`); the dicts next to them carry what the generator needs to turn a
value into wording: the register's style and interjections, the activity's objects and chores, the device's
commands. No name or phrase here may contain the letters "aria": only labelled turns may mention Aria.
"""

from __future__ import annotations

SETTINGS: list[str] = [
    "a kitchen at home",
    "a university dorm common room",
    "a small office meeting room",
    "a living room on a Sunday afternoon",
    "a hotel lobby",
    "a back garden",
    "a community centre hall",
    "a shared holiday cottage",
]

# Each activity supplies objects ("{item}") and chores ("{chore}", a verb phrase) for the filler templates, so
# the side talk fits what the people are doing.
ACTIVITIES: dict[str, dict[str, list[str]]] = {
    "planning a weekend trip": {
        "items": ["the map", "the printed tickets", "my charger", "the packing list"],
        "chores": ["check the weather", "book the parking", "pack the snacks", "find the passports"],
    },
    "cooking dinner together": {
        "items": ["the big pan", "the garlic", "the wooden spoon", "the oven gloves"],
        "chores": ["chop the onions", "stir the sauce", "set the table", "wash the lettuce"],
    },
    "settling up after a night out": {
        "items": ["the receipt", "my wallet", "the card reader", "my glasses"],
        "chores": ["find the receipt", "call a taxi", "check the tip", "tidy the table"],
    },
    "organising a birthday party": {
        "items": ["the balloons", "the guest list", "the candles", "the tape"],
        "chores": ["blow up the balloons", "hang the banner", "text the guests", "hide the cake"],
    },
    "studying for an exam": {
        "items": ["my notes", "the highlighter", "the textbook", "the flash cards"],
        "chores": ["quiz me on chapter two", "summarise the lecture", "make more coffee",
                   "find the old exam"],
    },
    "packing for a move": {
        "items": ["the tape gun", "the marker", "the bubble wrap", "the box cutter"],
        "chores": ["label the boxes", "wrap the plates", "take the rugs out", "empty the fridge"],
    },
    "playing a board game": {
        "items": ["the dice", "the rule book", "the score sheet", "the sand timer"],
        "chores": ["shuffle the cards", "keep the score", "read the rules", "set up the board"],
    },
    "fixing a bike": {
        "items": ["the pump", "the spanner", "the spare tube", "the chain oil"],
        "chores": ["hold the frame", "check the brakes", "tighten the seat", "pump the back tyre"],
    },
}

RELATIONSHIPS: list[str] = [
    "flatmates",
    "classmates",
    "coworkers",
    "siblings",
    "old friends",
    "neighbours",
    "a family",
    "teammates",
]

# `kind` picks the command list in DEVICE_COMMANDS; None means Aria is the only voice-controlled device, so no
# N2 turn addresses a device.
DEVICE_CONTEXTS: dict[str, str | None] = {
    "another smart speaker in the room": "speaker",
    "a voice-controlled TV": "tv",
    "a phone assistant on the table": "phone",
    "a thermostat that takes voice commands": "thermostat",
    "a robot vacuum that takes voice commands": "vacuum",
    "no other voice devices": None,
}

DEVICE_COMMAND_KINDS = ("speaker", "tv", "phone", "thermostat", "vacuum")

DEVICE_COMMANDS: dict[str, list[str]] = {
    "speaker": ["play some quiet music", "turn the volume down", "pause the music", "skip this song"],
    "tv": ["turn the sound down", "switch to the news", "pause the film", "turn yourself off"],
    "phone": ["remind me to call the bank tonight", "text my sister I'm running late",
              "set a timer for ten minutes", "turn on do not disturb"],
    "thermostat": ["turn the heating down", "warm the room up a bit", "switch to eco mode",
                   "turn the heating off"],
    "vacuum": ["go back to your dock", "clean the hallway", "stop cleaning for now", "skip the kitchen"],
}

# Names for the *other* device in the room; disjoint from the human names.
DEVICE_NAMES: list[str] = ["Juniper", "Nimbus", "Orbit", "Pebble", "Beacon", "Willow", "Comet", "Tango"]

# register -> style (which template variant to use: "casual" or "formal") and the interjections that open its
# thinking-aloud turns, so a joking scene and a businesslike one sound different.
REGISTERS: dict[str, dict[str, str | list[str]]] = {
    "relaxed and joking": {"style": "casual", "interjections": ["Ha,", "Okay,", "Oh man,"]},
    "warm and friendly": {"style": "casual", "interjections": ["Okay,", "Oh,", "Hmm,"]},
    "excited and chatty": {"style": "casual", "interjections": ["Ooh,", "Oh wow,", "Okay okay,"]},
    "tired and low-key": {"style": "casual", "interjections": ["Ugh,", "Hmm,", "Right,"]},
    "polite and formal": {"style": "formal", "interjections": ["Now,", "Let me see,", "Well,"]},
    "brisk and businesslike": {"style": "formal", "interjections": ["Right,", "Now,", "Okay,"]},
}

STYLES = ("casual", "formal")

HUMAN_NAMES: list[str] = [
    "Sam", "Priya", "Tom", "Lena", "Omar", "Grace", "Diego", "Mei", "Jonas", "Chloe", "Ravi", "Hannah",
    "Kofi", "Ines", "Felix", "Nora", "Luca", "Yuki", "Ben", "Zoe", "Amir", "Ruth", "Theo", "Sofia",
    "Marcus", "Leila", "Owen", "Tara", "Hugo", "Esther", "Kai", "Julia", "Nikhil", "Freya", "Mateo", "Ada",
]

# How the implicit condition refers to Aria without naming it (in the turn before T).
ASSISTANT_REFERENCES: list[str] = ["the assistant", "our assistant", "the assistant on the shelf"]


def attribute_values() -> dict[str, list[str]]:
    """The value list of each attribute, in SCENE_ATTRIBUTES order."""
    return {
        "setting": list(SETTINGS),
        "activity": list(ACTIVITIES),
        "relationship": list(RELATIONSHIPS),
        "device_context": list(DEVICE_CONTEXTS),
        "register": list(REGISTERS),
    }
