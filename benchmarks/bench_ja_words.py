"""Japanese word units: how well the word counter of M3's backchannel filter (metrics/m3/words.py, MeCab with
unidic-lite) agrees with the word units of the M3-DuplexBench authors' Japanese toy data.

    .venv/bin/python benchmarks/bench_ja_words.py PATH/TO/m3-duplexbench [--out DIR]

Reads every `data/ja/*/*/txt_align/*.txt` under the given checkout of the authors' repository (lines
`channel<TAB>start<TAB>end<TAB>word`), joins each channel's words into utterances at gaps >= 0.5 s (their aligner's
`segment_words`), writes each utterance's words together without spaces (as a Japanese ASR transcript reads) and
splits it again with each analyser: ours, and janome when it is installed (not a dependency; `pip install
janome==0.5.0` to compare). Per dataset: word-boundary precision, recall and F1 against their units, utterances
whose word count is exactly theirs, and utterances where the filter's verdict "fewer than 4 words" is the same
(all utterances, and those shorter than 1 s, the ones the filter reads). Prints a markdown table and writes it
with the counts to OUT/bench-ja-words.json. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from metrics.m3.words import words  # noqa: E402

GAP_S = 0.5  # their segment_words: a gap of at least this splits
BC_SECONDS, BC_WORDS = 1.0, 4


def utterances(path: Path) -> list[tuple[float, list[str]]]:
    """(duration, words) of each utterance of a txt_align file."""
    rows = [line.split("\t") for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    out = []
    for ch in sorted({r[0] for r in rows}):
        ws = sorted((float(a), float(b), w.strip()) for c, a, b, w in rows if c == ch)
        buf = [ws[0]]
        for w in ws[1:]:
            if w[0] - buf[-1][1] >= GAP_S:
                out.append(buf)
                buf = [w]
            else:
                buf.append(w)
        out.append(buf)
    return [(u[-1][1] - u[0][0], [w for _, _, w in u]) for u in out]


def boundaries(ws: list[str]) -> set[int]:
    ends, at = set(), 0
    for w in ws:
        at += len(w)
        ends.add(at)
    return ends


def agreement(units: list[tuple[float, list[str]]], split: Callable[[str], list[str]]) -> dict[str, Any]:
    tp = fp = fn = exact = verdict = short = short_verdict = 0
    for dur, ref in units:
        got = split("".join(ref))
        rb, gb = boundaries(ref), boundaries(got)
        tp, fp, fn = tp + len(rb & gb), fp + len(gb - rb), fn + len(rb - gb)
        exact += len(ref) == len(got)
        same = (len(ref) < BC_WORDS) == (len(got) < BC_WORDS)
        verdict += same
        if dur < BC_SECONDS:
            short += 1
            short_verdict += same
    p, r = tp / (tp + fp), tp / (tp + fn)
    return {"utterances": len(units), "their_words": sum(len(u) for _, u in units), "precision": round(p, 3),
            "recall": round(r, 3), "f1": round(2 * p * r / (p + r), 3), "exact_count": exact,
            "lt4_same": verdict, "short": short, "short_lt4_same": short_verdict}


def analysers() -> dict[str, Callable[[str], list[str]] | None]:
    out: dict[str, Callable[[str], list[str]] | None] = {"fugashi + unidic-lite (ours)": lambda t: words(t, "ja")}
    try:
        from janome.tokenizer import Tokenizer
    except ImportError:
        out["janome"] = None
    else:
        jt = Tokenizer()
        out["janome"] = lambda t: [x.surface for x in jt.tokenize(t) if any(c.isalnum() for c in x.surface)]
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("repo", type=Path, help="a checkout of the authors' m3-duplexbench repository")
    ap.add_argument("--out", type=Path, default=None, help="folder for bench-ja-words.json (default: a temp folder)")
    a = ap.parse_args(argv)
    files = sorted(a.repo.glob("data/ja/*/*/txt_align/*.txt"))
    if not files:
        raise SystemExit(f"{a.repo}: no data/ja/*/*/txt_align/*.txt (give the root of their repository)")
    datasets: dict[str, list[tuple[float, list[str]]]] = {}
    for f in files:
        datasets.setdefault(f.parent.parent.name, []).extend(utterances(f))
    rows = []
    print("| dataset | analyser | utterances | boundary P | R | F1 | word count exact | < 4 words same | "
          "same, utterances < 1 s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, units in datasets.items():
        for label, split in analysers().items():
            if split is None:
                print(f"| {name} | {label} | not installed | | | | | | |")
                continue
            r = agreement(units, split) | {"dataset": name, "analyser": label}
            rows.append(r)
            print(f"| {name} | {label} | {r['utterances']} | {r['precision']:.3f} | {r['recall']:.3f} | "
                  f"{r['f1']:.3f} | {r['exact_count']}/{r['utterances']} | {r['lt4_same']}/{r['utterances']} | "
                  f"{r['short_lt4_same']}/{r['short']} |")
    out = a.out or Path(tempfile.mkdtemp(prefix="bench-ja-words-"))
    out.mkdir(parents=True, exist_ok=True)
    (out / "bench-ja-words.json").write_text(json.dumps({"files": [str(f) for f in files], "rows": rows},
                                                        ensure_ascii=False, indent=1))
    print(f"\n(written to {out / 'bench-ja-words.json'})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
