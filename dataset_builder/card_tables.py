"""Card body pieces every benchmark's card shares (`cards/*.md`), one definition each: the markdown table, the
per-config summary counted from the written shards, the protocol defaults a result is produced under, and the
voices table.

`shared_context` gives the placeholders every template may use: `$summary_table`, `$protocol_table`, and one
`$p_<name>` per protocol field (its default, so prose such as "a fresh onset within $p_t_onset_window_s s" cannot
drift from the code).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from dataset_builder.benchmark_params import ProtocolParams
from dataset_builder.hf_dataset import SPLIT, ConfigStats, config_stats


def md_table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def count_table(header: tuple[str, str], counts: Mapping[str, int], order: Iterable[str] = ()) -> str:
    """Two columns, key and count, the keys in `order` first (each listed, with 0 when absent: a missing label is
    visible), then any others sorted."""
    order = list(order)
    keys = order + sorted(k for k in counts if k not in set(order))
    lines = [f"| {header[0]} | {header[1]} |", "|---|---:|"]
    lines += [f"| {k or '(none)'} | {counts.get(k, 0)} |" for k in keys]
    return "\n".join(lines)


def _seconds(xs: Sequence[float]) -> str:
    return f"{sum(xs) / len(xs):.1f} ({min(xs):.1f}–{max(xs):.1f})" if xs else "-"


def _audio_format(st: ConfigStats) -> str:
    chans = "/".join(str(c) for c in st.channels) or "-"
    rates = "/".join(f"{r / 1000:g} kHz" for r in st.sample_rates) or "-"
    return f"{chans} ch, {rates}"


SUMMARY_HEADER = ("config", "split", "rows", "hours of audio", "seconds per row: mean (min–max)", "audio",
                  "shards", "parquet MB", "Arrow MB")


def summary_row(st: ConfigStats) -> list[str]:
    return [f"`{st.config}`", SPLIT, str(st.num_examples), f"{sum(st.audio_s) / 3600:.2f}", _seconds(st.audio_s),
            _audio_format(st), str(st.shards), f"{st.download_size / 1e6:.1f}", f"{st.num_bytes / 1e6:.1f}"]


def summary_table(repo_dir: Path, configs: Iterable[str]) -> str:
    """One row per config, counted from its shards (the same counts as the YAML's `dataset_info`)."""
    return md_table(SUMMARY_HEADER, [summary_row(config_stats(Path(repo_dir), c)) for c in configs])


def protocol_table(protocol: ProtocolParams) -> str:
    """Every runtime parameter with its default (each is stored with every result and overridable with --param)."""
    return md_table(("parameter", "default"), [[f"`{k}`", f"`{v}`"] for k, v in protocol.to_dict().items()])


def voices_table(header: tuple[str, str, str], uses: Mapping[str, Counter[str]]) -> str:
    """voice | how many distinct owners (speakers, conversations) | how many uses (turns, rows)."""
    return md_table(header, [[f"`{v}`", len(owners), sum(owners.values())] for v, owners in sorted(uses.items())])


def protocol_placeholders(protocol: ProtocolParams) -> dict[str, str]:
    """`$p_<name>` for every protocol field: its default as prose writes it (5.0 s as "5")."""
    return {f"p_{k}": f"{v:g}" if isinstance(v, float) else str(v) for k, v in protocol.to_dict().items()}


def shared_context(repo_dir: Path, configs: Iterable[str], protocol: ProtocolParams) -> dict[str, str]:
    ctx = {"summary_table": summary_table(repo_dir, configs), "protocol_table": protocol_table(protocol)}
    ctx.update(protocol_placeholders(protocol))
    # the benchmark's VAD settings (protocol.vad_settings: its --param fields and the fixed rest), as $vad_NAME
    ctx.update({f"vad_{k}": v if isinstance(v, str) else f"{v:g}" for k, v in protocol.vad_settings().items()})
    return ctx
