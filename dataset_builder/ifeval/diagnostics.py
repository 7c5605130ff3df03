"""`duplex-eval build ifeval --diagnostics`: the persona-leakage table per role (App. B.6, Table 11: Jaccard,
persona words, shared content words, imperatives), the folder's case counts per action and level, and the data
targets, each printed PASS/FAIL like the other benchmarks' diagnostics:

- every case carries a one-line rationale, and how many cases each label rule fixes;
- no case hears safety-relevant audio while it expects silence, a listening sound, talking on, or a benign (L4a)
  directive (`grid.safety_problems` states the rule);
- user audio per case (turn 1 + turn 2, pauses included), per level, within 25 % of the paper's 27.2 s
  (App. C.3). Measured on the clips of an audio build; estimated from the text of a `--scripts-only` build with
  a speech rate fitted on piper's `en_US-joe-medium` (`estimate_speech_s`);
- pauses vary: every kind of silence (mid-turn pause, chunk gap, the pause after a check) takes several lengths
  (at least three, standard deviation at least 0.1 s), none below its floor (`grid.PAUSE_FLOOR_S`);
- no LISTEN case's mid-turn pause outlasts the hold-off its role's rule bounds (a cell's `max_pause_s`: R5 holds
  off "at least six seconds", so a longer pause would fail a model that obeys).
- the reading audit's phrase rules (`gates.py`) on what the cases hear: no INTERRUPT case whose trigger phrase runs on
  past its flag (its window would open late), no NO_BACKCHANNEL case whose check asks whether the listener is there.

Printed and written to `<folder>/diagnostics.json` (no paths, no timings: two builds' files compare with `diff`).
"""

from __future__ import annotations

import json
import statistics
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dataset_builder.atomic import atomic_write_json
from dataset_builder.diagnostics import _check, format_checks
from dataset_builder.errors import UsageError
from dataset_builder.hf_dataset import config_shards, has_config, rows_without_audio
from dataset_builder.ifeval.gates import (
    check_phrase_problems,
    format_diagnostics,
    role_diagnostics,
    trigger_problems,
)
from dataset_builder.ifeval.grid import PAUSE_FLOOR_S
from dataset_builder.ifeval.schema import ACTIONS, BENCHMARK, LABEL_RULES, LEVELS, SAFETY_ACTIONS
from dataset_builder.ifeval.texts import load_texts

DIAGNOSTICS_FILE = "diagnostics.json"
MANIFEST_FILE = "manifest.jsonl"
SCRIPTS_FILE = "scripts.jsonl"

PAPER_MEAN_AUDIO_S = 27.2  # App. C.3: mean assembled conversation (turn 1 + turn 2)
AUDIO_TOLERANCE = 0.25  # the target: within 25 % of the paper, at every level
# A speech segment's length from its text: 0.17 s + one second per 19.7 characters, the least-squares fit over the
# 176 speech clips of the mini build with piper en_US-joe-medium (mean absolute error 0.22 s per clip, r = 0.98).
SPEECH_BASE_S, SPEECH_CHARS_PER_S = 0.17, 19.7
# "Varied, not one fixed value per probe": per kind of silence, at least three distinct lengths and a standard
# deviation of at least 0.1 s (one fixed length gives 0), on the mini set as on the full one.
MIN_PAUSE_LENGTHS = 3
MIN_PAUSE_SD_S = 0.1
CASE_COLUMNS = ["case_id", "level", "expected_action", "base_action", "label_rule", "rationale",
                "safety_relevant_audio", "turns"]


def estimate_speech_s(text: str) -> float:
    """The length piper takes to say one speech segment, estimated from its characters (see the fit above)."""
    return SPEECH_BASE_S + len(text) / SPEECH_CHARS_PER_S


def _segments_of(turns: Sequence[dict[str, Any]], measured: bool) -> list[tuple[str, str, float]]:
    """(kind, mark, seconds) of every segment of turn 1 then turn 2, with each silence's mark "check_pause" when it
    follows an attention check."""
    out: list[tuple[str, str, float]] = []
    for turn in turns:
        prev = ""
        for seg in turn["segments"]:
            if measured:
                secs = float(seg["end_s"]) - float(seg["start_s"])
            else:
                secs = float(seg["duration_s"]) if seg["kind"] == "silence" else estimate_speech_s(seg["text"])
            mark = "check_pause" if seg["kind"] == "silence" and prev == "check" else seg["mark"]
            out.append((seg["kind"], mark, secs))
            prev = seg["mark"]
    return out


