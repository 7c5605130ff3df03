"""`duplex-eval build m3 --diagnostics`: per config the text's diversity (`diversity.py`: distinct TURN lines, the
most repeated sentences with their counts, the 1 % rule), the events per type and the cases per condition, and,
on a folder with audio, how well an ASR understands each voice — printed and written to
`<folder>/diagnostics.json` (no paths, no timings: two builds' files compare with `diff`).

The ASR part is injected (`intelligibility`): dataset_builder may not import metrics, so the CLI's entry point is
`metrics/m3/diagnostics.py:audit`, which passes its per-voice measurement in.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from dataset_builder.atomic import atomic_write_json
from dataset_builder.build import SCRIPTS_FILE
from dataset_builder.errors import UsageError
from dataset_builder.hf_dataset import has_config
from dataset_builder.m3.build import condition_counts, read_scripts
from dataset_builder.m3.chat_audit import format_audit_block, text_audit
from dataset_builder.m3.diversity import DiversityTargets, format_text_diversity, text_diversity
from dataset_builder.m3.rows import event_type_counts
from dataset_builder.m3.schema import CONFIGS, EVENT_TYPES
from dataset_builder.m3.task_audit import format_task_audit, task_audit
from dataset_builder.m3.textbank import load_bank

DIAGNOSTICS_FILE = "diagnostics.json"
# (folder, config) -> {"measured": bool, "note": str, "voices": {voice: {...}}, ...}
Intelligibility = Callable[[Path, str], dict[str, Any]]


def audit_result(folder: Path | str, intelligibility: Intelligibility | None = None,
                 targets: DiversityTargets | None = None) -> dict[str, Any]:
    """The diagnostics of a folder built by `build m3` (its `scripts.jsonl`, and its rows where it has them);
    written to `folder/diagnostics.json` and returned."""
    folder, targets = Path(folder), targets or DiversityTargets()
    if not (folder / SCRIPTS_FILE).is_file():
        raise UsageError(f"{folder} has no {SCRIPTS_FILE}: build it first (`duplex-eval build m3 --out DIR`, or "
                         "with --scripts-only)")
    scripts = read_scripts(folder / SCRIPTS_FILE)
    diversity = text_diversity([d for _, _, d in scripts], targets)
    checks = text_audit([d for _, _, d in scripts])  # how the text reads: chat_audit.py, PASS/FAIL per target
    configs: dict[str, Any] = {}
    for config in [c for c in CONFIGS if c in diversity]:
        block: dict[str, Any] = {"text": diversity[config], "text_checks": checks[config]}
        if has_config(folder, config):
            types = event_type_counts(folder, config)
            events = {t: types[t] for t in EVENT_TYPES}
            block["events"] = {"source": f"data/{config}", "per_type": events, "cases": condition_counts(events),
                               "missing": [t for t in EVENT_TYPES if not events[t]]}
            block["audio"] = intelligibility(folder, config) if intelligibility else {
                "measured": False, "note": "no ASR given"}
        else:
            block["events"] = {"source": SCRIPTS_FILE, "note": "no rows (scripts only): events are known once "
                                                                 "the dialogues are placed"}
            block["audio"] = {"measured": False, "note": "no audio (scripts only)"}
        lang, domain = CONFIGS[config]
        if domain == "task":  # the task QA targets (task_audit.py); the knowledge names each person's pronoun
            knowledge = load_bank((lang,)).knowledge
            block["task"] = task_audit([d for c, _, d in scripts if c == config], folder, config, lang,
                                       knowledge=knowledge)
        configs[config] = block
    result = {"configs": configs, "targets": {"max_sentence_share": targets.max_sentence_share},
              "ok": all(b["text"]["ok"] or b["text"]["dialogues"] * targets.max_sentence_share < 1
                        for b in configs.values())
              and all(not b["events"].get("missing") for b in configs.values())
              and all(b["text_checks"]["ok"] for b in configs.values())
              and all(b["task"]["ok"] for b in configs.values() if "task" in b)}
    atomic_write_json(folder / DIAGNOSTICS_FILE, result)
    return result


def _voices_lines(audio: dict[str, Any]) -> list[str]:
    if not audio.get("measured"):
        return [f"  ASR per voice: not measured ({audio.get('note', '')})"]
    lines = [f"  ASR per voice ({audio['asr']}, {audio['metric']} of each voice's TURN utterances):"]
    for voice, v in audio["voices"].items():
        written = f"; written CER {100 * v['written_cer']:.1f} %" if "written_cer" in v else ""
        lines.append(f"    {voice:<24} {v['speaker']:<6} {v['turns']:>4} turns  {audio['metric']} "
                     f"{100 * v['rate']:.1f} % ({v['errors']}/{v['units']}){written}")
    return lines


def format_audit(result: dict[str, Any], targets: DiversityTargets | None = None) -> str:
    targets = targets or DiversityTargets()
    lines = []
    for config, block in result["configs"].items():
        lines.append(format_text_diversity({config: block["text"]}, targets))
        if block["text"]["dialogues"] * targets.max_sentence_share < 1:
            lines.append(f"  (the 1 % rule needs at least {round(1 / targets.max_sentence_share)} dialogues: with "
                         f"{block['text']['dialogues']}, any sentence is in more than 1 % of them)")
        ev = block["events"]
        if "per_type" in ev:
            lines.append(f"  events per type ({ev['source']}): "
                         + ", ".join(f"{t} {n}" for t, n in ev["per_type"].items())
                         + "; cases per condition: " + ", ".join(f"{c} {n}" for c, n in ev["cases"].items())
                         + (f"; MISSING {', '.join(ev['missing'])}" if ev["missing"] else ""))
        else:
            lines.append(f"  events: {ev['note']}")
        lines += _voices_lines(block["audio"])
        lines += format_audit_block(block["text_checks"])
        if "task" in block:
            lines += format_task_audit(block["task"])
    built = all("per_type" in b["events"] for b in result["configs"].values())
    lines.append(f"{'PASS' if result['ok'] else 'FAIL'}: 1 % rule, text checks"
                 + (" and every event type in every config" if built else " (events: only built audio has them)")
                 + ("; task QA targets" if any("task" in b for b in result["configs"].values()) else ""))
    return "\n".join(lines)


def audit(folder: Path | str, intelligibility: Intelligibility | None = None) -> str:
    """The diagnostics as printable text (also written to `folder/diagnostics.json`)."""
    result = audit_result(folder, intelligibility)
    return format_audit(result) + f"\ndiagnostics written to {Path(folder) / DIAGNOSTICS_FILE}"
