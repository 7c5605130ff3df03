"""The pages state what the code does: each benchmark's docs page lists every parameter of its protocol with the
default the code has (dataset_builder/benchmark_params.py; the cards render theirs from the class itself), the
ASR and judge each page names as a default are the code's, an option default a page states is the parser's, and
the measured times the CLI's help repeats match the page's."""

from __future__ import annotations

import inspect
import re
from dataclasses import fields
from pathlib import Path

import pytest

from dataset_builder.benchmarks import get_benchmark

DOCS = Path(__file__).resolve().parent.parent / "docs" / "benchmarks"


@pytest.mark.parametrize("bench", ["mpe", "ifeval", "m3"])
def test_every_parameter_and_its_default_is_on_the_benchmark_page(bench: str) -> None:
    protocol = get_benchmark(bench).load("protocol")
    rows = dict(re.findall(r"^\| `(\w+)` \| ([^|]+?) \|", (DOCS / f"{bench}.md").read_text(), re.M))
    defaults = protocol()
    for f in fields(protocol):
        assert f.name in rows, f"docs/benchmarks/{bench}.md has no row for {f.name}"
        assert float(rows[f.name]) == getattr(defaults, f.name), (f.name, rows[f.name], getattr(defaults, f.name))


# ------------------------------------------------------------------------------------ what the pages say of the code

ROOT = DOCS.parent.parent
# How the pages name each ASR the code can default to; a new default must be added here, and the pages checked.
ASR_WORDS = {"whisper-base-en": "whisper base", "whisper-tiny-en": "whisper tiny.en"}


def _said(page: str, pattern: str) -> list[str]:
    """What `pattern`'s group captures on `page` (docs/... or README.md), each occurrence, whitespace folded."""
    text = " ".join((ROOT / page).read_text().split())
    found = [m.group(1) for m in re.finditer(pattern, text)]
    assert found, f"{page} no longer says {pattern!r}: find where it now states it and update this test"
    return found


def _default(cls: type, name: str) -> object:
    return inspect.signature(cls).parameters[name].default


def test_the_pages_name_the_asr_and_judge_the_code_defaults_to() -> None:
    """The scorer's ASR (`score --asr`), the judge, and the tiny.en that the cascade's ears, the build's speech gate
    and the build audit keep, as each page words them (the scorer's default once read "whisper tiny.en" in
    scoring.md after it had become whisper base)."""
    from adapters.cascade import CascadeAgent
    from eval.cli import parser
    from metrics.asr import DEFAULT_ASR, SCORING_ASR
    from metrics.intelligibility import AsrSpeechGate

    score = parser().parse_args(["score", "RUN"])
    assert score.asr == SCORING_ASR
    scorer, judge = ASR_WORDS[SCORING_ASR], score.judge
    gate, ears = ASR_WORDS[_default(AsrSpeechGate, "asr")], ASR_WORDS[_default(CascadeAgent, "asr")]
    claims = [
        ("docs/scoring.md", r"`([\w.-]+)` \(default, offline", SCORING_ASR),
        ("docs/scoring.md", r"The offline defaults \((whisper [\w.]+), the", scorer),
        ("docs/scoring.md", r"The offline defaults \(whisper [\w.]+, the (\w+) judge\)", judge),
        ("docs/scoring.md", r"The scorer's ASR is (whisper [\w.]+)", scorer),
        ("docs/offline.md", r"The scorer hears the model with (whisper [\w.]+)", scorer),
        ("docs/offline.md", r"the `cascade` agent and the build's speech gate use (whisper [\w.]+)", gate),
        ("docs/offline.md", r"the `cascade` agent and the build's speech gate use (whisper [\w.]+)", ears),
        ("docs/models.md", r"\| `cascade` \| VAD end-of-turn, (whisper [\w.]+),", ears),
    ]
    wrong = [(page, pattern, said, code) for page, pattern, code in claims for said in _said(page, pattern)
             if said != code]
    assert not wrong, wrong
    assert ASR_WORDS[DEFAULT_ASR] == gate  # the audit's and the gate's ASR are the suite's default one


