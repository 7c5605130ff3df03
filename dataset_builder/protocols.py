"""Typed, typo-rejecting parameter sets of each benchmark's protocol (SPEC §5).

Every default is named here once; the orchestrator stores the set it ran with in each `rec.json`, and the
scorer applies thresholds from the same record (or from overrides) to stored measurements.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from dataset_builder.schema import SchemaError


@dataclass(frozen=True)
class MPEProtocol:
    # scheduler (what the user stream does)
    post_preamble_s: float = 1.0  # silence after the duty preamble, outside every scoring window
    t_onset_window_s: float = 5.0  # a fresh onset may start this long after T ends
    endpoint_s: float = 1.5  # confirmed model silence that ends a T response
    response_cap_s: float = 20.0  # longest wait for a T response to end, from T end
    n4_answer_window_s: float = 3.0  # silence streamed after N4Q before N4R plays regardless
    tail_s: float = 3.0  # silence after the last turn
    # scoring thresholds (applied to stored measurements)
    yield_tolerance_s: float = 1.0  # speech active at N4R onset must end within this
    # streaming and batch VAD (Silero, SPEC §5)
    vad_min_speech_ms: int = 250
    vad_merge_gap_ms: int = 300

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, source: str = "protocol") -> MPEProtocol:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise SchemaError(f"unknown parameter(s) {unknown}; known: {sorted(known)}", source=source)
        try:
            return cls(**{k: type(getattr(cls(), k))(v) for k, v in data.items()})
        except (TypeError, ValueError) as err:
            raise SchemaError(f"bad parameter value ({err})", source=source) from None

    def override(self, items: list[str]) -> MPEProtocol:
        """Apply "name=value" strings (from the CLI)."""
        updates: dict[str, Any] = {}
        for item in items:
            name, sep, value = item.partition("=")
            if not sep:
                raise SchemaError(f"expected name=value, got {item!r}", source="--param")
            updates[name.strip()] = value.strip()
        merged = {**self.to_dict(), **MPEProtocol.from_dict(
            {**self.to_dict(), **updates}, source="--param").to_dict()}
        return replace(self, **merged)
