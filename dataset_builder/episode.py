"""The Episode record (docs/conventions.md): what `rec.json` beside each 2-channel recording holds.

It is data shared by the orchestrator (which writes it) and the scorers (which read it without importing the
orchestrator), so a released recording can be scored on its own.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from dataset_builder.atomic import atomic_write_json
from dataset_builder.schema import SchemaError

EPISODE_FORMAT = 1
STATUSES = ("ok", "failed", "skipped")


@dataclass(frozen=True)
class TimelineEvent:
    """One user clip as it was actually played: realised times on the recording's clock."""

    turn_id: str
    label: str
    start_s: float
    end_s: float
    text: str = ""  # what the clip says (the script's words), where the plan knows it; "" in older records


@dataclass
class Episode:
    case_id: str
    benchmark: str
    condition: str
    pair_id: str
    status: str
    adapter: dict[str, Any]
    params: dict[str, Any]
    seed: int
    timeline: list[TimelineEvent]
    duration_s: float
    gold: dict[str, Any]
    failure: str | None = None
    model_text: list[list[Any]] = field(default_factory=list)
    # [t_s, note]: what an adapter logged of its own hearing and decisions (adapters.protocol.Frame.note); never
    # scored, shown on the report's episode page. Absent from older records.
    notes: list[list[Any]] = field(default_factory=list)
    wall_s: float = 0.0
    # Wall time of the agent's steps, apart from audio time (docs/scale.md live feasibility): None when it never
    # stepped, or in a record written before steps were timed. Built and read by metrics/feasibility.py.
    compute: dict[str, Any] | None = None
    format: int = EPISODE_FORMAT

    def said(self, from_s: float = 0.0, to_s: float = float("inf")) -> str:
        """The model's own text output stamped in [from_s, to_s): its per-frame pieces joined as given (they are
        deltas of one running text, so their own spaces separate words); "" from a model without text output."""
        return "".join(str(text) for t, text in self.model_text if from_s - 1e-6 <= float(t) < to_s - 1e-6)

    def event(self, turn_id: str) -> TimelineEvent | None:
        return next((e for e in self.timeline if e.turn_id == turn_id), None)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def save(self, path: Path) -> None:
        atomic_write_json(path, self.to_dict())

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, source: str | None = None) -> Episode:
        try:
            d = dict(data)
            d["timeline"] = [TimelineEvent(**e) for e in d["timeline"]]
            ep = cls(**d)
        except (KeyError, TypeError) as err:
            raise SchemaError(f"not an episode record ({err})", source=source, field="rec.json") from None
        if ep.status not in STATUSES:
            raise SchemaError(f"status {ep.status!r} not in {STATUSES}", source=source, field="status")
        return ep

    @classmethod
    def load(cls, path: Path) -> Episode:
        try:
            data = json.loads(Path(path).read_text())
        except json.JSONDecodeError as err:
            raise SchemaError(f"invalid JSON ({err})", source=str(path)) from None
        return cls.from_dict(data, source=str(path))