def test_an_option_default_a_page_states_is_the_parsers() -> None:
    """"`--diagnostics-texts N`, default 100" on a page is checked against the option's default, for every option
    a page states one of so (the subcommand found by the option's name)."""
    import argparse

    from eval.cli import parser

    defaults: dict[str, set[str]] = {}
    for action in parser()._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                for a in sub._actions:
                    for opt in a.option_strings:
                        defaults.setdefault(opt, set()).add(f"{a.default:g}" if isinstance(a.default, float)
                                                            else str(a.default))
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    said = r"`(--[a-z-]+)(?: [A-Z]+)?`, default ([\w./-]+)"
    stated = [(p.name, opt, value) for p in pages for opt, value in re.findall(said, " ".join(p.read_text().split()))]
    assert stated  # docs/benchmarks/mpe.md: --diagnostics-texts
    wrong = [(page, opt, value, sorted(defaults.get(opt, {"no such option"}))) for page, opt, value in stated
             if value not in defaults.get(opt, set())]
    assert not wrong, wrong


def test_the_diagnostics_timing_is_the_same_in_the_help_and_on_the_page() -> None:
    """`build --help` and docs/benchmarks/mpe.md state the same measured time for auditing the mini set (they once
    said ~4 min and about 2 minutes), for the mini set's actual size, and the same voice-comparison time."""
    from dataset_builder.mpe.build import PRESETS
    from eval.cli import parser

    build = " ".join(next(a for a in parser()._actions if a.dest == "command").choices["build"].format_help().split())
    page = " ".join((DOCS / "mpe.md").read_text().split())
    help_cases = re.search(r"the mini set's (\d+) cases take (?:~|about )([\d.]+) min", build)
    page_cases = re.search(r"the mini set's (\d+) cases take (?:~|about )([\d.]+|two|three|four) min", page)
    assert help_cases and page_cases, (help_cases, page_cases)
    words = {"two": "2", "three": "3", "four": "4"}
    assert help_cases.group(1) == page_cases.group(1) == str(2 * PRESETS["mini"])  # a pair is two cases
    assert help_cases.group(2) == words.get(page_cases.group(2), page_cases.group(2))
    help_texts = re.search(r"\(default (\d+): (\d+) clips, ~([\d.]+) min", build)
    page_texts = re.search(r"the (\d+) texts x (\d+) voices about ([\d.]+) more", page)
    assert help_texts and page_texts, (help_texts, page_texts)
    assert help_texts.group(1) == page_texts.group(1)
    assert int(help_texts.group(2)) == int(page_texts.group(1)) * int(page_texts.group(2))
    assert help_texts.group(3) == page_texts.group(3)


def test_every_adapter_arg_default_on_the_models_page_is_the_constructors() -> None:
    """docs/models.md's `--adapter-arg` tables, under each adapter's heading (`## ...: `name``): a row whose default
    is a plain value (`gpt-realtime`, 480) states the constructor's default for that keyword. Rows in words ("the
    server's"), and keywords whose code default is None (decided when the model loads), are the page's to explain."""
    import importlib

    from adapters.registry import adapter_target

    checked, wrong = 0, []
    heading = ""
    lines = (DOCS.parent / "models.md").read_text().split("\n")
    for i, line in enumerate(lines):
        if line.startswith("#"):
            heading = line
        if not line.startswith("| `--adapter-arg` | default |"):
            continue
        name = re.search(r":\s*`([\w-]+)`", heading)
        assert name, f"docs/models.md: the table at line {i + 1} is under no adapter's heading ({heading!r})"
        module, _, cls = adapter_target(name.group(1)).partition(":")
        params = inspect.signature(getattr(importlib.import_module(module), cls)).parameters
        for row in lines[i + 2:]:
            if not row.startswith("|"):
                break
            key, default = (c.strip() for c in row.strip("|").split("|")[:2])
            arg = re.fullmatch(r"`(\w+)`", key)
            value = re.fullmatch(r"`([^`]*)`|(-?\d+(?:\.\d+)?)", default)
            if not (arg and value and arg.group(1) in params) or params[arg.group(1)].default is None:
                continue
            code = params[arg.group(1)].default
            said = value.group(1) if value.group(1) is not None else value.group(2)
            same = str(code) == said or (isinstance(code, int | float) and not isinstance(code, bool)
                                         and re.fullmatch(r"-?\d+(?:\.\d+)?", said) is not None
                                         and float(said) == code)
            checked += 1
            if not same:
                wrong.append((name.group(1), arg.group(1), said, code))
    assert not wrong, wrong
    assert checked >= 40  # the tables were found and read
