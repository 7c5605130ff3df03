"""Audit a built (or scripts-only) dataset folder: text diagnostics, and ASR diagnostics when it has audio.

`duplex-eval build <bench> --diagnostics` calls `audit` after building, `--diagnostics-only` on an existing
folder. The result is printed and written to `<folder>/diagnostics.json` (no paths, no timings: two builds'
files compare with `diff`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dataset_builder.atomic import atomic_write_json
from dataset_builder.build import SCRIPTS_FILE, read_scripts
from dataset_builder.diagnostics import TextTargets, format_text_diagnostics, text_diagnostics
from dataset_builder.errors import UsageError
from dataset_builder.hf_dataset import has_config
from dataset_builder.schema import Script
from metrics.asr import ASR
from metrics.intelligibility import SAME_TEXTS, AudioTargets, audio_diagnostics, format_audio_diagnostics

DIAGNOSTICS_FILE = "diagnostics.json"


def folder_scripts(folder: Path, config: str) -> tuple[list[Script], str]:
    """The folder's scripts and where they came from: the dataset's rows if it has them, else scripts.jsonl."""
    from dataset_builder.hf_dataset import list_cases

    folder = Path(folder)
    if has_config(folder, config):
        return [case.script for case in list_cases(folder, config)], f"data/{config}"
    if (folder / SCRIPTS_FILE).is_file():
        return read_scripts(folder / SCRIPTS_FILE), SCRIPTS_FILE
    raise UsageError(f"{folder} has neither data/{config}/*.parquet nor {SCRIPTS_FILE}: build it first "
                     "(`duplex-eval build <bench> --out DIR`, or with --scripts-only)")


def audit(folder: Path, configs: Sequence[str], *, audio: bool = True, limit: int | None = None,
          same_texts: int | None = None, asr: ASR | None = None, progress: bool = False,
          text_targets: TextTargets | None = None, audio_targets: AudioTargets | None = None) -> dict[str, Any]:
    """Text diagnostics of each config's scripts, plus audio diagnostics where asked and the folder has audio;
    written to `folder/diagnostics.json` and returned."""
    if limit is not None and limit < 1:
        raise UsageError(f"--diagnostics-limit must be >= 1, got {limit}")
    folder = Path(folder)
    text_targets, audio_targets = text_targets or TextTargets(), audio_targets or AudioTargets()
    out: dict[str, Any] = {"configs": {}}
    for config in configs:
        scripts, source = folder_scripts(folder, config)
        block: dict[str, Any] = {"source": source, "text": text_diagnostics(scripts, text_targets), "audio": None}
        if audio and has_config(folder, config):
            if asr is None:
                from metrics.asr import DEFAULT_ASR, get_asr

                asr = get_asr(DEFAULT_ASR)
            block["audio"] = audio_diagnostics(folder, config, asr=asr, limit=limit, progress=progress,
                                               same_texts=SAME_TEXTS if same_texts is None else same_texts,
                                               targets=audio_targets)
        elif audio:
            block["audio_note"] = f"no audio in {folder} ({source} only): ASR diagnostics skipped"
        out["configs"][config] = block
    out["ok"] = all(b["text"]["ok"] and (b["audio"] is None or b["audio"]["ok"]) for b in out["configs"].values())
    atomic_write_json(folder / DIAGNOSTICS_FILE, out)
    return out


def format_audit(result: dict[str, Any]) -> str:
    parts = []
    for config, block in result["configs"].items():
        parts.append(f"== diagnostics of config {config!r} (from {block['source']})")
        parts.append(format_text_diagnostics(block["text"]))
        if block["audio"] is not None:
            parts.append(format_audio_diagnostics(block["audio"]))
        elif block.get("audio_note"):
            parts.append(block["audio_note"])
    return "\n".join(parts)
