"""Text diagnostics of generated scripts: how varied the words are, and whether each scene attribute shows in them.

Measurements first, targets afterwards (`TextTargets`): `text_diagnostics(scripts)` returns plain numbers and a
list of PASS/FAIL checks, `format_text_diagnostics` the lines a person reads. Definitions, all on the turn texts
exactly as written:

- Scopes. "all" counts every script given. "one per pair" keeps one script of each `pair_id` (the explicit one,
  else the first seen): the two scripts of a pair repeat each other's side talk by design, which is not the
  generator repeating itself.
- Distinct ratio of a list of turn texts: distinct texts / texts (1.0: no text twice).
- Sentences: a turn split after `.`, `!` or `?` followed by a space. A sentence's count is the number of
  conversations (scripts, all scope) containing it at least once; its share is that count / conversations.
- Words: lowercased runs of letters and digits, with an apostrophe inside (`don't`) kept in the word.
  distinct-n: distinct word n-grams / n-grams, n-grams taken inside each turn (one per pair scope).
- Attribute check, for each of `schema.SCENE_ATTRIBUTES` over the one-per-pair scripts: the words of each
  conversation are pooled by the conversation's value of the attribute. `jsd_bits` is the generalised
  Jensen-Shannon divergence between the values' word distributions, weighted by their word counts: H(mix) minus
  the weighted mean of H(value), in bits, which is the mutual information between a word and the value (0: every
  value uses words in the same proportions; log2(#values): no word shared). Finite samples differ by chance, so
  the same statistic is computed with the values shuffled across conversations (`permutations` times, fixed
  seed): `chance_bits` is its mean and `p_value` = (1 + shuffles at or above the observed) / (1 + shuffles).
  The attribute changes the words when `p_value <= alpha`: a verdict that the words differ at all, not how much
  (`jsd_bits - chance_bits` says how much). `exclusive` names, per value, the most frequent words used only
  under that value (at least `min_exclusive_count` times), so a person sees what differs.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from dataset_builder.schema import MPE_LABELS, SCENE_ATTRIBUTES, Script

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_WORD = re.compile(r"[a-z0-9]+(?:'[a-z0-9]+)*")


@dataclass(frozen=True)
class TextTargets:
    """What the text should reach (docs/benchmarks/mpe.md, "Auditing a build"); thresholds only, applied after
    measuring."""

    min_distinct_turns: float = 0.70  # distinct turn texts, one script per pair
    max_sentence_share: float = 0.01  # no sentence in more than this share of conversations
    min_label_distinct: float = 0.30  # every label's distinct turn texts, one script per pair
    alpha: float = 0.01  # attribute check: p-value at or below which an attribute changes the words
    permutations: int = 199  # shuffles for the attribute check's chance level (199: smallest p = 0.005)
    min_exclusive_count: int = 3  # a word named as exclusive to a value occurs at least this often
    top_sentences: int = 10  # how many of the most repeated sentences to list
    seed: int = 0  # of the shuffles


def split_sentences(text: str) -> list[str]:
    """Sentences of a turn, split after `.`, `!` or `?` followed by whitespace; inner whitespace collapsed."""
    return [" ".join(s.split()) for s in _SENTENCE_END.split(text.strip()) if s.strip()]


def words(text: str) -> list[str]:
    """Lowercased words: runs of letters and digits, an inner apostrophe kept (`don't`, `it's`)."""
    return _WORD.findall(text.lower().replace("\u2019", "'"))


def distinct_ratio(items: Sequence[Any]) -> float | None:
    """Distinct items / items; None for no items."""
    return len(set(items)) / len(items) if items else None


def distinct_n(token_lists: Iterable[Sequence[str]], n: int) -> float | None:
    """Distinct n-grams / n-grams, n-grams taken inside each token list; None when there is no n-gram."""
    grams: list[tuple[str, ...]] = []
    for tokens in token_lists:
        grams.extend(tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1))
    return distinct_ratio(grams)


def one_per_pair(scripts: Sequence[Script]) -> list[Script]:
    """One script of each pair, in first-seen order: the explicit one when the pair has it, else the first."""
    chosen: dict[str, Script] = {}
    for s in scripts:
        if s.pair_id not in chosen or (s.condition == "explicit" and chosen[s.pair_id].condition != "explicit"):
            chosen[s.pair_id] = s
    return list(chosen.values())


def _ratio_block(texts: Sequence[str]) -> dict[str, Any]:
    ratio = distinct_ratio(texts)
    return {"turns": len(texts), "distinct": len(set(texts)), "ratio": None if ratio is None else round(ratio, 4)}


def sentence_counts(scripts: Sequence[Script]) -> Counter[str]:
    """Each sentence -> the number of scripts (conversations) that contain it at least once."""
    counts: Counter[str] = Counter()
    for s in scripts:
        counts.update({sentence for t in s.turns for sentence in split_sentences(t.text)})
    return counts


def _entropy_bits(counts: np.ndarray) -> np.ndarray:
    """Entropy in bits of each row of a count matrix (0 for an empty row)."""
    totals = counts.sum(axis=-1, keepdims=True)
    p = np.divide(counts, totals, out=np.zeros_like(counts), where=totals > 0)
    logs = np.log2(p, out=np.zeros_like(p), where=p > 0)
    return -(p * logs).sum(axis=-1)


def jsd_bits(counts: np.ndarray) -> float:
    """Generalised Jensen-Shannon divergence (bits) between the rows of a (values x words) count matrix, each row
    weighted by its total: H(pooled) - sum_v w_v H(row_v) = I(word; value)."""
    counts = np.asarray(counts, dtype=np.float64)
    row_totals = counts.sum(axis=1)
    total = row_totals.sum()
    if total == 0:
        return 0.0
    pooled = float(_entropy_bits(counts.sum(axis=0)))
    within = float((row_totals / total) @ _entropy_bits(counts))
    return max(0.0, pooled - within)


def attribute_check(units: Sequence[Script], attribute: str, targets: TextTargets = TextTargets()
                    ) -> dict[str, Any]:
    """Whether the words of conversations differ between the values of `attribute` (see the module doc)."""
    values = sorted({s.attributes[attribute] for s in units})
    unit_words = [Counter(w for t in s.turns for w in words(t.text)) for s in units]
    vocab = sorted(set().union(*unit_words)) if unit_words else []
    index = {w: j for j, w in enumerate(vocab)}
    rows, cols, weights = [], [], []
    for i, c in enumerate(unit_words):
        for w, k in c.items():
            rows.append(i)
            cols.append(index[w])
            weights.append(k)
    rows_a, cols_a, weights_a = np.array(rows, int), np.array(cols, int), np.array(weights, float)
    labels = np.array([values.index(s.attributes[attribute]) for s in units], int)
    k, v = len(values), len(vocab)

    def grouped(lab: np.ndarray) -> np.ndarray:
        flat = np.bincount(lab[rows_a] * v + cols_a, weights=weights_a, minlength=k * v)
        return flat.reshape(k, v)

    per_value = grouped(labels) if k and v else np.zeros((k, v))
    observed = jsd_bits(per_value)
    out: dict[str, Any] = {
        "values": {val: {"conversations": int((labels == i).sum()), "words": int(per_value[i].sum())}
                   for i, val in enumerate(values)},
        "jsd_bits": round(observed, 6),
    }
    if k < 2:
        return {**out, "chance_bits": None, "p_value": None, "changes_words": None, "exclusive": {},
                "note": "one value only: nothing to compare"}
    rng = np.random.default_rng(targets.seed)
    shuffled = [jsd_bits(grouped(rng.permutation(labels))) for _ in range(targets.permutations)]
    at_least = sum(x >= observed - 1e-12 for x in shuffled)
    p_value = (1 + at_least) / (1 + targets.permutations)
    present = per_value > 0
    only_here = present.sum(axis=0) == 1
    exclusive = {}
    for i, val in enumerate(values):
        mask = only_here & (per_value[i] >= targets.min_exclusive_count)
        top = sorted(np.flatnonzero(mask), key=lambda j: (-per_value[i, j], vocab[j]))[:5]
        exclusive[val] = [vocab[j] for j in top]
    return {**out, "chance_bits": round(float(np.mean(shuffled)), 6), "p_value": round(p_value, 4),
            "changes_words": bool(p_value <= targets.alpha), "exclusive": exclusive}


def _check(name: str, value: float | None, op: str, target: float) -> dict[str, Any]:
    ok = value is not None and (value >= target if op == ">=" else value <= target)
    return {"name": name, "value": value, "target": f"{op} {target:g}", "ok": bool(ok)}


def text_diagnostics(scripts: Sequence[Script], targets: TextTargets = TextTargets()) -> dict[str, Any]:
    """Distinct texts, repeated sentences, distinct-n, word types and the attribute check, with target checks."""
    units = one_per_pair(scripts)
    all_texts = [t.text for s in scripts for t in s.turns]
    unit_texts = [t.text for s in units for t in s.turns]
    labels = [lab for lab in MPE_LABELS if any(t.label == lab for s in scripts for t in s.turns)]
    labels += sorted({t.label for s in scripts for t in s.turns} - set(labels))
    by_label = {
        lab: {"all": _ratio_block([t.text for s in scripts for t in s.turns if t.label == lab]),
              "one_per_pair": _ratio_block([t.text for s in units for t in s.turns if t.label == lab])}
        for lab in labels
    }
    sentences = sentence_counts(scripts)
    n_conv = len(scripts)
    top = [{"sentence": sent, "conversations": c, "share": round(c / n_conv, 4)}
           for sent, c in sorted(sentences.items(), key=lambda x: (-x[1], x[0]))[:targets.top_sentences]]
    tokens = [words(t) for t in unit_texts]
    dn = {str(n): (None if (r := distinct_n(tokens, n)) is None else round(r, 4)) for n in (1, 2, 3)}
    attributes = {a: attribute_check(units, a, targets) for a in SCENE_ATTRIBUTES
                  if units and all(a in s.attributes for s in units)}
    top_share = top[0]["share"] if top else None
    checks = [
        _check("distinct turn texts (one script per pair)", _ratio_block(unit_texts)["ratio"], ">=",
               targets.min_distinct_turns),
        _check("most repeated sentence, share of conversations", top_share, "<=", targets.max_sentence_share),
        *(_check(f"distinct {lab} turn texts (one script per pair)", block["one_per_pair"]["ratio"], ">=",
                 targets.min_label_distinct) for lab, block in by_label.items()),
        *({"name": f"{a} changes the words", "value": res["p_value"], "target": f"p <= {targets.alpha:g}",
           "ok": bool(res["changes_words"])} for a, res in attributes.items()),
    ]
    return {
        "conversations": n_conv,
        "pairs": len(units),
        "distinct_turns": {"all": _ratio_block(all_texts), "one_per_pair": _ratio_block(unit_texts)},
        "by_label": by_label,
        "sentences": {"distinct": len(sentences), "top": top},
        "distinct_n": dn,
        "word_types": len({w for ts in tokens for w in ts}),
        "attributes": attributes,
        "targets": asdict(targets),
        "checks": checks,
        "ok": all(c["ok"] for c in checks),
    }


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f} %"


def format_checks(checks: Sequence[dict[str, Any]]) -> list[str]:
    lines = []
    for c in checks:
        value = c["value"]
        shown = "n/a" if value is None else (f"{value:.4g}" if isinstance(value, float) else str(value))
        lines.append(f"  {'PASS' if c['ok'] else 'FAIL'}  {c['name']}: {shown} (target {c['target']})")
    return lines


def format_text_diagnostics(d: dict[str, Any]) -> str:
    """The lines a person reads; the same numbers as the dict."""
    dt = d["distinct_turns"]
    lines = [
        f"text: {d['conversations']} conversations, {d['pairs']} pairs",
        f"distinct turn texts: all {dt['all']['distinct']}/{dt['all']['turns']} = {_pct(dt['all']['ratio'])}; "
        f"one script per pair {dt['one_per_pair']['distinct']}/{dt['one_per_pair']['turns']} = "
        f"{_pct(dt['one_per_pair']['ratio'])}",
        "per label (distinct/turns): all | one script per pair",
    ]
    for lab, b in d["by_label"].items():
        a, p = b["all"], b["one_per_pair"]
        lines.append(f"  {lab:<4} {a['distinct']:>6}/{a['turns']:<6} {_pct(a['ratio']):>8} | "
                     f"{p['distinct']:>6}/{p['turns']:<6} {_pct(p['ratio']):>8}")
    lines.append(f"most repeated sentences ({d['sentences']['distinct']} distinct), conversations containing each:")
    for t in d["sentences"]["top"]:
        lines.append(f"  {t['conversations']:>6}  {_pct(t['share']):>8}  {t['sentence']}")
    dn = d["distinct_n"]
    lines.append(f"distinct-1/2/3 (one script per pair): {dn['1']} / {dn['2']} / {dn['3']}; "
                 f"word types {d['word_types']}")
    lines.append("attributes (JSD between values' word distributions, bits; chance = values shuffled):")
    for a, r in d["attributes"].items():
        verdict = {True: "changes the words", False: "words do not differ", None: "untestable"}[r["changes_words"]]
        chance = "n/a" if r["chance_bits"] is None else f"{r['chance_bits']:.4f}"
        lines.append(f"  {a:<15} {len(r['values'])} values  jsd {r['jsd_bits']:.4f}  chance {chance}  "
                     f"p {r['p_value']}  {verdict}")
        for val, ws in r["exclusive"].items():
            if ws:
                lines.append(f"      only under {val!r}: {', '.join(ws)}")
    lines.append("targets:")
    lines.extend(format_checks(d["checks"]))
    return "\n".join(lines)
