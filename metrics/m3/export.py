"""Export an M3 run folder to the layout the M3-DuplexBench authors' evaluation reads (docs/benchmarks/m3.md), so
their `evaluation/run_evaluation.py` can score our recordings unchanged.

    OUT/{condition}/metadata.jsonl                        one line per episode, their field names
    OUT/{condition}/audio/{sample_id}/{event_id}.wav      stereo, ch0 user, ch1 model, 24 kHz: the recording over
                                                          [input_start, input_end) (P + W; BC / BARGE_IN: W)
    OUT/{condition}/asr/{sample_id}/{event_id}.json       {"context_length": 0.0, "segments": [{"channel", "text",
                                                          "timestamp": [s, e], "chunks": [{"text", "timestamp"}]}]}
    OUT/export.json                                       what was exported, under which rules, what was left out
                                                          and why

One folder per condition, because their evaluation averages everything in one metadata file (they run one
condition of one language and domain per inference run; a run of ours is one config, so one language and domain,
and a run that mixes them is refused). Field values: `sample_id` = our dialogue id, `event_id` = our event id,
`task` and `event_type` in their vocabulary (SHIFT -> TURN_SHIFT / smooth_turn_taking, PAUSE -> TURN_HOLD /
pause_handling, BC -> backchanneling, BARGE_IN), `user_channel` 0 and `system_channel` 1 (the output files'
channels, which their evaluators assume), the times on our recording's clock (their evaluators use only
differences from `input_start`), `input_end` = s + max(Δ, t − s) for BC / BARGE_IN as their `get_input_times`
computes (cut to the recording), `context_mode` none / user_audio / teacher_forcing, and `output_asr_path` (their
evaluation's `--metadata` key). Our own ids ride along as `case_id`, `condition`, `language`, `domain`.

Which episodes: exactly those the project scores under the chosen rule set (`--param`, as for `score`; the paper's
by default). The others are listed in export.json's `left_out` with the reason: failed and skipped episodes (no
recording; scores.json counts a failed one against the model), events the rule set drops (`rules=authors` drops
the events whose reference system state does not fit them, e.g. overlapping SHIFTs, as their code does), and a
PAUSE whose backchannel filter we could not apply (no word counts: an ASR that does not transcribe the language),
which their filter would decide on empty chunks. So with `--param rules=authors` their timing summary of each
condition folder equals our `scores-rules=authors.json` cell for cell, value and n (a test runs our reference of
their evaluator on an export), for a run without failed episodes.

The ASR JSON holds the model channel's utterances as their aligner builds them (words joined across gaps < 0.5 s,
`asr/run_aligner.py: segment_words`): our VAD spans joined the same way (the `authors` rule set's segmentation and
view), times relative to `input_start`. A segment's text is the transcript scoring stored for it where scoring
transcribed it (the short segments of a PAUSE, which the backchannel filter reads), else the export's ASR in the
episode's language. `chunks` are the text's words (metrics/m3/words.py, the count scoring used) spread evenly over
the utterance (we have no forced aligner): their timing code reads only segment times and the number of chunks
(its backchannel filter), which this keeps. Where the export's ASR cannot transcribe the language, the other
segments' text and chunks are empty and the summary says so. The user side of P is given as one channel-0 segment
per gold utterance, for their content prompts.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from dataset_builder.atomic import atomic_write_json, atomic_write_text
from dataset_builder.audio import SESSION_SR, write_wav
from dataset_builder.errors import UsageError
from dataset_builder.m3.schema import BENCHMARK
from metrics.episodes import load_run_folder, read_recording
from metrics.freshness import MEASUREMENTS, load_json, refuse_if_stale, scores_path
from metrics.m3 import content as C
from metrics.m3.rules import (
    RULE_SETS,
    EventTimes,
    Rules,
    ms,
    rules_from,
    sec,
    segment_key,
    segments,
    verdict,
    visible,
    window_end,
)
from metrics.m3.score import vad_params
from metrics.m3.words import words
from metrics.scoring import LazyASR, asr_audio, lazy_spans
from metrics.spans import Span, spans_from_json
from metrics.vad import SileroVAD

EVENT_TYPE = {"SHIFT": "TURN_SHIFT", "PAUSE": "TURN_HOLD", "BC": "BC", "BARGE_IN": "BARGE_IN"}
TASK = {"SHIFT": "smooth_turn_taking", "PAUSE": "pause_handling", "BC": "backchanneling", "BARGE_IN": "barge_in"}
CONTEXT_MODE = {"none": "none", "user": "user_audio", "full": "teacher_forcing"}
AUTHORS = RULE_SETS["authors"]


def chunks(ws: list[str], a: float, b: float) -> list[dict[str, Any]]:
    """Words spread evenly over [a, b) (no forced alignment: see the module docstring)."""
    if not ws:
        return []
    step = (b - a) / len(ws)
    return [{"text": w, "timestamp": [round(a + i * step, 3), round(a + (i + 1) * step, 3)]}
            for i, w in enumerate(ws)]


def input_span(m: dict[str, Any]) -> tuple[float, float]:
    """[input_start, input_end) of their `get_input_times`: from b (SHIFT / PAUSE) or s (BC / BARGE_IN) to the
    (for BC / BARGE_IN, extended) window end, cut to the recording."""
    ev = EventTimes.of(m)
    return sec(ev.b), sec(window_end(ev, AUTHORS))


def segment_words(m: dict[str, Any], seg: tuple[int, int], text: str) -> list[str]:
    """The words of one model segment's text; for a segment scoring counted, the same count (else the word rule
    changed since scoring, and the export would not be what was scored)."""
    ws = words(text, m["language"])
    key = segment_key(seg, AUTHORS, EventTimes.of(m))
    stored = (m.get("words") or {}).get(key)
    if stored is not None and int(stored) != len(ws):
        raise UsageError(f"{m['case_id']}: segment {key} was scored as {stored} word(s) but counts {len(ws)} now "
                         f"({text!r}); score the run again (duplex-eval score) before exporting it")
    return ws


def asr_json(m: dict[str, Any], model: np.ndarray, transcribe: Any,
             user_spans: Callable[[], Sequence[Span]] = tuple) -> dict[str, Any]:
    """Their ASR JSON for one episode (times relative to input_start). A model segment's text is the transcript
    scoring stored for it where there is one (`words_text`), else `transcribe`'s (empty without one) of the segment
    heard as the scorer hears it: its speech padded by `asr_audio`, never into the model's other speech or the
    user's speech (`user_spans()`, found only when a segment needs transcribing)."""
    ev = EventTimes.of(m)
    lo = ev.b
    stored = m.get("words_text") or {}
    spans = spans_from_json(m["vad_spans"])
    segs: list[dict[str, Any]] = []
    for a, b in visible(segments(m["vad_spans"], AUTHORS), ev, AUTHORS):
        key = segment_key((a, b), AUTHORS, ev)
        if key in stored:
            text = str(stored[key])
        else:
            text = transcribe(asr_audio(model, SESSION_SR, spans, (0.0, model.size / SESSION_SR), user_spans(),
                                        lo=a / 1000, hi=b / 1000)) if transcribe else ""
        ra, rb = sec(a - lo), sec(b - lo)
        segs.append({"channel": 1, "text": text, "timestamp": [ra, rb],
                     "chunks": chunks(segment_words(m, (a, b), text), ra, rb)})
    for u in m.get("context") or []:
        if u[0] == "user" and ms(u[3]) > lo and ms(u[2]) < ev.s:
            ra, rb = sec(max(ms(u[2]), lo) - lo), sec(min(ms(u[3]), ev.s) - lo)
            segs.append({"channel": 0, "text": str(u[1]), "timestamp": [ra, rb],
                         "chunks": chunks(words(str(u[1]), m["language"]), ra, rb)})
    segs.sort(key=lambda s: (s["timestamp"][0], s["channel"], s["timestamp"][1]))
    return {"context_length": 0.0, "segments": segs}


