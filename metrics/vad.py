"""Silero VAD (ONNX) on 16 kHz audio: batch spans for scoring and a streaming detector for the scheduler.

Both paths share one chunk-level state machine, so a streamed recording and the same recording scored offline give
the same onsets. Two rule sets exist (`VADParams.rules`): "project" (hysteresis -> merge -> minimum duration, the
Duplex-MPE and M3 choice where their papers are silent) and "silero" (silero-vad 6.2.3's own
`get_speech_timestamps` segmentation, then the merge: DSB-IFEval App. E.2). All times live on the 32 ms chunk
grid of the 16 kHz signal; any input rate is resampled first (a VAD fed 24 kHz audio as 16 kHz stretches every
timestamp by 1.5x — STYLE, "What to avoid").
"""

from __future__ import annotations

import math
import warnings
from dataclasses import asdict, dataclass, fields
from typing import Any

import numpy as np
import soxr

from dataset_builder.audio import SESSION_SR, VAD_SR, resample, samples_digest
from dataset_builder.benchmark_params import IFEvalProtocol, M3Protocol, MPEProtocol, ProtocolParams
from metrics.spans import Span

CHUNK = 512  # samples per Silero call at 16 kHz = 32 ms
CHUNK_S = CHUNK / VAD_SR
_CONTEXT = 64  # samples of the previous chunk the ONNX model expects in front of each chunk
# After this many skipped (below-floor) chunks the recurrent state is reset, so the model's memory never
# reaches across a long pause and streamed vs batch results do not depend on what was said long ago.
_RESET_AFTER_SKIPPED = 10


RULES = ("project", "silero")


