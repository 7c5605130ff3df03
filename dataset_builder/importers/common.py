"""What every corpus importer shares: the output folder's import records, the checks of --language / --domain,
the event window cut from a dialogue's audio, and writing the config with its summary and card.

An importer reads one external layout (one module each in this package) into events and their windows; the rest,
here, is the same for every layout: rows go to `OUT/data/{config}/`, a summary per config to
`OUT/import/{config}.json`, and the card is made anew from all the summaries.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from dataset_builder.atomic import atomic_write_json
from dataset_builder.audio import SESSION_SR
from dataset_builder.errors import UsageError
from dataset_builder.m3.schema import DOMAINS, LANGUAGES

MS = SESSION_SR // 1000  # samples per millisecond: every imported time is a whole millisecond
TIME_SLACK_MS = 10  # a label or word may pass the audio's end by the annotation's resolution (10 ms)
IMPORT_DIR = "import"  # OUT/import/{config}.json: one summary per imported config; the card is made from them
CARDS = Path(__file__).resolve().parent.parent.parent / "cards"


def audio_ms(frames: int, sample_rate: int) -> int:
    """An audio file's length in whole milliseconds (rounded down)."""
    return frames * 1000 // sample_rate


def check_language_domain(language: str, domain: str) -> None:
    if language not in LANGUAGES:
        raise UsageError(f"--language {language!r}: M3 languages are {', '.join(LANGUAGES)}")
    if domain not in DOMAINS:
        raise UsageError(f"--domain {domain!r}: M3 domains are {', '.join(DOMAINS)}")


def check_out(out: Path, layout: str) -> None:
    """Refuse an --out folder that holds a built dataset, or data imported from another layout."""
    if (out / "README.md").exists() and not (out / IMPORT_DIR).is_dir():
        raise UsageError(f"{out} holds a dataset that was not imported (a build?); import into another --out")
    for p in sorted((out / IMPORT_DIR).glob("*.json")):
        found = json.loads(p.read_text(encoding="utf-8")).get("layout")
        if found != layout:
            raise UsageError(f"{out} holds data imported from another layout ({found}); import into another --out")


def window(audio: np.ndarray, tau_ms: int, w_ms: int) -> np.ndarray:
    """(n, 2) float32: `audio` (n, 2) over [τ, s + Δ), zero-padded past its end (as the builder's rows)."""
    out = np.zeros(((w_ms - tau_ms) * MS, 2), np.float32)
    part = audio[tau_ms * MS:w_ms * MS]
    out[:part.shape[0]] = part
    return out


def write_import(out: Path, config: str, rows: Iterable[dict[str, Any]], shard_rows: int,
                 summary: Callable[[], dict[str, Any]], write_card: Callable[[Path], None]) -> dict[str, Any]:
    """Write the config's rows, then its summary (made once the rows are written: it counts them) and the card
    of every config imported into `out`; returns the summary."""
    from dataset_builder.hf_dataset import write_config
    from dataset_builder.m3.rows import m3_features

    write_config(out, config, rows, m3_features(), shard_size=shard_rows)
    record = summary()
    atomic_write_json(out / IMPORT_DIR / f"{config}.json", record)
    write_card(out)
    return record


def imported_summaries(out: Path) -> list[dict[str, Any]]:
    """The summaries of the configs imported into `out` whose rows are there."""
    from dataset_builder.hf_dataset import has_config

    summaries = [json.loads(p.read_text(encoding="utf-8")) for p in sorted((out / IMPORT_DIR).glob("*.json"))]
    return [s for s in summaries if has_config(out, s["config"])]


def write_import_card(out: Path, summaries: list[dict[str, Any]], template: Path, metadata: Mapping[str, Any],
                      context: Mapping[str, Any]) -> None:
    """`out/README.md` for the imported configs: the layout's template filled with `context` and the shared
    parts (protocol, loading), the metadata with the configs' languages."""
    from dataset_builder.benchmark_params import M3Protocol
    from dataset_builder.card_tables import shared_context
    from dataset_builder.hf_dataset import write_card
    from dataset_builder.m3.rows import m3_features

    configs = [s["config"] for s in summaries]
    write_card(out, {c: {"features": m3_features()} for c in configs}, template=template,
               context={**shared_context(out, configs, M3Protocol()),
                        "configs_list": ", ".join(f"`{c}`" for c in configs), **context},
               metadata={**metadata, "language": sorted({s["language"] for s in summaries})})