def metadata(m: dict[str, Any], adapter: str, wav: Path, asr_path: Path) -> dict[str, Any]:
    start, end = input_span(m)
    return {
        "sample_id": m["dialogue_id"], "event_id": m["event_id"], "model": adapter, "task": TASK[m["event_type"]],
        "event_type": EVENT_TYPE[m["event_type"]], "user_channel": 0, "system_channel": 1,
        "event_start": m["event_start_s"], "event_end": m["event_end_s"], "trigger_time": start,
        "input_start": start, "input_end": end, "context_start": m.get("context_start_s", 0.0),
        "context_end": start, "input_audio_path": "", "context_audio_path": "", "alignment_path": None,
        "output_audio_path": str(wav.resolve()), "output_asr_path": str(asr_path.resolve()),
        "use_context": m["condition"] != "none", "context_mode": CONTEXT_MODE[m["condition"]],
        "case_id": m["case_id"], "condition": m["condition"], "language": m["language"], "domain": m["domain"],
    }


def not_exported(m: dict[str, Any], rules: Rules) -> dict[str, str] | None:
    """Why a measured episode stays out of the export under `rules` ({"status", "reason"}), or None."""
    if m.get("failed"):
        return {"status": "failed", "reason": f"{m.get('reason', 'failed')} (no recording to export; scores count "
                                              "it against the model)"}
    v = verdict(m, rules)
    if not v["scored"]:
        return {"status": "dropped", "reason": f"not scored under rules={rules.name}: {v['dropped']}"}
    if str(v.get("bc_filter", "")).startswith("not"):
        return {"status": "no word counts",
                "reason": f"PAUSE scored without the backchannel filter ({m.get('words_status')}); their filter "
                          "would read the empty chunks as a backchannel"}
    return None


