"""Timing statistics the synthetic M3 pipeline samples from (paper §III-B1, step 1 and 4; DESIGN.md "Timeline").

`stats_from_dialogues` measures them on extracted events (a corpus a user owns, through `duplex-eval events
--stats-out`); `default_stats` reads the shipped defaults (`m3_timing_stats_default.json`, per language x domain,
each number with its provenance). Both are `TimingStats`, saved as validated JSON and sampled with a seeded
`random.Random`, so a build is reproducible from (stats file, seed).

A distribution is stored as its quantile function (`Quantiles`): a few (probability, value) points, linearly
interpolated. That one form holds a corpus's measurements (21 points) and a default written by hand (7 points)
alike, stays readable in JSON, and samples exactly by inverse transform, including truncation to the range a rule
allows (a PAUSE must stay longer than the IPU split gap, or it is no PAUSE once extracted back).
"""

from __future__ import annotations

import bisect
import json
import math
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from dataset_builder.atomic import atomic_write_json
from dataset_builder.rules.m3_events import TIME_EPS_S, Event, EventParams, Ipu
from dataset_builder.schema import SchemaError

FORMAT = "duplex-eval/m3-timing-stats/1"
DEFAULTS_FORMAT = "duplex-eval/m3-timing-defaults/1"
DEFAULTS_FILE = Path(__file__).with_name("m3_timing_stats_default.json")
MEASURED_PROBS = tuple(i / 20 for i in range(21))
# Measured quantiles fold the most extreme 1 % on each side into the 1st / 99th percentile: a 30 s silence in a
# corpus must not become a 30 s pause in a synthetic dialogue.
TRIM = 0.01
MIN_COUNT = 5  # fewer samples than this: the distribution is "not measured" (None), to be filled from defaults
# Sampled timings keep this far from each rule's boundary, so that VAD edge error (metrics/m3/extract.py) cannot
# turn an intended PAUSE into no split, or an intended SHIFT into a BARGE_IN, when the dialogue is extracted back.
DEFAULT_MARGIN_S = 0.1


@dataclass(frozen=True)
class Quantiles:
    """A distribution as its quantile function: value `values[i]` at probability `probs[i]`, linear in between."""

    probs: tuple[float, ...]
    values: tuple[float, ...]

    def validate(self, where: str, fld: str) -> None:
        p, v = self.probs, self.values
        if len(p) < 2 or len(p) != len(v):
            raise SchemaError(f"need >= 2 probs and as many values, got {len(p)} and {len(v)}", source=where,
                              field=fld)
        if p[0] != 0.0 or p[-1] != 1.0 or any(b <= a for a, b in zip(p, p[1:], strict=False)):
            raise SchemaError("probs must rise strictly from 0 to 1", source=where, field=fld)
        if not all(math.isfinite(x) for x in v) or any(b < a for a, b in zip(v, v[1:], strict=False)):
            raise SchemaError("values must be finite and non-decreasing", source=where, field=fld)

    def ppf(self, u: float) -> float:
        """The value at probability u (inverse CDF)."""
        p, v = self.probs, self.values
        k = min(max(bisect.bisect_right(p, u) - 1, 0), len(p) - 2)
        w = (u - p[k]) / (p[k + 1] - p[k])
        return v[k] + min(max(w, 0.0), 1.0) * (v[k + 1] - v[k])

    def cdf(self, x: float) -> float:
        """P(X <= x) under the interpolated quantile function."""
        p, v = self.probs, self.values
        if x < v[0]:
            return 0.0
        if x >= v[-1]:
            return 1.0
        k = bisect.bisect_right(v, x) - 1  # v[k] <= x < v[k + 1]
        return p[k] + (x - v[k]) / (v[k + 1] - v[k]) * (p[k + 1] - p[k])

    @property
    def mean(self) -> float:
        """The mean of what `sample` draws (the integral of the piecewise-linear quantile function)."""
        p, v = self.probs, self.values
        return sum((p[i + 1] - p[i]) * (v[i] + v[i + 1]) / 2 for i in range(len(p) - 1))

    def sample(self, rng: random.Random, lo: float | None = None, hi: float | None = None) -> float:
        """One draw by inverse transform, truncated to [lo, hi] exactly (u drawn between their CDFs); when the
        distribution has no mass there, the nearest allowed value."""
        a = 0.0 if lo is None else self.cdf(lo)
        b = 1.0 if hi is None else self.cdf(hi)
        x = self.ppf(a + (b - a) * rng.random())
        if lo is not None:
            x = max(x, lo)
        if hi is not None:
            x = min(x, hi)
        return x

    @classmethod
    def measured(cls, xs: Sequence[float]) -> Quantiles | None:
        """The quantiles of measured values at MEASURED_PROBS (extremes trimmed, see TRIM); None if too few."""
        if len(xs) < MIN_COUNT:
            return None
        s = sorted(xs)

        def q(u: float) -> float:  # linear-interpolation sample quantile (numpy's default)
            h = (len(s) - 1) * min(max(u, TRIM), 1.0 - TRIM)
            i = math.floor(h)
            return s[i] + (h - i) * (s[min(i + 1, len(s) - 1)] - s[i])

        return cls(MEASURED_PROBS, tuple(q(u) for u in MEASURED_PROBS))

    def to_dict(self) -> dict[str, list[float]]:
        return {"probs": list(self.probs), "values": list(self.values)}

    @classmethod
    def from_dict(cls, d: Any, where: str, fld: str) -> Quantiles:
        if not isinstance(d, dict) or set(d) != {"probs", "values"}:
            raise SchemaError("expected {\"probs\": [...], \"values\": [...]}", source=where, field=fld)
        try:
            q = cls(tuple(float(x) for x in d["probs"]), tuple(float(x) for x in d["values"]))
        except (TypeError, ValueError):
            raise SchemaError("probs and values must be lists of numbers", source=where, field=fld) from None
        q.validate(where, fld)
        return q


