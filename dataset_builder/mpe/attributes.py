"""Scene attributes and speaker pools for Duplex-MPE, as data.

A scene is drawn from one value of each of the five attributes (docs/benchmarks/mpe.md). Values are plain strings (they
are stored verbatim in `Script.attributes`); the words each value brings live in the phrase banks (phrases/, one
file per value). No name here may contain the letters "aria": only labelled turns may mention Aria.
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

# Each activity happens in the settings where people plausibly do it; the scene draws its setting from these.
ACTIVITY_SETTINGS: dict[str, list[str]] = {
    "planning a weekend trip": ["a kitchen at home", "a university dorm common room", "a small office meeting room",
                                "a living room on a Sunday afternoon", "a hotel lobby", "a back garden",
                                "a shared holiday cottage"],
    "cooking dinner together": ["a kitchen at home", "a shared holiday cottage", "a back garden",
                                "a university dorm common room"],
    "settling up after a night out": ["a kitchen at home", "a hotel lobby", "a living room on a Sunday afternoon",
                                      "a university dorm common room", "a shared holiday cottage"],
    "organising a birthday party": ["a kitchen at home", "a living room on a Sunday afternoon",
                                    "a community centre hall", "a back garden", "a small office meeting room",
                                    "a university dorm common room"],
    "studying for an exam": ["a university dorm common room", "a kitchen at home",
                             "a living room on a Sunday afternoon", "a community centre hall",
                             "a small office meeting room", "a shared holiday cottage"],
    "packing for a move": ["a kitchen at home", "a living room on a Sunday afternoon",
                           "a university dorm common room", "a small office meeting room"],
    "playing a board game": ["a living room on a Sunday afternoon", "a kitchen at home", "a shared holiday cottage",
                             "a university dorm common room", "a community centre hall", "a back garden",
                             "a hotel lobby"],
    "fixing a bike": ["a back garden", "a kitchen at home", "a shared holiday cottage", "a community centre hall",
                      "a university dorm common room"],
}
ACTIVITIES: list[str] = list(ACTIVITY_SETTINGS)

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

# The command lists of each kind live in phrases/devices.yaml.
DEVICE_COMMAND_KINDS = ("speaker", "tv", "phone", "thermostat", "vacuum")

# Names for the *other* device in the room; disjoint from the human names.
DEVICE_NAMES: list[str] = ["Juniper", "Nimbus", "Orbit", "Pebble", "Beacon", "Willow", "Comet", "Tango"]

# register -> style: which wording the scene draws ("casual" or "formal" phrase-bank blocks). The register's own
# voice comes from its phrase-bank file and openers (phrases/registers/, phrases/registers.yaml).
REGISTERS: dict[str, dict[str, str]] = {
    "relaxed and joking": {"style": "casual"},
    "warm and friendly": {"style": "casual"},
    "excited and chatty": {"style": "casual"},
    "tired and low-key": {"style": "casual"},
    "polite and formal": {"style": "formal"},
    "brisk and businesslike": {"style": "formal"},
}

STYLES = ("casual", "formal")

# Names the default ASR spells one way only: "Mei" (heard "May"), "Zoe" ("Zoey"), "Ines" ("Inez") and "Kai" ("Ky")
# were replaced, because the build's speech gate could never confirm them.
HUMAN_NAMES: list[str] = [
    "Sam", "Priya", "Tom", "Lena", "Omar", "Grace", "Diego", "Emma", "Jonas", "Chloe", "Ravi", "Hannah",
    "Kofi", "Olivia", "Felix", "Nora", "Luca", "Yuki", "Ben", "Daniel", "Amir", "Ruth", "Theo", "Sofia",
    "Marcus", "Leila", "Owen", "Tara", "Hugo", "Esther", "Jack", "Julia", "Nikhil", "Freya", "Mateo", "Ada",
]

def attribute_values() -> dict[str, list[str]]:
    """The value list of each attribute, in SCENE_ATTRIBUTES order."""
    return {
        "setting": list(SETTINGS),
        "activity": list(ACTIVITIES),
        "relationship": list(RELATIONSHIPS),
        "device_context": list(DEVICE_CONTEXTS),
        "register": list(REGISTERS),
    }