def export_run(run_dir: Path, out: Path, *, asr: Any = None, overrides: dict[str, Any] | None = None
               ) -> dict[str, Any]:
    """Write the authors' layout for every episode `run_dir`'s scores count under the rule set of `overrides`
    (`rules=authors`, any rule parameter; the paper's rules by default). The run is scored first: the VAD spans
    and word counts come from its measurements.jsonl, refused when stale. Returns the summary written to
    export.json: episodes per condition, the rules, what was left out and why."""
    run_dir, out = Path(run_dir), Path(out)
    rules, applied = rules_from(overrides)
    scores = load_json(run_dir / "scores.json", "scores file")
    if scores.get("benchmark") != BENCHMARK:
        raise UsageError(f"{run_dir} holds {scores.get('benchmark')!r} scores; `export m3` exports M3 runs")
    refuse_if_stale(run_dir, run_dir / "scores.json", scores, "the export would pair old spans with new audio")
    measured = [json.loads(x) for x in (run_dir / MEASUREMENTS).read_text().splitlines() if x.strip()]
    configs = sorted({(str(m.get("language")), str(m.get("domain"))) for m in measured if m.get("language")})
    if len(configs) > 1:
        raise UsageError(f"{run_dir} mixes {', '.join(f'{lang}/{dom}' for lang, dom in configs)}: their evaluation "
                         "takes one language and domain per metadata file; export one run per config")
    folder = load_run_folder(run_dir, BENCHMARK)
    episodes = {ep.case_id: ep for ep in folder.ok}
    lazy = LazyASR(asr)
    lines: dict[str, list[str]] = {}
    counts: Counter[str] = Counter()
    no_text: Counter[str] = Counter()
    left_out = [{"case_id": f.case_id, "status": f.status, "reason": f.reason}
                for f in [*folder.failures, *folder.skipped]]
    listed = {f["case_id"] for f in left_out}
    for m in measured:
        why = not_exported(m, rules) or (None if m["case_id"] in episodes else
                                         {"status": "failed", "reason": "no usable recording"})
        if why:
            if m["case_id"] not in listed:
                left_out.append({"case_id": m["case_id"], **why})
            continue
        audio = read_recording(run_dir, episodes[m["case_id"]])
        start, end = input_span(m)
        base = out / m["condition"]
        wav = base / "audio" / m["dialogue_id"] / f"{m['event_id']}.wav"
        asr_path = base / "asr" / m["dialogue_id"] / f"{m['event_id']}.json"
        a, b = ms(start) * SESSION_SR // 1000, ms(end) * SESSION_SR // 1000
        wav.parent.mkdir(parents=True, exist_ok=True)
        write_wav(wav, audio[a:b])
        problem = C.language_problem(lazy.get(), m["language"])
        transcribe = None
        if problem is None:
            bound = C.transcriber(lazy.get(), m["language"])

            def transcribe(x: np.ndarray, bound: Any = bound) -> str:
                return str(bound(x, SESSION_SR))
        else:
            no_text[m["language"]] += 1
        asr_path.parent.mkdir(parents=True, exist_ok=True)
        user = lazy_spans(SileroVAD(vad_params(m.get("vad"))), audio[:, 0], SESSION_SR)
        atomic_write_json(asr_path, asr_json(m, audio[:, 1], transcribe, user))
        lines.setdefault(m["condition"], []).append(json.dumps(metadata(m, str(scores.get("adapter")), wav, asr_path),
                                                               ensure_ascii=False))
        counts[m["condition"]] += 1
    for cond, rows in lines.items():
        atomic_write_text(out / cond / "metadata.jsonl", "".join(r + "\n" for r in rows))
    for cond in {str(m.get("condition")) for m in measured} - set(lines):  # a folder's list from an earlier export
        (out / cond / "metadata.jsonl").unlink(missing_ok=True)
    # Their evaluation applies their own rules: its summary is ours only for the authors' rule set unchanged.
    compare_with = scores_path(run_dir, applied).name if rules == AUTHORS else None
    summary = {"out": str(out), "rules": rules.name, "overrides": applied, "compare_with": compare_with,
               "episodes": dict(counts),
               "left_out": left_out, "left_out_by_status": dict(Counter(f["status"] for f in left_out)),
               "asr": lazy.described(), "scoring_asr": scores.get("asr"),
               "untranscribed": {lang: f"{n} episode(s): {C.language_problem(lazy.get(), lang)} (the segments "
                                       "scoring transcribed keep their text)" for lang, n in no_text.items()},
               "audio": f"the recording over [input_start, input_end), {SESSION_SR} Hz, ch0 user, ch1 model"}
    atomic_write_json(out / "export.json", summary)
    return summary
