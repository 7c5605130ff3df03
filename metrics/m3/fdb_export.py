"""Export an M3 run folder to Full-Duplex-Bench v1's per-sample layout (docs/interop.md), so its own scripts
(`get_transcript/asr.py`, then `evaluation/evaluate.py --task TASK --root_dir OUT/{condition}/{task}`) score our
recordings with their definitions, beside ours (`duplex-eval score`)::

    OUT/{condition}/{task}/{case_id}/input.wav     the user channel as it was played (ch0), mono
    OUT/{condition}/{task}/{case_id}/output.wav    the model channel (ch1), mono, exactly as long
    OUT/{condition}/{task}/{case_id}/{task file}   turn_taking.json / pause.json / interrupt.json
    OUT/export.json                                what was written, what was left out and why

Which of our events map onto which of their tasks is one table, `dataset_builder.rules.fdb_tasks.TASKS`: SHIFT ->
smooth_turn_taking (`[{"text": "[TURN-TAKING]", "timestamp": [s, t]}]`: their latency is measured from s), PAUSE ->
pause_handling (`[{"text": "[PAUSE]", "timestamp": [s, t]}]`), BARGE_IN -> user_interruption (`[{"context",
"interrupt", "timestamp": [s, t]}]`: their ASR transcribes the output after t; `context` is the user's last turn
before s, `interrupt` the barge-in's own text, read from the run's dataset). BC is left out and counted
(`LEFT_OUT_EVENTS`: their v1 backchannel task is the model's own backchannels, ours the user's).

Times are on the recording's clock (rec.json's gold: the realised stream, lead silence and frame padding
included), so input.wav, output.wav and the timestamps agree; audio is the recording's own PCM16 samples at
24 kHz, copied, not re-encoded (their scripts read any rate; their ASR and VAD resample). One folder per condition
and task, because their scripts average every sample folder of the folder they are given and read nothing else
in it; the summary sits at the top. A run needs no scoring first: everything comes from rec.json and the WAV.
"""

from __future__ import annotations

import io
from collections import Counter
from pathlib import Path
from typing import Any

import soundfile as sf

from dataset_builder.atomic import atomic_write_bytes, atomic_write_json
from dataset_builder.audio import SESSION_SR
from dataset_builder.episode import Episode
from dataset_builder.errors import UsageError
from dataset_builder.m3.schema import BENCHMARK
from dataset_builder.rules.fdb_tasks import LAYOUT, LEFT_OUT_EVENTS, TASKS
from metrics.episodes import check_recording, dataset_cases, load_run_folder, read_run_info

SUMMARY = "export.json"
# Their samples are single user turns heard by a model silent until then; ours may carry the model's speech before s.
CAVEAT = ("their scripts read every word of output.wav: model speech before s counts for them (as a take-over in "
          "pause handling, as the response onset in turn-taking), including the teacher-forced system turns of "
          "`full`; `none` (the stream starts at b) is the closest to their single-turn samples")


def annotation(event_type: str, gold: dict[str, Any], interrupt_text: str = "") -> list[dict[str, Any]]:
    """Their task file's content for one episode (times on the recording clock, as rec.json rounds them)."""
    span = [gold["event_start_s"], gold["event_end_s"]]
    if event_type == "BARGE_IN":
        before = [u for u in gold.get("context") or [] if u[0] == "user" and u[3] <= gold["event_start_s"]]
        return [{"context": str(before[-1][1]) if before else "", "interrupt": interrupt_text, "timestamp": span}]
    return [{"text": TASKS[event_type][2], "timestamp": span}]


def _barge_in_text(case: Any) -> str:
    """The user utterance starting at s: the barge-in's words (its row's clip clock)."""
    ev = case.event
    hit = [u for u in ev.utterances if u.speaker == "user" and abs(u.start_s - ev.event_start_s) < 1e-3]
    return hit[0].text if hit else ""


def _mono_pcm16(channel: Any) -> bytes:
    buf = io.BytesIO()
    sf.write(buf, channel, SESSION_SR, format="WAV", subtype="PCM_16")
    return buf.getvalue()