@dataclass(frozen=True)
class VADParams:
    """VAD thresholds (docs/benchmarks/mpe.md, docs/benchmarks/ifeval.md); stored with every result.

    threshold / neg_threshold: enter speech at p >= threshold, leave when p < neg_threshold for min_silence_ms
    (hysteresis hang-over; 0 = leave at the first such chunk). Each span is widened by speech_pad_ms on both
    sides (Silero's `speech_pad_ms`; clipped to the signal). Padded spans separated by gaps strictly shorter than
    merge_gap_ms are merged, then spans whose unpadded speech is shorter than min_speech_ms are dropped. Chunks
    whose RMS is below energy_floor_dbfs are not given to the model at all (probability 0), which makes digital
    silence cheap. Each benchmark's values live in its protocol (dataset_builder/benchmark_params.py, `vad_of`).

    rules="silero" replaces the span rules above by silero-vad 6.2.3's `get_speech_timestamps` (the library call
    DSB-IFEval App. E.2 names) followed by the merge: the model sees every chunk (no energy floor, so the
    probabilities are the library's own), speech ends only once the low-probability chunks since its first one
    span min_silence_ms (4 chunks for 90 ms), segments of min_speech_ms or less are dropped before the merge,
    padding is split between neighbours closer than twice speech_pad_ms, and speech still open at the end of the
    signal runs to its end. `_SileroTracker` is that rule, chunk by chunk.
    """

    threshold: float = 0.5
    neg_threshold: float = 0.35
    min_speech_ms: int = 250
    merge_gap_ms: int = 300
    speech_pad_ms: int = 0
    energy_floor_dbfs: float = -55.0
    min_silence_ms: int = 0
    rules: str = "project"  # "project" or "silero" (see above)

    def __post_init__(self) -> None:
        if self.rules not in RULES:
            raise ValueError(f"rules={self.rules!r}: expected one of {sorted(RULES)}")
        if not 0.0 <= self.neg_threshold <= self.threshold <= 1.0:
            raise ValueError(f"need 0 <= neg_threshold <= threshold <= 1, got {self}")
        for name in ("min_speech_ms", "merge_gap_ms", "speech_pad_ms", "min_silence_ms"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> VADParams:
        unknown = set(d) - {f.name for f in fields(cls)}
        if unknown:
            raise ValueError(f"unknown VADParams fields: {sorted(unknown)}")
        return cls(**d)

    @property
    def model_floor_dbfs(self) -> float:
        """The energy floor the model runs under: none for the library's rule, which scores every chunk."""
        return -math.inf if self.rules == "silero" else self.energy_floor_dbfs


def vad_of(protocol: ProtocolParams) -> VADParams:
    """The VAD a protocol's parameter set runs and scores with (its `vad_settings`)."""
    return VADParams(**protocol.vad_settings())  # type: ignore[arg-type]


# Each benchmark's VAD under its default protocol (the paper's settings, or our stated choice where it is silent).
VAD_PRESETS: dict[str, VADParams] = {"mpe": vad_of(MPEProtocol()), "ifeval": vad_of(IFEvalProtocol()),
                                     "m3": vad_of(M3Protocol())}

_SESSION: Any = None
_PROBS_MEMO: dict[tuple[str, float], np.ndarray] = {}  # SileroVAD._probs16, oldest dropped first
_PROBS_MEMO_SIZE = 4096
_SR_INPUT = np.array(VAD_SR, dtype=np.int64)
# The model's output on digital silence: probability and recurrent state after k+1 all-zero chunks fed from a reset
# (zero state, zero context). Its state never settles exactly, so silent chunks cannot simply be skipped under the
# "silero" rules; but the same inputs give the same outputs, so a silent channel (a silent model, the pauses a
# recording opens with) reuses this prefix instead of running the model: bit-identical by construction.
_ZERO_PROBS: list[float] = []
_ZERO_STATES: list[np.ndarray] = []
_ZERO_RUN_MAX = 20_000  # chunks (about 10.7 min of silence, 20 MB of state)


def _silero_session() -> Any:
    """The Silero ONNX session, loaded once per process (it is stateless; state is passed per call)."""
    global _SESSION
    if _SESSION is None:
        import torch

        n_threads = torch.get_num_threads()
        try:
            import silero_vad  # calls torch.set_num_threads(1) at import; undo that for the host process

            with warnings.catch_warnings():  # its resource lookup uses a deprecated importlib API
                warnings.simplefilter("ignore", DeprecationWarning)
                model = silero_vad.load_silero_vad(onnx=True)
        finally:
            torch.set_num_threads(n_threads)
        _SESSION = model.session
    return _SESSION


class _SileroRunner:
    """Recurrent Silero state for one signal, with the energy-floor skip."""

    def __init__(self, energy_floor_dbfs: float) -> None:
        self._session = _silero_session()
        # Compare mean squares, not RMS in dB: no log/sqrt per chunk.
        self.floor_ms = 10.0 ** (energy_floor_dbfs / 10.0)
        self.reset()

    def reset(self) -> None:
        self._state = np.zeros((2, 1, 128), dtype=np.float32)
        self._context = np.zeros(_CONTEXT, dtype=np.float32)
        self._skipped = 0
        self._zeros: int | None = 0  # model calls since the reset, all on zero chunks (None once one was not)

    def prob(self, chunk: np.ndarray, loud: bool | None = None) -> float:
        if loud is None:
            loud = float(np.dot(chunk, chunk)) / CHUNK >= self.floor_ms
        if not loud:
            self._skipped += 1
            if self._skipped >= _RESET_AFTER_SKIPPED:
                self.reset()
                self._skipped = _RESET_AFTER_SKIPPED
            else:
                self._context = chunk[-_CONTEXT:].copy()
                if self._zeros is not None and chunk[-_CONTEXT:].any():
                    self._zeros = None
            return 0.0
        self._skipped = 0
        k = self._zeros
        if k is not None and not chunk.any():
            self._zeros = k + 1
            if k < len(_ZERO_PROBS):  # the context is zeros already
                self._state = _ZERO_STATES[k]
                return _ZERO_PROBS[k]
        else:
            k = self._zeros = None
        x = np.concatenate([self._context, chunk])[None, :]
        out, self._state = self._session.run(None, {"input": x, "state": self._state, "sr": _SR_INPUT})
        self._context = chunk[-_CONTEXT:].copy()
        p = float(out[0, 0])
        if k is not None and k == len(_ZERO_PROBS) < _ZERO_RUN_MAX:
            _ZERO_PROBS.append(p)
            _ZERO_STATES.append(self._state)
        return p


class _SpanTracker:
    """Chunk probabilities -> spans, one chunk at a time; times are integer 16 kHz sample counts (exact)."""

    def __init__(self, params: VADParams) -> None:
        p = params
        self.thr, self.neg = p.threshold, p.neg_threshold
        self.need_sil = max(1, math.ceil(p.min_silence_ms * VAD_SR / 1000 / CHUNK))  # chunks below neg
        self.min_speech = p.min_speech_ms * VAD_SR // 1000
        self.merge_gap = p.merge_gap_ms * VAD_SR // 1000
        self.pad = p.speech_pad_ms * VAD_SR // 1000
        self.reset()

    def reset(self) -> None:
        self.i = 0  # chunks seen
        self.triggered = False
        self.temp_end: int | None = None  # chunk index where the current run of low probabilities began
        self.open_start: int | None = None  # merged span under construction (possibly in its merge hang-over)
        self.open_end = 0  # end of its last closed raw span (valid when not triggered)
        self.open_raw = 0  # unpadded start of the span under construction: min_speech_ms counts speech, not padding
        self.confirmed = False
        self.done: list[tuple[int, int]] = []
        self.onsets: list[int] = []
        self.last_end: int | None = None  # end of the latest confirmed speech, finalized

    def _current_end(self) -> int:
        if not self.triggered:
            return self.open_end
        return (self.temp_end if self.temp_end is not None else self.i) * CHUNK + self.pad

    def _finalize(self) -> None:
        assert self.open_start is not None
        if self.confirmed:
            self.done.append((self.open_start, self.open_end))
            self.last_end = self.open_end
        self.open_start = None
        self.confirmed = False

    def step(self, p: float) -> None:
        i = self.i
        if not self.triggered:
            if p >= self.thr:
                self.triggered, self.temp_end = True, None
                start = max(0, i * CHUNK - self.pad)
                if self.open_start is not None and start - self.open_end >= self.merge_gap:
                    self._finalize()
                if self.open_start is None:
                    self.open_start, self.open_raw, self.confirmed = start, i * CHUNK, False
        elif p >= self.thr:
            self.temp_end = None
        elif p < self.neg:
            if self.temp_end is None:
                self.temp_end = i
            if i + 1 - self.temp_end >= self.need_sil:
                self.open_end = self.temp_end * CHUNK + self.pad
                self.triggered, self.temp_end = False, None
        self.i = i + 1
        if self.open_start is None:
            return
        if not self.confirmed and self._current_end() - self.pad - self.open_raw >= self.min_speech:
            self.confirmed = True
            self.onsets.append(self.open_start)
        # No later start (>= chunk self.i) can merge any more: the hang-over is over.
        if not self.triggered and self.i * CHUNK - self.pad - self.open_end >= self.merge_gap:
            self._finalize()

    def finish(self, n_samples: int) -> None:
        """End of signal: close what is open, clipped to the signal length."""
        if self.triggered:
            self.open_end = self._current_end()
            self.triggered, self.temp_end = False, None
        if self.open_start is not None:
            self.confirmed = min(self.open_end - self.pad, n_samples) - self.open_raw >= self.min_speech
            self.open_end = min(self.open_end, n_samples)
            self._finalize()
        self.done = [(a, min(b, n_samples)) for a, b in self.done]  # an end pad stops at the signal's end

    def spans(self) -> list[Span]:
        return [Span(a / VAD_SR, b / VAD_SR) for a, b in self.done]

    @property
    def speaking(self) -> bool:
        return self.open_start is not None and self.confirmed

    @property
    def speech_now(self) -> bool:
        """Confirmed speech is going on at the latest chunk."""
        return self.speaking and self.triggered and self.temp_end is None

    def last_speech_end(self) -> int | None:
        """End (samples) of the latest confirmed speech, as far as known now; None if there never was any."""
        return self._current_end() if self.speaking else self.last_end


def silero_pad(raw: list[tuple[int, int]], pad: int, n_samples: int | None) -> list[tuple[int, int]]:
    """silero-vad 6.2.3's padding of its segments (get_speech_timestamps_from_probs, after the loop): the first
    start and every end widened by `pad`, clipped to [0, n_samples]; neighbours closer than 2 * pad split their
    gap instead. n_samples None: no end clip (a stream whose end is not known yet)."""
    out = [list(s) for s in raw]
    for k, seg in enumerate(out):
        if k == 0:
            seg[0] = max(0, seg[0] - pad)
        if k != len(out) - 1:
            gap = out[k + 1][0] - seg[1]
            step = gap // 2 if gap < 2 * pad else pad
            seg[1] += step
            out[k + 1][0] = max(0, out[k + 1][0] - step)
        else:
            seg[1] = seg[1] + pad if n_samples is None else min(n_samples, seg[1] + pad)
    return [(a, b) for a, b in out]


def merge_samples(spans: list[tuple[int, int]], gap: int) -> list[tuple[int, int]]:
    """Ordered, non-overlapping spans in samples, those separated by less than `gap` samples joined (the integer
    form of metrics.spans.merge_spans, exact on the sample grid)."""
    out: list[tuple[int, int]] = []
    for a, b in spans:
        if out and a - out[-1][1] < gap:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


class _SileroTracker:
    """The "silero" rules (VADParams docstring) chunk by chunk, causally: the library's segments are found as the
    chunks arrive; a segment longer than min_speech is confirmed (onset reported) as soon as its end, wherever
    it falls, must leave it longer; a merged span is final once no later segment can join it or move its end.
    `finish` applies the library's end-of-signal rule and rebuilds every span from the segments, so the offline
    spans are the library's exactly (with max_speech_duration_s at its default, inf)."""

    def __init__(self, params: VADParams) -> None:
        p = params
        self.thr, self.neg = p.threshold, p.neg_threshold
        # The library's sample counts at 16 kHz (sampling_rate * ms / 1000: whole numbers for whole ms).
        self.min_speech = p.min_speech_ms * VAD_SR // 1000
        self.min_sil = p.min_silence_ms * VAD_SR // 1000
        self.pad = p.speech_pad_ms * VAD_SR // 1000
        self.merge_gap = p.merge_gap_ms * VAD_SR // 1000
        # A later segment starting less than this after a kept segment's end joins it (or, with no merge, moves its
        # padded end): padded gap < merge_gap, padding split when the raw gap is under 2 * pad.
        self.reach = self.merge_gap + 2 * self.pad
        self.reset()

    def reset(self) -> None:
        self.i = 0  # chunks seen
        self.triggered = False
        self.seg_start = 0  # chunk where the open segment began (valid while triggered)
        self.temp_end: int | None = None  # chunk where its current run of low probabilities began
        self.seg_confirmed = False  # the open segment will be kept, however it ends
        self.raw: list[tuple[int, int]] = []  # kept segments, unpadded samples
        self.group_open = False  # a merged span holding confirmed speech is not final yet
        self.n_final = 0  # merged spans that are final
        self.done: list[tuple[int, int]] = []
        self.onsets: list[int] = []

    def _provisional(self) -> list[tuple[int, int]]:
        """Kept segments plus the open one if confirmed (its start decides its neighbour's padded end)."""
        if self.triggered and self.seg_confirmed:
            end = self.temp_end if self.temp_end is not None else self.i
            return [*self.raw, (self.seg_start * CHUNK, end * CHUNK)]
        return self.raw

    def _finalize(self) -> None:
        self.n_final += 1
        self.group_open = False
        merged = merge_samples(silero_pad(self._provisional(), self.pad, None), self.merge_gap)
        self.done = merged[: self.n_final]

    def _confirm(self) -> None:
        self.seg_confirmed = True
        start = self.seg_start * CHUNK
        if self.group_open and (self.merge_gap == 0 or start - self.raw[-1][1] >= self.reach):
            self._finalize()  # it cannot join this segment (with no merge, its padding may split with it)
        if not self.group_open:
            self.group_open = True
            prev = self.raw[-1][1] if self.raw else None
            gap = None if prev is None else start - prev
            self.onsets.append(start - gap // 2 if gap is not None and gap < 2 * self.pad
                               else max(0, start - self.pad))

    def step(self, p: float) -> None:
        i = self.i
        self.i = i + 1
        if p >= self.thr:
            self.temp_end = None
            if not self.triggered:
                self.triggered, self.seg_start, self.seg_confirmed = True, i, False
        elif p < self.neg and self.triggered:
            if self.temp_end is None:
                self.temp_end = i
            if (i - self.temp_end) * CHUNK >= self.min_sil:
                end = self.temp_end * CHUNK
                if end - self.seg_start * CHUNK > self.min_speech:
                    if not self.seg_confirmed:
                        self._confirm()
                    self.raw.append((self.seg_start * CHUNK, end))
                self.triggered, self.temp_end, self.seg_confirmed = False, None, False
        if self.triggered and not self.seg_confirmed:
            # The segment ends at the first chunk of its closing silence (or the signal's end, later still).
            least_end = (self.temp_end if self.temp_end is not None else self.i) * CHUNK
            if least_end - self.seg_start * CHUNK > self.min_speech:
                self._confirm()
        if self.group_open and not (self.triggered and self.seg_confirmed):
            earliest = self.seg_start if self.triggered else self.i  # no later segment can start before this
            if earliest * CHUNK - self.raw[-1][1] >= self.reach:
                self._finalize()

    def finish(self, n_samples: int) -> None:
        """End of signal: the library keeps speech still open (even inside its min-silence wait) to the end."""
        if self.triggered and n_samples - self.seg_start * CHUNK > self.min_speech:
            self.raw.append((self.seg_start * CHUNK, n_samples))
        self.triggered, self.temp_end, self.seg_confirmed, self.group_open = False, None, False, False
        self.done = merge_samples(silero_pad(self.raw, self.pad, n_samples), self.merge_gap)
        self.n_final = len(self.done)

    def spans(self) -> list[Span]:
        return [Span(a / VAD_SR, b / VAD_SR) for a, b in self.done]

    @property
    def speaking(self) -> bool:
        return self.group_open

    @property
    def speech_now(self) -> bool:
        return self.triggered and self.seg_confirmed and self.temp_end is None

    def last_speech_end(self) -> int | None:
        if self.triggered and self.seg_confirmed:
            return (self.temp_end if self.temp_end is not None else self.i) * CHUNK + self.pad
        return self.raw[-1][1] + self.pad if self.raw else None


def span_tracker(params: VADParams) -> _SpanTracker | _SileroTracker:
    """The chunk-level state machine of `params.rules`."""
    return _SileroTracker(params) if params.rules == "silero" else _SpanTracker(params)


def spans_from_probs(probs: Any, n_samples: int, params: VADParams) -> list[Span]:
    """Spans of a 16 kHz signal of `n_samples` from its chunk probabilities (what SileroVAD.spans does after the
    model)."""
    tracker = span_tracker(params)
    for p in probs:
        tracker.step(float(p))
    tracker.finish(n_samples)
    return tracker.spans()


def _mono(audio: np.ndarray) -> np.ndarray:
    audio = np.asarray(audio, dtype=np.float32)
    if audio.ndim != 1:
        raise ValueError(f"VAD takes one channel, got shape {audio.shape}; pick the channel explicitly")
    return audio


class SileroVAD:
    """Offline VAD: `spans(audio, sr)` on a whole channel; resamples to 16 kHz itself."""

    def __init__(self, params: VADParams | None = None) -> None:
        self.params = params or VADParams()

    def _probs16(self, x16: np.ndarray) -> np.ndarray:
        # Scoring runs the VAD over every channel of every episode, and many are the same samples (a silent model,
        # one user stream under five instruction levels): the probabilities depend only on the samples and the
        # energy floor, so they are computed once per process.
        key = (samples_digest(x16), self.params.model_floor_dbfs)
        probs = _PROBS_MEMO.get(key)
        if probs is None:
            probs = self._compute_probs16(x16)
            if len(_PROBS_MEMO) >= _PROBS_MEMO_SIZE:
                _PROBS_MEMO.pop(next(iter(_PROBS_MEMO)))
            _PROBS_MEMO[key] = probs
        return probs.copy()

    def _compute_probs16(self, x16: np.ndarray) -> np.ndarray:
        n = math.ceil(x16.size / CHUNK)
        x = np.zeros(n * CHUNK, dtype=np.float32)
        x[: x16.size] = x16
        chunks = x.reshape(n, CHUNK)
        runner = _SileroRunner(self.params.model_floor_dbfs)
        loud = np.einsum("ij,ij->i", chunks, chunks) / CHUNK >= runner.floor_ms
        return np.array([runner.prob(c, bool(lo)) for c, lo in zip(chunks, loud, strict=True)], np.float32)

    def probabilities(self, audio: np.ndarray, sr: int) -> np.ndarray:
        """Speech probability per 32 ms chunk of the 16 kHz signal (chunk k covers [0.032k, 0.032(k+1)) s)."""
        return self._probs16(resample(_mono(audio), sr, VAD_SR))

    def spans(self, audio: np.ndarray, sr: int) -> list[Span]:
        x16 = resample(_mono(audio), sr, VAD_SR)
        return spans_from_probs(self._probs16(x16), x16.size, self.params)


class StreamingVAD:
    """Frame-fed VAD for the scheduler: `push()` frames of any length at `sr`; read the state after each push.

    `speaking` is True inside confirmed speech (a merged span that has reached min_speech_ms) until its
    min-silence and merge hang-overs have run out; `silence_s` counts seconds on the input clock since the end
    of the last confirmed speech (math.inf if there never was any); `onsets` holds confirmed span starts.

    Pushed frames are kept and given to the model when the state is next read, in the order and the pieces they
    came in, so what is read is exactly what pushing them one by one would give; frames nobody reads after (an
    episode's tail past its last wait on the model) cost nothing.
    """

    def __init__(self, params: VADParams | None = None, sr: int = SESSION_SR) -> None:
        self.params = params or VADParams()
        self.sr = int(sr)
        self._runner = _SileroRunner(self.params.model_floor_dbfs)
        self._tracker = span_tracker(self.params)
        self.reset()

    def reset(self) -> None:
        self._rs = None if self.sr == VAD_SR else soxr.ResampleStream(self.sr, VAD_SR, 1, "float32", "HQ")
        self._runner.reset()
        self._tracker.reset()
        self._buf = np.zeros(0, dtype=np.float32)
        self._in_n = 0
        self._pending: list[np.ndarray] = []

    def push(self, frame: np.ndarray) -> None:
        frame = np.array(_mono(frame), dtype=np.float32)  # a copy: the caller may reuse its array
        self._in_n += frame.size
        self._pending.append(frame)

    def _catch_up(self) -> None:
        pending, self._pending = self._pending, []
        for frame in pending:
            self._feed(frame)

    def _feed(self, frame: np.ndarray) -> None:
        # soxr's stream output is delay-compensated: 16 kHz sample j is input time j/16000 (checked in tests).
        y = frame if self._rs is None else self._rs.resample_chunk(frame)
        if self._buf.size:
            y = np.concatenate([self._buf, y])
        n_full = y.size // CHUNK
        step, prob, floor = self._tracker.step, self._runner.prob, self._runner.floor_ms
        for k in range(n_full):
            c = y[k * CHUNK : (k + 1) * CHUNK]
            step(prob(c, float(np.dot(c, c)) >= floor * CHUNK))
        self._buf = y[n_full * CHUNK :].copy()  # never alias the caller's frame

    @property
    def time_s(self) -> float:
        """Seconds of input pushed so far (the input clock)."""
        return self._in_n / self.sr

    @property
    def speaking(self) -> bool:
        self._catch_up()
        return self._tracker.speaking

    @property
    def ever_spoke(self) -> bool:
        self._catch_up()
        return bool(self._tracker.onsets)

    @property
    def onsets(self) -> list[float]:
        self._catch_up()
        return [s / VAD_SR for s in self._tracker.onsets]

    @property
    def spans(self) -> list[Span]:
        """Finalized spans so far (an open span is not included until its hang-over ends)."""
        self._catch_up()
        return self._tracker.spans()

    @property
    def silence_s(self) -> float:
        self._catch_up()
        t = self._tracker
        if t.speech_now:
            return 0.0  # speech is going on right now
        last = t.last_speech_end()
        if last is None:
            return math.inf
        return max(0.0, self.time_s - last / VAD_SR)
