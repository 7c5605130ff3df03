"""`duplex-eval build ifeval --diagnostics`: the persona-leakage table per role (App. B.6, Table 11: Jaccard,
persona words, shared content words, imperatives) and the folder's case counts per action and level, printed and
written to `<folder>/diagnostics.json` (no paths, no timings: two builds' files compare with `diff`)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from dataset_builder.atomic import atomic_write_json
from dataset_builder.errors import UsageError
from dataset_builder.ifeval.gates import format_diagnostics, role_diagnostics
from dataset_builder.ifeval.schema import ACTIONS, BENCHMARK, LEVELS
from dataset_builder.ifeval.texts import load_texts

DIAGNOSTICS_FILE = "diagnostics.json"
MANIFEST_FILE = "manifest.jsonl"


def folder_cases(folder: Path) -> tuple[list[dict[str, Any]], str]:
    """(level, expected_action, base_action) of every case in the folder: from its parquet, else its manifest."""
    shards = sorted((folder / "data" / BENCHMARK).glob("*.parquet"))
    cols = ["level", "expected_action", "base_action"]
    if shards:
        return [r for s in shards for r in pq.read_table(s, columns=cols).to_pylist()], f"data/{BENCHMARK}"
    if (folder / MANIFEST_FILE).is_file():
        lines = (folder / MANIFEST_FILE).read_text(encoding="utf-8").splitlines()
        return [{k: json.loads(line)[k] for k in cols} for line in lines if line.strip()], MANIFEST_FILE
    raise UsageError(f"{folder} has neither data/{BENCHMARK}/*.parquet nor {MANIFEST_FILE}: build it first "
                     "(`duplex-eval build ifeval --out DIR`, or with --scripts-only)")


def audit(folder: Path | str) -> str:
    """The diagnostics as printable text; also written to `folder/diagnostics.json`."""
    folder = Path(folder)
    bank = load_texts()
    roles = [role_diagnostics(r, t.persona, t.directive) for r, t in bank.roles.items()]
    cases, source = folder_cases(folder)
    scored = {lv: Counter(c["expected_action"] for c in cases if c["level"] == lv) for lv in LEVELS}
    base = Counter(c["base_action"] for c in cases)
    result = {
        "roles": [{"role": d.role, "jaccard": d.jaccard, "persona_words": d.persona_words, "shared": d.shared,
                   "imperatives": d.imperatives, "ok": not d.problems} for d in roles],
        "source": source,
        "cases": len(cases),
        "scored_by_level": {lv: dict(sorted(scored[lv].items())) for lv in LEVELS},
        "base_actions": dict(sorted(base.items())),
        "ok": all(not d.problems for d in roles),
    }
    atomic_write_json(folder / DIAGNOSTICS_FILE, result)
    head = f"{'action':<15}" + "".join(f"{lv:>6}" for lv in LEVELS) + f"{'base':>6}"
    lines = ["== persona leakage (App. B.6) per role", format_diagnostics(roles),
             f"== cases per scored action and level (from {source}; {len(cases)} cases)", head]
    lines += [f"{a:<15}" + "".join(f"{scored[lv][a]:>6}" for lv in LEVELS) + f"{base[a]:>6}" for a in ACTIONS]
    lines.append(f"diagnostics written to {folder / DIAGNOSTICS_FILE}")
    return "\n".join(lines)
