"""Typed, typo-rejecting parameter sets of each benchmark's protocol (docs/benchmarks/mpe.md,
docs/benchmarks/ifeval.md).

Every default is named here once, with the range it may take; the orchestrator stores the set it ran with in
each `rec.json`, and the scorer applies thresholds from the same record (or from overrides) to stored
measurements.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields, replace
from typing import Any, ClassVar, TypeVar

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


P = TypeVar("P", bound="ProtocolParams")


class ProtocolParams:
    """What every protocol dataclass shares: range checks, dict round trip, typed `--param` overrides.

    A subclass is a frozen dataclass of int/float fields with a `RANGES` table of lower bounds.
    """

    RANGES: ClassVar[dict[str, tuple[float, bool]]] = {}
    FROM_AGENT: ClassVar[tuple[str, ...]] = ()  # fields `for_agent` fills from the adapter; no --param sets them
    # The benchmark's VAD (Silero, metrics/vad.py `VADParams`), in this one place: protocol field -> VADParams
    # field for the settings a run may change (--param), and VAD_FIXED for those it may not. The scheduler and the
    # scorer both read `vad_settings()` (metrics.vad.vad_of); rec.json records what a run used.
    VAD_FIELDS: ClassVar[dict[str, str]] = {}
    VAD_FIXED: ClassVar[dict[str, float | str]] = {}

    def __post_init__(self) -> None:
        problems = [p for name, (bound, inclusive) in self.RANGES.items()
                    if (p := check_range(name, getattr(self, name), bound, inclusive))]
        if problems:
            raise SchemaError("; ".join(problems), source="protocol")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)  # type: ignore[call-overload]

    def vad_settings(self) -> dict[str, float | str]:
        """The benchmark's VAD settings, by VADParams field name."""
        return dict(self.VAD_FIXED) | {vad: getattr(self, name) for name, vad in self.VAD_FIELDS.items()}

    def for_agent(self: P, agent: Any) -> P:
        """The parameter set the runner plans an agent's cases with: a protocol may take facts of the adapter
        here (M3: its frame size, whether it greets first) so the plan never needs to know the adapter.
        The result is what rec.json records. By default nothing of the agent matters."""
        return self

    @classmethod
    def from_dict(cls: type[P], data: dict[str, Any], *, source: str = "protocol") -> P:
        known = {f.name for f in fields(cls)}  # type: ignore[arg-type]
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

    def override(self: P, items: list[str]) -> P:
        """Apply "name=value" strings (from the CLI)."""
        updates: dict[str, Any] = {}
        for item in items:
            name, sep, value = item.partition("=")
            if not sep:
                raise SchemaError(f"expected name=value, got {item!r}", source="--param")
            if name.strip() in self.FROM_AGENT:
                raise SchemaError(f"{name.strip()} is taken from the adapter (for_agent), not set by --param",
                                  source="--param")
            updates[name.strip()] = value.strip()
        merged = {**self.to_dict(), **type(self).from_dict({**self.to_dict(), **updates}, source="--param").to_dict()}
        return replace(self, **merged)  # type: ignore[type-var]


@dataclass(frozen=True)
class MPEProtocol(ProtocolParams):
    RANGES: ClassVar[dict[str, tuple[float, bool]]] = MPE_RANGES
    # Duplex-MPE §3 names the causal Silero VAD's minimum speech and merge gap only; for the rest we keep
    # Silero's thresholds (0.5 / 0.35), leave speech at the first chunk below 0.35 and pad nothing (speech_pad_ms
    # 0: onsets and offsets are the detector's own chunk edges, as the scheduler sees them live).
    VAD_FIELDS: ClassVar[dict[str, str]] = {"vad_min_speech_ms": "min_speech_ms", "vad_merge_gap_ms": "merge_gap_ms"}
    VAD_FIXED: ClassVar[dict[str, float | str]] = {"threshold": 0.5, "neg_threshold": 0.35, "min_silence_ms": 0,
                                             "speech_pad_ms": 0}
    # scheduler (what the user stream does)
    post_preamble_s: float = 1.0  # silence after the duty preamble, outside every scoring window
    t_onset_window_s: float = 5.0  # a fresh onset may start this long after T ends
    endpoint_s: float = 1.5  # confirmed model silence that ends a T response
    response_cap_s: float = 20.0  # longest wait for a T response to end, from T end
    n4_answer_window_s: float = 3.0  # silence streamed after N4Q before N4R plays regardless
    tail_s: float = 3.0  # silence after the last turn
    # scoring thresholds (applied to stored measurements)
    yield_tolerance_s: float = 1.0  # speech active at N4R onset must end within this
    # streaming and batch VAD (Silero, docs/benchmarks/mpe.md)
    vad_min_speech_ms: int = 250
    vad_merge_gap_ms: int = 300


IFEVAL_RANGES: dict[str, tuple[float, bool]] = {
    "endpoint_s": (0.0, False),
    "inter_turn_gap_s": (0.0, True),
    "response_cap_s": (0.0, False),
    "barge_in_timeout_s": (0.0, False),
    "trailing_s": (0.0, True),
    "vad_min_speech_ms": (0, False),
    "vad_min_silence_ms": (0, True),
    "vad_merge_gap_ms": (0, True),
    "vad_speech_pad_ms": (0, True),
}


