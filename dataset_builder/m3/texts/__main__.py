"""`python -m dataset_builder.m3.texts check [--lang en|ja]`: every problem of the M3 text banks and of the chat
corpus (`corpus.py`), one per line (`file:line: entry: rule: text`), then their sizes; exit status 1 when there
is an error."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from dataset_builder.m3.bankio import TEXTS_DIR
from dataset_builder.m3.corpus import read_corpus
from dataset_builder.m3.textbank import bank_languages, load_bank_unchecked, missing_files, size_report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dataset_builder.m3.texts")
    parser.add_argument("command", choices=["check"])
    parser.add_argument("--lang", action="append", choices=["en", "ja"],
                        help="check only this language (repeatable); default: every language with a folder")
    parser.add_argument("--root", type=Path, default=TEXTS_DIR, help="a texts/ folder (default: the shipped one)")
    args = parser.parse_args(argv)
    langs = args.lang or bank_languages(args.root)
    bank, problems = load_bank_unchecked(langs, args.root)
    corpora = {code: read_corpus(code, args.root) for code in langs}
    for c in corpora.values():
        problems.items += c[2].items
    for p in problems.items:
        print(p)
    for code in langs:
        missing = missing_files(code, args.root)
        print(f"== {code}" + (f" (incomplete: missing {', '.join(missing)})" if missing else ""))
        print("\n".join(size_report(bank.languages[code])))
        convs, mini, _ = corpora[code]
        print(f"  chat corpus: {len(convs)} conversations, {sum(len(c.lines) for c in convs)} lines; mini: "
              f"{mini.conv_id if mini else 'missing'}")
    print(f"{len(bank.knowledge.entities)} entities, {len(bank.knowledge.relations)} relations; "
          f"{len(problems.errors)} error(s), {len(problems.warnings)} warning(s)")
    return 1 if problems.errors else 0


if __name__ == "__main__":
    sys.exit(main())
