"""A run folder's episodes, read once and checked: what a scorer of any benchmark may trust (docs/conventions.md).

Every `{case_id}.rec.json` becomes either a usable episode or a `Failure` with its reason, and one bad file
never stops the rest from being scored (STYLE 10: failure is a result):

- the run recorded it as failed: its own reason;
- its record does not parse, or belongs to another benchmark: the file and what is wrong with it;
- its recording is missing, unreadable, or disagrees with the record: not 24 kHz, not 2 channels (ch0 user,
  ch1 model), or not as long as `duration_s` says (within `LENGTH_TOLERANCE_S`). A 24 kHz recording with a
  16 kHz header would otherwise be scored with every time stretched 1.5x.

The folder's `run.json` (written by `run`) names the dataset, so the windows of a failed case whose record
lacks its gold can still be looked up (`dataset_cases`), and a digest over the episodes lets scores say which
folder state they describe (see `metrics/freshness.py`).

An episode the run recorded as skipped (the adapter lacks a capability the case needs, e.g. teacher forcing for
M3's Full context) is neither usable nor failed: it goes to `RunFolder.skipped`, is left out of every score and
every failure count, and is reported with its reason (`skipped_summary`, and a line in `accounting_flags`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import soundfile as sf

from dataset_builder.audio import SESSION_SR
from dataset_builder.episode import Episode
from dataset_builder.errors import UsageError
from dataset_builder.schema import SchemaError

REC_SUFFIX = ".rec.json"
RUN_INFO = "run.json"  # the run folder's record of what was run (dataset, adapter, identity)
LENGTH_TOLERANCE_S = 0.001  # rec.json rounds duration_s to the millisecond
CHANNELS = 2  # ch0 user, ch1 model (docs/conventions.md)


class RecordingError(ValueError):
    """An episode's recording cannot be scored; the message names the file and what is wrong."""


@dataclass
class Failure:
    """An episode that counts as failed: by the run's own record, or because the scorer could not use it."""

    case_id: str
    status: str  # "failed" / "skipped" (the run's status) or "unusable" (the scorer's verdict on its files)
    reason: str
    episode: Episode | None = None  # the record, when it parsed

    def to_dict(self) -> dict[str, Any]:
        return {"case_id": self.case_id, "status": self.status, "reason": self.reason}


@dataclass
class RunFolder:
    """The episodes of one run folder: usable ones, failures, run.json and a digest of what was read."""

    run_dir: Path
    ok: list[Episode] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)
    skipped: list[Failure] = field(default_factory=list)  # recorded as skipped by the run: neither ok nor failed
    info: dict[str, Any] | None = None  # run.json, when present and readable
    digest: str = ""  # see `episodes_digest`
    case_ids: list[str] = field(default_factory=list)  # every episode file, usable or not, sorted

    @property
    def n_episodes(self) -> int:
        return len(self.case_ids)

    def adapter(self) -> dict[str, Any]:
        """The adapter of the run: from the first parsed record, else from run.json."""
        for ep in [*self.ok, *(f.episode for f in [*self.failures, *self.skipped] if f.episode)]:
            if ep is not None and ep.adapter:
                return dict(ep.adapter)
        name = ((self.info or {}).get("identity") or {}).get("adapter")
        return {"name": name} if name else {"name": "unknown"}

    def fail(self, ep: Episode, reason: str) -> None:
        """Move a usable episode to the failures (its recording turned out unreadable while measuring)."""
        self.ok = [e for e in self.ok if e.case_id != ep.case_id]
        self.failures.append(Failure(ep.case_id, "unusable", reason, ep))
        self.failures.sort(key=lambda f: f.case_id)

    def usable_recording(self, ep: Episode, gold_problem: str | None) -> np.ndarray | None:
        """The episode's checked recording (`read_recording`); None, with the episode moved to the failures and the
        reason, when its gold lacks what the measurement needs (`gold_problem`) or its recording cannot be used."""
        if gold_problem:
            self.fail(ep, f"{ep.case_id}{REC_SUFFIX}: {gold_problem}")
            return None
        try:
            return read_recording(self.run_dir, ep)
        except RecordingError as err:
            self.fail(ep, str(err))
            return None