def _phrases_of(turns: Sequence[dict[str, Any]]) -> dict[str, str]:
    """Turn 2's trigger and check phrases ("" where it has none), which the phrase gates read."""
    segs = turns[-1]["segments"]
    return {m: next((str(s["text"]) for s in segs if s["mark"] == m), "") for m in ("trigger", "check")}


def folder_cases(folder: Path) -> tuple[list[dict[str, Any]], str, bool]:
    """Every case of the folder with its script's segments: from the parquet (measured), else from scripts.jsonl
    (estimated). Returns (cases, source, measured)."""
    if has_config(folder, BENCHMARK):
        rows = [r for s in config_shards(folder, BENCHMARK) for r in rows_without_audio(s, CASE_COLUMNS)]
        return [{**r, "phrases": _phrases_of(r["turns"]), "segments": _segments_of(r.pop("turns"), True)}
                for r in rows], f"data/{BENCHMARK}", True
    if (folder / SCRIPTS_FILE).is_file():
        cases = []
        for n, line in enumerate((folder / SCRIPTS_FILE).read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            try:
                script = json.loads(line)
                segments = _segments_of(script["turns"], False)
                phrases = _phrases_of(script["turns"])
                cases += [{**{k: c[k] for k in CASE_COLUMNS if k != "turns"}, "segments": segments,
                           "phrases": phrases} for c in script["cases"]]
            except (json.JSONDecodeError, KeyError) as err:
                raise UsageError(f"{folder / SCRIPTS_FILE}: line {n} is not a script with cases ({err})") from None
        return cases, SCRIPTS_FILE, False
    raise UsageError(f"{folder} has neither data/{BENCHMARK}/*.parquet nor {SCRIPTS_FILE}: build it first "
                     "(`duplex-eval build ifeval --out DIR`, or with --scripts-only)")


def data_checks(cases: Sequence[dict[str, Any]], measured: bool) -> dict[str, Any]:
    """The numbers behind the data targets, and the PASS/FAIL checks."""
    rules = {rule: Counter(c["level"] for c in cases if c["label_rule"] == rule) for rule in LABEL_RULES}
    no_rationale = [c["case_id"] for c in cases
                    if not str(c.get("rationale") or "").strip() or "\n" in str(c["rationale"])]
    unsafe = [c["case_id"] for c in cases if c["safety_relevant_audio"]
              and (c["level"] == "L4a" or c["expected_action"] not in SAFETY_ACTIONS)]
    audio = {lv: [sum(s for _, _, s in c["segments"]) for c in cases if c["level"] == lv] for lv in LEVELS}
    per_level = {lv: round(statistics.mean(v), 2) for lv, v in audio.items() if v}
    silences: dict[str, list[float]] = {}
    for c in {c["case_id"].rsplit("-", 1)[0] + str(c["safety_relevant_audio"]): c for c in cases}.values():
        for kind, mark, secs in c["segments"]:
            if kind == "silence":
                silences.setdefault(mark, []).append(round(secs, 2))
    spread = {mark: {"n": len(v), "distinct": len(set(v)), "min": min(v), "max": max(v),
                     "mean": round(statistics.mean(v), 2), "sd": round(statistics.pstdev(v), 2)}
              for mark, v in sorted(silences.items())}
    table = load_texts().table
    over_bound = []
    for c in cases:
        role, probe = c["case_id"].split("-")[:2]
        cap = table[(role, probe)].max_pause_s if (role, probe) in table else None
        if cap is not None and c["expected_action"] == "LISTEN" and any(
                kind == "silence" and mark == "pause" and secs > cap + 0.001 for kind, mark, secs in c["segments"]):
            over_bound.append(c["case_id"])
    # The reading audit's phrase rules (gates.py), counted on what the cases hear.
    late = [c["case_id"] for c in cases
            if c["expected_action"] == "INTERRUPT" and trigger_problems(c["phrases"]["trigger"])]
    presence = [c["case_id"] for c in cases
                if c["expected_action"] == "NO_BACKCHANNEL" and check_phrase_problems(c["phrases"]["check"])]
    lo, hi = PAPER_MEAN_AUDIO_S * (1 - AUDIO_TOLERANCE), PAPER_MEAN_AUDIO_S * (1 + AUDIO_TOLERANCE)
    how = "measured" if measured else "estimated from text"
    checks = [
        _check("cases without a one-line rationale", len(no_rationale), "<=", 0),
        _check("cases hearing safety-relevant audio under a non-safety label", len(unsafe), "<=", 0),
        _check("LISTEN cases whose pause outlasts the role's bounded hold-off", len(over_bound), "<=", 0),
        _check("INTERRUPT cases whose trigger runs on past its flag", len(late), "<=", 0),
        _check("NO_BACKCHANNEL cases whose check asks whether the listener is there", len(presence), "<=", 0),
        *(_check(f"{lv} mean user audio per case, s ({how}; paper {PAPER_MEAN_AUDIO_S:g})", per_level[lv], ">=", lo)
          for lv in LEVELS if lv in per_level),
        *(_check(f"{lv} mean user audio per case, s, at most", per_level[lv], "<=", hi)
          for lv in LEVELS if lv in per_level),
        # A set with fewer pauses of a kind than MIN_PAUSE_LENGTHS (the mini set's two dictations) can only have
        # them all different.
        *(_check(f"distinct {mark} lengths (of {s['n']})", s["distinct"], ">=", min(MIN_PAUSE_LENGTHS, s["n"]))
          for mark, s in spread.items()),
        *(_check(f"{mark} length sd, s", s["sd"], ">=", MIN_PAUSE_SD_S) for mark, s in spread.items()),
        *(_check(f"shortest {mark}, s (floor)", s["min"], ">=", PAUSE_FLOOR_S[mark] - 0.01)
          for mark, s in spread.items()),
    ]
    return {"label_rules": {r: dict(sorted(v.items())) for r, v in rules.items()},
            "without_rationale": no_rationale, "safety_under_non_safety_labels": unsafe,
            "pause_over_hold_off_bound": over_bound,
            "trigger_after_flag": late, "presence_check_under_no_backchannel": presence,
            "audio_s_per_level": per_level, "audio_measured": measured, "pauses": spread, "checks": checks,
            "ok": all(c["ok"] for c in checks)}


def audit(folder: Path | str) -> str:
    """The diagnostics as printable text; also written to `folder/diagnostics.json`."""
    folder = Path(folder)
    bank = load_texts()
    roles = [role_diagnostics(r, t.persona, t.directive) for r, t in bank.roles.items()]
    cases, source, measured = folder_cases(folder)
    scored = {lv: Counter(c["expected_action"] for c in cases if c["level"] == lv) for lv in LEVELS}
    base = Counter(c["base_action"] for c in cases)
    data = data_checks(cases, measured)
    result = {
        "roles": [{"role": d.role, "jaccard": d.jaccard, "persona_words": d.persona_words, "shared": d.shared,
                   "imperatives": d.imperatives, "ok": not d.problems} for d in roles],
        "source": source,
        "cases": len(cases),
        "scored_by_level": {lv: dict(sorted(scored[lv].items())) for lv in LEVELS},
        "base_actions": dict(sorted(base.items())),
        "data": data,
        "ok": all(not d.problems for d in roles) and data["ok"],
    }
    atomic_write_json(folder / DIAGNOSTICS_FILE, result)
    head = f"{'action':<15}" + "".join(f"{lv:>6}" for lv in LEVELS) + f"{'base':>6}"
    lines = ["== persona leakage (App. B.6) per role", format_diagnostics(roles),
             f"== cases per scored action and level (from {source}; {len(cases)} cases)", head]
    lines += [f"{a:<15}" + "".join(f"{scored[lv][a]:>6}" for lv in LEVELS) + f"{base[a]:>6}" for a in ACTIONS]
    lines.append("== cases per label rule and level")
    lines.append(f"{'rule':<15}" + "".join(f"{lv:>6}" for lv in LEVELS) + f"{'total':>7}")
    for rule, by in data["label_rules"].items():
        lines.append(f"{rule:<15}" + "".join(f"{by.get(lv, 0):>6}" for lv in LEVELS) + f"{sum(by.values()):>7}")
    lines.append("== user audio per case (turn 1 + turn 2), mean s: "
                 + ", ".join(f"{lv} {s:.1f}" for lv, s in data["audio_s_per_level"].items())
                 + f" ({'measured' if measured else 'estimated from text'})")
    lines.append("== silences (one per distinct script): kind n distinct min mean max sd")
    for mark, s in data["pauses"].items():
        lines.append(f"  {mark:<12} {s['n']:>5} {s['distinct']:>4} {s['min']:>6.2f} {s['mean']:>6.2f} "
                     f"{s['max']:>6.2f} {s['sd']:>5.2f}")
    lines.append("targets:")
    lines.extend(format_checks(data["checks"]))
    lines.append(f"diagnostics written to {folder / DIAGNOSTICS_FILE}")
    return "\n".join(lines)
