"""Full-Duplex-Bench v1's turn-taking tasks in M3's events: one definition, read by the import of FDB samples
(`dataset_builder.importers.fdb_v1`) and by the export of a run into FDB's layout (`metrics.m3.fdb_export`).

| FDB v1 task (file) | our event |
|---|---|
| smooth_turn_taking (`turn_taking.json`) | SHIFT |
| pause_handling (`pause.json`) | PAUSE |
| user_interruption (`interrupt.json`) | BARGE_IN |
"""

from __future__ import annotations

LAYOUT = "Full-Duplex-Bench v1"
# Their v1 tasks: our event type -> (their evaluate.py --task, the annotation file, its "text" placeholder).
TASKS: dict[str, tuple[str, str, str]] = {
    "SHIFT": ("smooth_turn_taking", "turn_taking.json", "[TURN-TAKING]"),
    "PAUSE": ("pause_handling", "pause.json", "[PAUSE]"),
    "BARGE_IN": ("user_interruption", "interrupt.json", ""),
}
EVENT_OF_FILE = {file: event for event, (_, file, _) in TASKS.items()}
LEFT_OUT_EVENTS = {
    "BC": "FDB v1's backchannel task scores the model's own backchannels while the user holds a long turn; our BC "
          "is the user's backchannel during the model's turn (FDB v1.5's user_backchannel)",
}