def _write_sample(folder: Path, run_dir: Path, ep: Episode, task_file: str, content: list[dict[str, Any]]) -> None:
    wav = run_dir / f"{ep.case_id}.wav"
    check_recording(wav, ep.duration_s, f"{ep.case_id}.rec.json")
    pcm, _ = sf.read(str(wav), dtype="int16", always_2d=True)  # the recorded samples themselves
    atomic_write_bytes(folder / "input.wav", _mono_pcm16(pcm[:, 0]))
    atomic_write_bytes(folder / "output.wav", _mono_pcm16(pcm[:, 1]))
    atomic_write_json(folder / task_file, content)


def export_fdb(run_dir: Path | str, out: Path | str) -> dict[str, Any]:
    """Write FDB v1's layout for every finished episode of an M3 run whose event maps onto one of their tasks;
    returns the summary also written to `out/export.json`."""
    run_dir, out = Path(run_dir), Path(out)
    info = read_run_info(run_dir)
    bench = (info or {}).get("benchmark")
    if bench != BENCHMARK:
        raise UsageError(f"{run_dir} is a {bench or 'unknown'} run; `export fdb` exports M3 runs (their SHIFT, PAUSE "
                         "and BARGE_IN events are Full-Duplex-Bench v1's turn-taking, pause handling and user "
                         "interruption; the other benchmarks have no events in its tasks)")
    folder = load_run_folder(run_dir, BENCHMARK)
    cases: dict[str, Any] = {}
    no_cases = None
    if any(ep.gold.get("event_type") == "BARGE_IN" for ep in folder.ok):
        cases, no_cases = dataset_cases(folder.info)
    written: Counter[tuple[str, str]] = Counter()
    events_left: Counter[str] = Counter()
    for ep in folder.ok:
        event_type, cond = ep.gold["event_type"], ep.condition
        if event_type not in TASKS:
            events_left[event_type] += 1
            continue
        task, task_file, _ = TASKS[event_type]
        text = _barge_in_text(cases[ep.case_id]) if ep.case_id in cases and event_type == "BARGE_IN" else ""
        _write_sample(out / cond / task / ep.case_id, run_dir, ep, task_file, annotation(event_type, ep.gold, text))
        written[(cond, task)] += 1
    by_condition: dict[str, dict[str, int]] = {}
    for (cond, task), n in sorted(written.items()):
        by_condition.setdefault(cond, {})[task] = n
    summary = {
        "out": str(out), "layout": LAYOUT, "run": str(run_dir.resolve()), "adapter": folder.adapter().get("name"),
        "samples": by_condition,
        "events_left_out": {t: {"episodes": n, "why": LEFT_OUT_EVENTS.get(t, "no FDB v1 task")}
                            for t, n in sorted(events_left.items())},
        "episodes_left_out": [f.to_dict() for f in [*folder.failures, *folder.skipped]],
        "interrupt_text": None if no_cases is None else f"empty: {no_cases}",
        "audio": f"{SESSION_SR} Hz PCM16 mono: input.wav = the recording's ch0 (user), output.wav = its ch1 (model)",
        "mapping": {t: {"task": task, "file": file} for t, (task, file, _) in TASKS.items()},
        "caveat": CAVEAT,
        "score_with_their_scripts": [f"python get_transcript/asr.py --root_dir {out}/{{condition}}/{{task}}"
                                     " [--task user_interruption]",
                                     f"python evaluation/evaluate.py --task {{task}} --root_dir "
                                     f"{out}/{{condition}}/{{task}}"],
    }
    atomic_write_json(out / SUMMARY, summary)
    return summary


def describe(summary: dict[str, Any]) -> list[str]:
    """What `export fdb` prints."""
    lines = [f"exported to {summary['out']} ({summary['layout']}: {{condition}}/{{task}}/{{case_id}}/input.wav, "
             "output.wav, the task file):"]
    lines += [f"  {cond}/{task}: {n} sample(s)" for cond, tasks in summary["samples"].items()
              for task, n in tasks.items()]
    lines += [f"LEFT OUT {t}: {v['episodes']} episode(s): {v['why']}" for t, v in summary["events_left_out"].items()]
    lines += [f"LEFT OUT {f['case_id']} ({f['status']}): {f['reason']}" for f in summary["episodes_left_out"]]
    if summary["interrupt_text"]:
        lines.append(f"NO TEXT interrupt.json 'interrupt' is {summary['interrupt_text']}")
    lines.append(f"NOTE {summary['caveat']}")
    lines.append("score with their scripts: " + "; then ".join(summary["score_with_their_scripts"]))
    return lines