@dataclass(frozen=True)
class IFEvalProtocol(ProtocolParams):
    """DSB-IFEval runtime (docs/benchmarks/ifeval.md, App. D.1 for the local frame-synchronous models).

    The barge-in offsets (3.0 s C3, 2.0 s R8_B) are data, not parameters: each conversation carries its own
    `barge_in_after_s` (dataset_builder/ifeval/texts/probes.yaml) and rec.json's gold records it. The verifier
    thresholds are data too (each case's `verifier`, role overrides applied); the scorer may override them.
    """

    RANGES: ClassVar[dict[str, tuple[float, bool]]] = IFEVAL_RANGES
    # DSB-IFEval App. E.2: min_speech_duration_ms=90, min_silence_duration_ms=90, "all remaining parameters use the
    # library defaults" (silero-vad 6.2.3 get_speech_timestamps: threshold 0.5, neg_threshold 0.5 - 0.15, speech
    # padding 30 ms), spans within 0.3 s merged. rules "silero": the spans are that library function's own (its
    # min-silence count, its drop of short segments before the merge, its padding and end-of-signal rules).
    VAD_FIELDS: ClassVar[dict[str, str]] = {
        "vad_min_speech_ms": "min_speech_ms", "vad_min_silence_ms": "min_silence_ms",
        "vad_merge_gap_ms": "merge_gap_ms", "vad_speech_pad_ms": "speech_pad_ms"}
    VAD_FIXED: ClassVar[dict[str, float | str]] = {"threshold": 0.5, "neg_threshold": 0.35, "rules": "silero"}
    # scheduler (what the user stream does)
    endpoint_s: float = 1.5  # model silence that ends a take-turn wait (before turn 2, and at the end)
    inter_turn_gap_s: float = 3.0  # least silence between turn 1 and a take-turn turn 2; a model that has not
    # started speaking by then is not waited for
    response_cap_s: float = 20.0  # longest wait, from the end of a user turn, for a model that keeps talking
    barge_in_timeout_s: float = 5.0  # a barge-in turn 2 whose model never starts is played this long after turn 1
    trailing_s: float = 5.0  # least silence after turn 2 (extended while the model is still answering)
    # streaming and batch VAD (Silero at 16 kHz, docs/benchmarks/ifeval.md)
    vad_min_speech_ms: int = 90
    vad_min_silence_ms: int = 90
    vad_merge_gap_ms: int = 300
    vad_speech_pad_ms: int = 30  # Silero's default: each span widened by 30 ms on both sides


M3_RANGES: dict[str, tuple[float, bool]] = {
    "lead_silence_s": (0.0, True),
    "greets_first": (0, True),
    "frame_size": (0, True),
    "vad_threshold": (0.0, False),
    "vad_neg_threshold": (0.0, True),
    "vad_min_speech_ms": (0, False),
    "vad_min_silence_ms": (0, True),
    "vad_merge_gap_ms": (0, False),
}


@dataclass(frozen=True)
class M3Protocol(ProtocolParams):
    """M3-DuplexBench runtime (docs/benchmarks/m3.md, dataset_builder/m3/DESIGN.md "Conditions").

    The window Δ = 10 s, the context L = 120 s and the event intervals are data (each row's regions), not
    parameters. `greets_first` and `frame_size` are facts of the adapter, filled in by `for_agent`: the plan
    prepends `lead_silence_s` in None/User for an adapter that greets first (the paper's Moshi footnote), and
    pads the stream's start with less than one frame so that the event start s falls on a frame boundary.
    The vad_* fields are the Silero settings of the model's segments, for the scheduler and the scorer alike
    (rec.json `params.vad`): spans split at gaps > 0.5 s (the paper's IPUs; gaps are multiples of the 32 ms
    chunk, so merging gaps < 500 ms splits every gap of 512 ms or more and none of 480 ms or less).
    """

    RANGES: ClassVar[dict[str, tuple[float, bool]]] = M3_RANGES
    FROM_AGENT: ClassVar[tuple[str, ...]] = ("frame_size",)
    # M3-DuplexBench names no VAD, only IPUs split at silences > 0.5 s (§2); padding we choose none (0 ms), so a
    # segment's ends are the detector's own chunk edges and a 0.5 s gap is measured between them.
    VAD_FIELDS: ClassVar[dict[str, str]] = {
        "vad_threshold": "threshold", "vad_neg_threshold": "neg_threshold", "vad_min_speech_ms": "min_speech_ms",
        "vad_min_silence_ms": "min_silence_ms", "vad_merge_gap_ms": "merge_gap_ms"}
    VAD_FIXED: ClassVar[dict[str, float | str]] = {"speech_pad_ms": 0}
    lead_silence_s: float = 5.0  # None/User, adapters that greet first only
    greets_first: int = 0  # 1: the adapter greets first (its `greets_first`; --param greets_first=1 forces it)
    frame_size: int = 0  # the adapter's frame in samples at its rate (0: unknown, s is not aligned)
    vad_threshold: float = 0.5  # Silero enters speech at p >= this
    vad_neg_threshold: float = 0.35  # ... and leaves below this
    vad_min_speech_ms: int = 250  # shorter merged spans are dropped (Silero's own default)
    vad_min_silence_ms: int = 0  # no hang-over beyond one chunk: the merge decides what a gap is
    vad_merge_gap_ms: int = 500  # segments split at gaps > 0.5 s

    def __post_init__(self) -> None:
        super().__post_init__()
        problems = []
        if self.greets_first not in (0, 1):
            problems.append(f"greets_first={self.greets_first} is out of range: it must be 0 or 1")
        if not self.vad_neg_threshold <= self.vad_threshold <= 1.0:
            problems.append(f"need vad_neg_threshold <= vad_threshold <= 1, got {self.vad_neg_threshold:g} and "
                            f"{self.vad_threshold:g}")
        if problems:
            raise SchemaError("; ".join(problems), source="protocol")

    def for_agent(self, agent: Any) -> M3Protocol:
        greets = 1 if self.greets_first or bool(getattr(agent, "greets_first", False)) else 0
        return replace(self, greets_first=greets, frame_size=int(agent.frame_size))