def case_id_of(rec: Path) -> str:
    return rec.name.removesuffix(REC_SUFFIX)


def read_run_info(run_dir: Path, *, strict: str | None = None) -> dict[str, Any] | None:
    """The folder's run.json (written by `run`), or None when it has none. An unreadable one (not a JSON object)
    is None too, unless `strict` says what to do about it: then it is a UsageError naming the file, ending in
    `strict`."""
    path = Path(run_dir) / RUN_INFO
    try:
        info = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, json.JSONDecodeError) as err:
        if strict is None:
            return None
        raise UsageError(f"{path} is not valid JSON ({err}); {strict}") from None
    if isinstance(info, dict):
        return info
    if strict is None:
        return None
    raise UsageError(f"{path} is not a JSON object; {strict}")


def check_recording(wav: Path, duration_s: float, rec_name: str) -> None:
    """Raise RecordingError unless `wav` is a readable 24 kHz 2-channel WAV `duration_s` long."""
    if not wav.exists():
        raise RecordingError(f"recording {wav.name} is missing (its {rec_name} says the episode finished)")
    try:
        info = sf.info(str(wav))
    except (RuntimeError, OSError) as err:  # soundfile's LibsndfileError is a RuntimeError
        raise RecordingError(f"recording {wav.name} is not a readable WAV file ({err})") from None
    if info.samplerate != SESSION_SR:
        raise RecordingError(f"recording {wav.name} has a {info.samplerate} Hz header; episodes are recorded at "
                             f"{SESSION_SR} Hz, and scoring it as written would shift every time")
    if info.channels != CHANNELS:
        raise RecordingError(f"recording {wav.name} has {info.channels} channel(s); an episode has "
                             f"{CHANNELS} (ch0 user, ch1 model)")
    expected = duration_s * SESSION_SR
    if abs(info.frames - expected) > LENGTH_TOLERANCE_S * SESSION_SR + 1e-6:
        raise RecordingError(f"recording {wav.name} holds {info.frames / SESSION_SR:.3f} s but {rec_name} says "
                             f"the episode lasted {duration_s:.3f} s")


def read_recording(run_dir: Path, ep: Episode) -> np.ndarray:
    """The episode's checked (n, 2) float32 recording at 24 kHz, or RecordingError naming the file."""
    wav = Path(run_dir) / f"{ep.case_id}.wav"
    check_recording(wav, ep.duration_s, f"{ep.case_id}{REC_SUFFIX}")
    try:
        audio, _ = sf.read(str(wav), dtype="float32", always_2d=True)
    except (RuntimeError, OSError) as err:
        raise RecordingError(f"recording {wav.name} could not be read ({err})") from None
    return audio


def episodes_digest(entries: list[tuple[str, bytes, int]]) -> str:
    """sha256 over every episode's (case id, rec.json bytes, WAV size): changes when an episode is added,
    removed, re-run or rewritten, without reading the audio."""
    h = hashlib.sha256()
    for case_id, rec_bytes, wav_size in sorted(entries):
        h.update(f"{case_id}\0{hashlib.sha256(rec_bytes).hexdigest()}\0{wav_size}\n".encode())
    return h.hexdigest()


def _wav_size(run_dir: Path, case_id: str) -> int:
    try:
        return (run_dir / f"{case_id}.wav").stat().st_size
    except OSError:
        return -1


def _read_records(run_dir: Path) -> list[tuple[Path, bytes | OSError, int]]:
    """Every `*.rec.json` of the folder, sorted: its path, its bytes (or the error reading them), its WAV size."""
    out: list[tuple[Path, bytes | OSError, int]] = []
    for rec in sorted(run_dir.glob(f"*{REC_SUFFIX}")):
        try:
            data: bytes | OSError = rec.read_bytes()
        except OSError as err:
            data = err
        out.append((rec, data, _wav_size(run_dir, case_id_of(rec))))
    return out


