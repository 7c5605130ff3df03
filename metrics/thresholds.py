"""Checking `score --param` overrides against what a benchmark's verdicts can apply and a recording supports.

A scorer re-applies thresholds to stored measurements, so only thresholds may change at score time; every other
protocol parameter shaped the recording itself (how long the user stream waited, what the VAD merged) and is
fixed at run time. Each benchmark declares its thresholds with a `Limit`; this module turns a bad override into
one `UsageError` line naming the parameter and what is allowed, as `run --param` does for the protocol.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from dataset_builder.errors import UsageError


@dataclass(frozen=True)
class Limit:
    """The values a threshold may take at score time."""

    low: float = 0.0
    low_inclusive: bool = True
    # True: may not exceed the value the run was recorded with (e.g. an onset window the scheduler stopped
    # waiting at: a wider one would count onsets the recording never gave a chance to happen).
    at_most_recorded: bool = False
    why_recorded: str = ""  # one clause saying why, for the error message


def _names(names: Iterable[str]) -> str:
    return ", ".join(sorted(names))


def validate_overrides(overrides: Mapping[str, Any], limits: Mapping[str, Limit], fixed: Iterable[str],
                       recorded: Mapping[str, Any], prefix: str = "--param ") -> dict[str, float]:
    """The overrides as floats, or UsageError for an unknown name, a run-time parameter, a non-number, a value
    out of range, or one wider than the recording supports. `recorded` holds the run's own values; `prefix` is
    how the error names where a value came from (`score --param`; "" for an `evaluate` module's argument)."""
    fixed = set(fixed)
    out: dict[str, float] = {}
    for name, value in overrides.items():
        if name not in limits:
            if name in fixed:
                was = f" (this run used {name}={recorded[name]})" if name in recorded else ""
                raise UsageError(
                    f"{prefix}{name}: a protocol parameter fixed at run time{was}; `score` can change only the "
                    f"thresholds {_names(limits)}; to change {name}, run again with `duplex-eval run --param "
                    f"{name}=...` into another folder")
            raise UsageError(f"{prefix}{name}: unknown threshold; the thresholds are {_names(limits)}")
        lim = limits[name]
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise UsageError(f"{prefix}{name}={value!r}: expected a number of seconds")
        v = float(value)
        if not math.isfinite(v):
            raise UsageError(f"{prefix}{name}={value!r}: expected a finite number")
        if v < lim.low or (v == lim.low and not lim.low_inclusive):
            op = ">=" if lim.low_inclusive else ">"
            raise UsageError(f"{prefix}{name}={v:g}: out of range; it must be {op} {lim.low:g}")
        if lim.at_most_recorded and name in recorded and v > float(recorded[name]) + 1e-9:
            rec = float(recorded[name])
            raise UsageError(
                f"{prefix}{name}={v:g}: wider than the {rec:g} the run was recorded with{lim.why_recorded}; "
                f"use a value <= {rec:g}, or run again with `duplex-eval run --param {name}={v:g}`")
        out[name] = v
    return out