DISTRIBUTIONS = ("pause_s", "shift_gap_s", "bc_duration_s", "bc_offset_frac", "barge_in_offset_s",
                 "barge_in_overlap_s")
RATES = ("bc_per_min", "pause_turn_share")


@dataclass(frozen=True)
class TimingStats:
    """What the timeline samples. A None field was not measured (too few events): fill it with `filled_from`.

    - pause_s: PAUSE durations (t - s), > ipu_gap_s by definition.
    - shift_gap_s: SHIFT gaps t - s, both directions; negative = overlap, >= -shift_overlap_max_s by definition.
    - bc_duration_s: BC IPU lengths, <= bc_max_s by definition.
    - bc_offset_frac: where a BC starts inside the other party's TURN, as a fraction of that TURN (0 = its start).
    - barge_in_offset_s: seconds of the interrupted TURN heard before the barge-in starts.
    - barge_in_overlap_s: how long the interrupted party goes on after the barge-in starts (the synthetic pipeline
      cuts the system utterance there), > shift_overlap_max_s by definition.
    - bc_per_min: BCs started inside the other's TURNs, per minute of the other's TURN speech.
    - pause_turn_share: share of floor turns (a party's TURNs joined by its PAUSEs) holding at least one PAUSE.
    `counts` says how many values each number came from (0 for a default); `notes` where each number comes from.
    """

    pause_s: Quantiles | None
    shift_gap_s: Quantiles | None
    bc_duration_s: Quantiles | None
    bc_offset_frac: Quantiles | None
    barge_in_offset_s: Quantiles | None
    barge_in_overlap_s: Quantiles | None
    bc_per_min: float | None
    pause_turn_share: float | None
    params: EventParams = field(default_factory=EventParams)
    source: str = ""
    counts: dict[str, float] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)

    def validate(self, where: str = "timing stats") -> None:
        p = self.params
        for name in DISTRIBUTIONS:
            q = getattr(self, name)
            if q is not None:
                q.validate(where, name)
        # Each distribution must lie where its event's rule puts it, or sampled timings make other events.
        eps = TIME_EPS_S
        rules: dict[str, tuple[str, Any]] = {
            "pause_s": (f"> ipu_gap_s {p.ipu_gap_s}", lambda v: v[0] > p.ipu_gap_s),
            "shift_gap_s": (f">= -{p.shift_overlap_max_s}", lambda v: v[0] >= -p.shift_overlap_max_s - eps),
            "bc_duration_s": (f"in (0, {p.bc_max_s}]", lambda v: v[0] > 0 and v[-1] <= p.bc_max_s + eps),
            "bc_offset_frac": ("in [0, 1]", lambda v: v[0] >= 0 and v[-1] <= 1),
            "barge_in_offset_s": (">= 0", lambda v: v[0] >= 0),
            "barge_in_overlap_s": (f"> {p.shift_overlap_max_s}", lambda v: v[0] > p.shift_overlap_max_s),
        }
        for name, (rule, ok) in rules.items():
            q = getattr(self, name)
            if q is not None and not ok(q.values):
                raise SchemaError(f"values must be {rule} (the event rule)", source=where, field=name)
        if self.bc_per_min is not None and not (math.isfinite(self.bc_per_min) and self.bc_per_min >= 0):
            raise SchemaError("must be a number >= 0", source=where, field="bc_per_min")
        if self.pause_turn_share is not None and not 0.0 <= self.pause_turn_share <= 1.0:
            raise SchemaError("must be in [0, 1]", source=where, field="pause_turn_share")

    # -------------------------------------------------------------------------------------------- sampling

    def _dist(self, name: str) -> Quantiles:
        q = getattr(self, name)
        if q is None:
            raise ValueError(f"{name} was not measured in {self.source or 'these stats'}; fill it first "
                             "(stats.filled_from(default_stats(language, domain)))")
        return q

    def _rate(self, name: str) -> float:
        v = getattr(self, name)
        if v is None:
            raise ValueError(f"{name} was not measured in {self.source or 'these stats'}; fill it first")
        return float(v)

    def sample_pause_s(self, rng: random.Random, margin_s: float = DEFAULT_MARGIN_S) -> float:
        """A PAUSE length, at least ipu_gap_s + margin_s (shorter would not split the turn when extracted)."""
        return self._dist("pause_s").sample(rng, lo=self.params.ipu_gap_s + margin_s)

    def sample_shift_gap_s(self, rng: random.Random, margin_s: float = DEFAULT_MARGIN_S) -> float:
        """A SHIFT gap t - s (negative: the reply starts before the question ends), overlap kept at most
        shift_overlap_max_s - margin_s so it cannot extract as a BARGE_IN."""
        return self._dist("shift_gap_s").sample(rng, lo=-(self.params.shift_overlap_max_s - margin_s))

    def sample_bc_offset_frac(self, rng: random.Random) -> float:
        """Where a BC starts inside the other's TURN, as a fraction of that TURN's length."""
        return self._dist("bc_offset_frac").sample(rng, lo=0.0, hi=1.0)

    def sample_bc_count(self, rng: random.Random, other_turn_s: float) -> int:
        """How many BCs to place over `other_turn_s` seconds of the other's TURN speech: Poisson with mean
        bc_per_min x minutes (inversion, so one rng draw per call and no numpy)."""
        lam = self._rate("bc_per_min") * max(other_turn_s, 0.0) / 60.0
        u, k, term = rng.random(), 0, math.exp(-lam)
        cum = term
        while u > cum and k < 1000:
            k += 1
            term *= lam / k
            cum += term
        return k

    def sample_turn_has_pause(self, rng: random.Random) -> bool:
        """Whether a floor turn gets a PAUSE inside it."""
        return rng.random() < self._rate("pause_turn_share")

    def sample_barge_in_offset_s(self, rng: random.Random) -> float:
        """Seconds of the system utterance heard before the user barges in."""
        return self._dist("barge_in_offset_s").sample(rng, lo=0.0)

    def sample_barge_in_overlap_s(self, rng: random.Random, margin_s: float = DEFAULT_MARGIN_S) -> float:
        """How long the system goes on after the user starts (where its utterance is cut), more than
        shift_overlap_max_s + margin_s so it extracts as a BARGE_IN and not a SHIFT."""
        return self._dist("barge_in_overlap_s").sample(rng, lo=self.params.shift_overlap_max_s + margin_s)

    # --------------------------------------------------------------------------------------- combination / io

    def missing(self) -> list[str]:
        """The fields that were not measured."""
        return [n for n in (*DISTRIBUTIONS, *RATES) if getattr(self, n) is None]

    def filled_from(self, fallback: TimingStats) -> TimingStats:
        """These stats with every unmeasured field taken from `fallback` (its note says so)."""
        if fallback.params != self.params:
            raise ValueError(f"cannot fill stats made with {self.params} from stats made with {fallback.params}")
        changes: dict[str, Any] = {n: getattr(fallback, n) for n in self.missing()}
        notes = dict(self.notes)
        for n in changes:
            notes[n] = f"not measured in {self.source or 'these stats'}; from {fallback.source}: " \
                       f"{fallback.notes.get(n, '')}".rstrip(": ")
        return replace(self, **changes, notes=notes)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"format": FORMAT, "source": self.source, "params": self.params.to_dict()}
        for n in DISTRIBUTIONS:
            q = getattr(self, n)
            d[n] = q.to_dict() if q is not None else None
        for n in RATES:
            d[n] = getattr(self, n)
        d["counts"] = dict(self.counts)
        d["notes"] = dict(self.notes)
        return d

    @classmethod
    def from_dict(cls, d: Any, where: str = "timing stats") -> TimingStats:
        if not isinstance(d, dict):
            raise SchemaError(f"expected an object, got {type(d).__name__}", source=where)
        if d.get("format") != FORMAT:
            raise SchemaError(f"format {d.get('format')!r} is not {FORMAT!r}", source=where, field="format")
        known = {"format"} | {f.name for f in fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise SchemaError(f"unknown keys {unknown}", source=where)
        absent = sorted({*DISTRIBUTIONS, *RATES} - set(d))
        if absent:
            raise SchemaError(f"missing keys {absent} (null = not measured)", source=where)
        try:
            params = EventParams.from_dict(d.get("params", {}))
        except (TypeError, ValueError) as err:
            raise SchemaError(str(err), source=where, field="params") from None
        dists = {n: None if d[n] is None else Quantiles.from_dict(d[n], where, n) for n in DISTRIBUTIONS}
        rates: dict[str, float | None] = {}
        for n in RATES:
            v = d[n]
            if v is not None and (isinstance(v, bool) or not isinstance(v, int | float)):
                raise SchemaError(f"expected a number or null, got {v!r}", source=where, field=n)
            rates[n] = None if v is None else float(v)
        for n, kind in (("source", str), ("counts", dict), ("notes", dict)):
            if n in d and not isinstance(d[n], kind):
                raise SchemaError(f"expected {kind.__name__}", source=where, field=n)
        stats = cls(**dists, **rates, params=params, source=d.get("source", ""), counts=dict(d.get("counts", {})),
                    notes={str(k): str(v) for k, v in d.get("notes", {}).items()})
        stats.validate(where)
        return stats


def save_stats(stats: TimingStats, path: str | Path) -> None:
    stats.validate(str(path))
    atomic_write_json(Path(path), stats.to_dict())


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SchemaError("no such file", source=str(path)) from None
    except (OSError, UnicodeDecodeError) as err:
        raise SchemaError(f"cannot read ({err.__class__.__name__})", source=str(path)) from None
    except json.JSONDecodeError as err:
        raise SchemaError(f"not JSON: {err.msg} at line {err.lineno} column {err.colno}", source=str(path)) from None


def load_stats(path: str | Path) -> TimingStats:
    """A TimingStats JSON file (as `save_stats` / `duplex-eval events --stats-out` write it), validated."""
    return TimingStats.from_dict(_read_json(Path(path)), str(path))


def default_stats(language: str, domain: str, path: str | Path = DEFAULTS_FILE) -> TimingStats:
    """The shipped defaults for one language x domain (defaults chosen from the literature, not measurements)."""
    data = _read_json(Path(path))
    if not isinstance(data, dict) or data.get("format") != DEFAULTS_FORMAT or not isinstance(data.get("stats"), dict):
        raise SchemaError(f"expected {{'format': {DEFAULTS_FORMAT!r}, 'stats': {{...}}}}", source=str(path))
    key = f"{language}_{domain}"
    if key not in data["stats"]:
        raise SchemaError(f"no defaults for {key!r}; has {sorted(data['stats'])}", source=str(path))
    return TimingStats.from_dict(data["stats"][key], f"{path} stats.{key}")


# --------------------------------------------------------------------------------------------- measuring


@dataclass
class _Pool:
    pause: list[float] = field(default_factory=list)
    shift: list[float] = field(default_factory=list)
    bc_dur: list[float] = field(default_factory=list)
    bc_frac: list[float] = field(default_factory=list)
    bi_offset: list[float] = field(default_factory=list)
    bi_overlap: list[float] = field(default_factory=list)
    bc_in_turn: int = 0
    turn_speech_s: float = 0.0
    floor_turns: int = 0
    paused_turns: int = 0
    dialogues: int = 0


def _add_dialogue(pool: _Pool, events: Sequence[Event], ipus: Sequence[Ipu]) -> None:
    pool.dialogues += 1
    pauses = [e for e in events if e.type == "PAUSE"]
    for e in events:
        if e.type == "PAUSE":
            pool.pause.append(e.duration_s)
        elif e.type == "SHIFT":
            pool.shift.append(e.duration_s)
        elif e.type == "BC":
            pool.bc_dur.append(e.duration_s)
            if e.other_start_s is not None and e.other_end_s is not None:
                pool.bc_in_turn += 1
                pool.bc_frac.append((e.start_s - e.other_start_s) / (e.other_end_s - e.other_start_s))
        elif e.type == "BARGE_IN" and e.other_start_s is not None:
            pool.bi_offset.append(e.start_s - e.other_start_s)
            pool.bi_overlap.append(e.overlap_s)
    turns = [i for i in ipus if i.is_turn]
    pool.turn_speech_s += sum(i.duration_s for i in turns)
    # Floor turns are chains of one party's TURNs linked by its PAUSEs: n_turns - n_pauses of them. A chain holds
    # a pause when it has a first PAUSE: one whose preceding TURN was not itself reached through a PAUSE.
    pool.floor_turns += len(turns) - len(pauses)
    reached = {(e.channel, round(e.end_s, 6)) for e in pauses}
    pool.paused_turns += sum((e.channel, round(e.turn_start_s, 6)) not in reached for e in pauses)


def stats_from_dialogues(dialogues: Iterable[tuple[Sequence[Event], Sequence[Ipu]]], source: str = "",
                         params: EventParams | None = None) -> TimingStats:
    """TimingStats measured on (events, IPUs of both channels) per dialogue, pooled over both parties.

    `params` must be the ones the events were extracted with (stored in the result, and the samplers truncate
    with them). Distributions with fewer than MIN_COUNT values, and rates without a denominator, are None.
    """
    pool = _Pool()
    for events, ipus in dialogues:
        _add_dialogue(pool, events, ipus)
    return TimingStats(
        pause_s=Quantiles.measured(pool.pause),
        shift_gap_s=Quantiles.measured(pool.shift),
        bc_duration_s=Quantiles.measured(pool.bc_dur),
        bc_offset_frac=Quantiles.measured(pool.bc_frac),
        barge_in_offset_s=Quantiles.measured(pool.bi_offset),
        barge_in_overlap_s=Quantiles.measured(pool.bi_overlap),
        bc_per_min=round(pool.bc_in_turn / (pool.turn_speech_s / 60.0), 4) if pool.turn_speech_s > 0 else None,
        pause_turn_share=round(pool.paused_turns / pool.floor_turns, 4) if pool.floor_turns > 0 else None,
        params=params or EventParams(),
        source=source,
        counts={"dialogues": pool.dialogues, "pause_s": len(pool.pause), "shift_gap_s": len(pool.shift),
                "bc_duration_s": len(pool.bc_dur), "bc_offset_frac": len(pool.bc_frac),
                "barge_in_offset_s": len(pool.bi_offset), "barge_in_overlap_s": len(pool.bi_overlap),
                "bc_in_turn": pool.bc_in_turn, "turn_speech_s": round(pool.turn_speech_s, 3),
                "floor_turns": pool.floor_turns, "paused_turns": pool.paused_turns},
    )


def stats_from_events(events: Sequence[Event], ipus: Sequence[Ipu], source: str = "",
                      params: EventParams | None = None) -> TimingStats:
    """TimingStats of one dialogue (see `stats_from_dialogues` to pool many)."""
    return stats_from_dialogues([(events, ipus)], source, params)