def _digest_of(records: list[tuple[Path, bytes | OSError, int]]) -> str:
    return episodes_digest([(case_id_of(rec), data if isinstance(data, bytes) else b"", wav_size)
                            for rec, data, wav_size in records])


def folder_digest(run_dir: Path) -> tuple[str, list[str]]:
    """The digest and case ids of the folder as it is now (what `load_run_folder` would record)."""
    records = _read_records(Path(run_dir))
    return _digest_of(records), [case_id_of(rec) for rec, _, _ in records]


def load_run_folder(run_dir: Path, benchmark: str, *, check_audio: bool = True) -> RunFolder:
    """Every episode of the folder, each usable or a Failure with its reason; never raises for one bad file."""
    run_dir = Path(run_dir)
    folder = RunFolder(run_dir=run_dir, info=read_run_info(run_dir))
    records = _read_records(run_dir)
    for rec, data, _ in records:
        case_id = case_id_of(rec)
        folder.case_ids.append(case_id)
        if isinstance(data, OSError):
            folder.failures.append(Failure(case_id, "unusable", f"{rec.name} could not be read ({data})"))
            continue
        try:
            ep = Episode.from_dict(json.loads(data), source=str(rec))
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            folder.failures.append(Failure(case_id, "unusable", f"{rec.name} is not valid JSON (truncated?): {err}"))
            continue
        except (SchemaError, ValueError, TypeError, AttributeError) as err:  # e.g. a list, not an object
            folder.failures.append(Failure(case_id, "unusable", f"{rec.name} is not an episode record: {err}"))
            continue
        if ep.case_id != case_id:
            folder.failures.append(Failure(case_id, "unusable", f"{rec.name} holds the record of case "
                                           f"{ep.case_id!r}, not {case_id!r}", None))
            continue
        if ep.benchmark != benchmark:
            folder.failures.append(Failure(case_id, "unusable", f"{rec.name} is an episode of benchmark "
                                           f"{ep.benchmark!r}, not {benchmark!r}", None))
            continue
        if ep.status == "skipped":
            folder.skipped.append(Failure(case_id, "skipped", ep.failure or "episode skipped", ep))
            continue
        if ep.status != "ok":
            folder.failures.append(Failure(case_id, ep.status, ep.failure or f"episode {ep.status}", ep))
            continue
        if check_audio:
            try:
                check_recording(run_dir / f"{case_id}.wav", ep.duration_s, rec.name)
            except RecordingError as err:
                folder.failures.append(Failure(case_id, "unusable", str(err), ep))
                continue
        folder.ok.append(ep)
    folder.digest = _digest_of(records)
    return folder


def dataset_cases(info: dict[str, Any] | None) -> tuple[dict[str, Any], str | None]:
    """The run's dataset cases by id (no audio is read), or ({}, why they cannot be had)."""
    if not info:
        return {}, "the folder has no readable run.json naming its dataset"
    identity = info.get("identity") or {}
    dataset, config = identity.get("dataset"), info.get("config") or identity.get("config")
    if not dataset or not config:
        return {}, "run.json names no dataset and config"
    from dataset_builder.benchmarks import benchmark_for_config

    try:
        cases = benchmark_for_config(config).function("cases")(dataset, config)
    except Exception as err:  # any failure to read the dataset is reported, never raised past the scorer
        return {}, f"its dataset {dataset} ({config}) could not be read: {type(err).__name__}: {err}"
    return {c.case_id: c for c in cases}, None


# What a benchmark says about one failed case: its windows as failed measurement records and where their labels
# came from ("rec.json", "dataset"), given the run's dataset cases by id ({} until they are needed); None when
# they cannot be known.
WindowsOf = Callable[[Failure, dict[str, Any]], "tuple[list[dict[str, Any]], str] | None"]


