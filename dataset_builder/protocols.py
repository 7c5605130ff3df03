"""Typed, typo-rejecting parameter sets of each benchmark's protocol (SPEC §5).

Every default is named here once, with the range it may take; the orchestrator stores the set it ran with in
each `rec.json`, and the scorer applies thresholds from the same record (or from overrides) to stored
measurements.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from dataset_builder.schema import SchemaError

# Lower bounds by parameter: (bound, inclusive). A duration the scheduler waits for must be > 0; a silence it
# merely plays may be 0. `vad_merge_gap_ms=0` means "merge nothing", a legitimate VAD setting.
MPE_RANGES: dict[str, tuple[float, bool]] = {
    "post_preamble_s": (0.0, True),
    "t_onset_window_s": (0.0, False),
    "endpoint_s": (0.0, False),
    "response_cap_s": (0.0, False),
    "n4_answer_window_s": (0.0, False),
    "tail_s": (0.0, True),
    "yield_tolerance_s": (0.0, True),
    "vad_min_speech_ms": (0, False),
    "vad_merge_gap_ms": (0, True),
}


def coerce(name: str, kind: type, value: Any) -> Any:
    """`value` as `kind` (int or float): numbers or their text; never a bool, NaN, inf or a fractional int."""
    if isinstance(value, bool):
        raise ValueError(f"{name}={value!r}: expected a number")
    if kind is int:
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, int):
            return value
        if isinstance(value, str) and value.strip().lstrip("+-").isdigit():
            return int(value.strip())
        raise ValueError(f"{name}={value!r}: expected a whole number")
    try:
        out = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name}={value!r}: expected a number") from None
    if not math.isfinite(out):
        raise ValueError(f"{name}={value!r}: expected a finite number")
    return out


def check_range(name: str, value: float, bound: float, inclusive: bool) -> str | None:
    """What is wrong with `value` (a phrase), or None when it lies in range."""
    ok = value >= bound if inclusive else value > bound
    return None if ok else f"{name}={value:g} is out of range: it must be {'>=' if inclusive else '>'} {bound:g}"


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

    def __post_init__(self) -> None:
        problems = [p for name, (bound, inclusive) in MPE_RANGES.items()
                    if (p := check_range(name, getattr(self, name), bound, inclusive))]
        if problems:
            raise SchemaError("; ".join(problems), source="protocol")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, source: str = "protocol") -> MPEProtocol:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise SchemaError(f"unknown parameter(s) {unknown}; known: {sorted(known)}", source=source)
        try:
            values = {k: coerce(k, type(getattr(cls(), k)), v) for k, v in data.items()}
        except (TypeError, ValueError) as err:
            raise SchemaError(f"bad parameter value ({err})", source=source) from None
        try:
            return cls(**values)
        except SchemaError as err:
            raise SchemaError(str(err).removeprefix("file protocol: "), source=source) from None

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