def account_failures(folder: RunFolder, windows_of: WindowsOf
                     ) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]:
    """Failed-window records of every failure (to count against the model), the failures as result entries
    ({case_id, status, reason, windows, windows_from}), and the ones whose windows are unknown
    ({"case_ids": [...], "why": ...}). The dataset is read only when some failed record lacks its gold."""
    found = {f.case_id: windows_of(f, {}) for f in folder.failures}
    why: str | None = None
    if any(v is None for v in found.values()):
        cases, why = dataset_cases(folder.info)
        found = {f.case_id: found[f.case_id] or windows_of(f, cases) for f in folder.failures}
    records: list[dict[str, Any]] = []
    entries: list[dict[str, Any]] = []
    unknown: list[str] = []
    for f in folder.failures:
        hit = found[f.case_id]
        if hit is None:
            unknown.append(f.case_id)
            entries.append(f.to_dict() | {"windows": None, "windows_from": None})
            continue
        windows, source = hit
        records.extend(windows)
        entries.append(f.to_dict() | {"windows": len(windows), "windows_from": source})
    if unknown and why is None:
        dataset = ((folder.info or {}).get("identity") or {}).get("dataset")
        why = f"the case ids are not in the run's dataset {dataset}"
    return records, entries, {"case_ids": unknown, "why": why if unknown else None}


def skipped_summary(folder: RunFolder) -> dict[str, Any]:
    """The skipped episodes for scores.json: how many, how many per reason, and their case ids."""
    return {"n": len(folder.skipped), "reasons": _reason_counts(folder.skipped),
            "case_ids": [f.case_id for f in folder.skipped]}


def _reason_counts(entries: list[Failure]) -> dict[str, int]:
    reasons: dict[str, int] = {}
    for f in entries:
        reasons[f.reason] = reasons.get(f.reason, 0) + 1
    return dict(sorted(reasons.items()))


def selection_text(selection: Mapping[str, Any]) -> str:
    """How `run` chose its cases (one entry of run.json `selections`), as the command line said it."""
    if selection.get("sample") is not None:
        how = f"--sample {selection['sample']} (seed {selection.get('seed')})"
    elif selection.get("limit") is not None:
        how = f"--limit {selection['limit']}"
    else:
        how = "every case"
    ids = selection.get("case_ids")
    if ids:
        shown = ", ".join(ids[:3]) + (" ..." if len(ids) > 3 else "")
        how = f"--case {shown}" if how == "every case" else f"{how} of --case {shown}"
    return how


def coverage(n_cases: int, n_dataset: int | None, selections: Sequence[Mapping[str, Any]] | None = None
             ) -> dict[str, Any]:
    """What a result covers, for every place that shows one (scores.json, `score`'s lines, the report, the Hub
    card and results.jsonl): "k of n cases", whether the run is partial (fewer episodes than the dataset has cases)
    and how its cases were chosen (run.json `selections`). A dataset of unknown size (no run.json) is not called
    partial, and the text says the size is unknown."""
    partial = bool(n_dataset) and n_cases < int(n_dataset or 0)
    how = "; ".join(dict.fromkeys(selection_text(sel) for sel in selections or []))
    if n_dataset:
        text = f"{n_cases} of {n_dataset} cases"
    else:
        text = f"{n_cases} cases (the dataset's size is unknown: no run.json)"
    if partial:
        text += f", PARTIAL run ({how})" if how else ", PARTIAL run"
    return {"n_cases": n_cases, "n_dataset_cases": n_dataset, "partial": partial, "selection": how or None,
            "text": text}


def accounting_flags(uncounted: dict[str, Any], n_episodes: int, n_dataset: int | None,
                     skipped: list[Failure] | None = None) -> list[str]:
    """Run-health lines about what the scores cover: failures left out of every denominator, a partial run, and
    cases skipped because the adapter cannot run them (one line per reason, with its count)."""
    flags = [f"{k} case(s) skipped, not scored: {reason}" for reason, k in _reason_counts(skipped or []).items()]
    ids = uncounted.get("case_ids") or []
    if ids:
        flags.append(f"{len(ids)} failed episode(s) with unknown windows ({', '.join(ids[:3])}"
                     f"{' ...' if len(ids) > 3 else ''}): NOT counted in any denominator, because {uncounted['why']}")
    if n_dataset and n_episodes < n_dataset:
        flags.append(f"partial run: {n_episodes} of {n_dataset} dataset cases have an episode; the scores cover "
                     "only those")
    return flags
