"""The M3 writers (dataset_builder/m3/writer.py): `template` keeps the dialogue's text; `openai` rewords a dialogue
through an OpenAI-compatible endpoint (here the stand-in server of tests/test_mpe_writer.py), showing it and reading
it back in the chat corpus's written form (U:/S:/U> lines with {pause}, {bc: word}, {cut}), and keeps only rewrites
that pass every check, asking again with the broken rule named; answers are cached."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from dataset_builder.m3.corpus import mini_dialogue, render
from dataset_builder.m3.dialogues import Dialogue, generate_dialogues
from dataset_builder.m3.textbank import load_bank
from dataset_builder.m3.writer import (
    OpenAIWriter,
    TemplateWriter,
    WriterError,
    _value_end,
    parse_rewrite,
    prompt,
    says,
)
from eval.cli import main
from tests.test_mpe_writer import Stub

HEAD = re.compile(r"^(U:|S:|U> \{why: [^}]*\})\s*(.*)$")
LEAD = {"en": "Well, ", "ja": "えっと、"}


@pytest.fixture
def stub() -> Iterator[Stub]:
    s = Stub()
    yield s
    s.close()


def drafts(text: str) -> list[str]:
    """The dialogue's lines in our prompt as a model reads them."""
    return [line for line in text.splitlines() if HEAD.match(line)]


def reworded(text: str, lang: str, edit: Callable[[int, str], str | None] | None = None) -> str:
    """What a well-behaved model answers: every line with a lead-in, its marks as they are (`edit`: a line
    written otherwise, by its index)."""
    out = []
    for n, line in enumerate(drafts(text)):
        head, body = HEAD.match(line).groups()  # type: ignore[union-attr]
        lead = body if lang != "en" or body.startswith("I ") else body[0].lower() + body[1:]
        out.append((edit(n, line) if edit else None) or f"{head} {LEAD[lang]}{lead}")
    return "\n".join(out)


def writer_for(stub: Stub, tmp_path: Path, **kwargs: Any) -> OpenAIWriter:
    args: dict[str, Any] = {"base_url": stub.url, "model": "stub-model", "api_key_env": "DUPLEX_TEST_M3_KEY",
                            "cache_dir": tmp_path / "writer-cache"}
    return OpenAIWriter(**{**args, **kwargs})


@pytest.fixture(scope="module")
def task() -> dict[str, Dialogue]:
    # dialogues with a held pause and a backchannel, for the marks
    return {lang: next(d for d in generate_dialogues(lang, "task", 20)[3:] if {"pause", "bc"} <= {
        u.relation for u in d.utterances}) for lang in ("en", "ja")}


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_a_rewrite_keeps_everything_but_the_wording(stub: Stub, tmp_path: Path, task: dict, lang: str) -> None:
    draft = task[lang]
    stub.answer = lambda p, n: reworded(p, lang)
    new = writer_for(stub, tmp_path).write(draft)
    assert len(stub.requests) == 1 and stub.requests[0]["path"] == "/v1/chat/completions"
    sent = stub.prompts()[0]
    assert all(f"answer: {u.gold_answer}" in sent for u in draft.utterances if u.gold_answer)
    assert ("about the previous answer" in sent) == any(u.follows_answer for u in draft.utterances)
    new.validate()
    for old, u in zip(draft.utterances, new.utterances, strict=True):
        assert (u.speaker, u.kind, u.relation, u.topic, u.fact, u.gold_answer, u.gold_aliases) == \
            (old.speaker, old.kind, old.relation, old.topic, old.fact, old.gold_answer, old.gold_aliases)
        assert u.text == (old.text if u.kind == "bc" else u.text)
        assert u.kind == "bc" or u.text != old.text or u.relation == "pause"
        if u.gold_answer and u.cut_after_chars:  # the barge-in still comes right after the whole answer
            said = u.text[:u.cut_after_chars]
            assert says(said, u.gold_answer, lang) >= 0  # "アメリカ合衆国" whole, not cut after アメリカ
            assert max(says(said, f, lang) for f in (u.gold_answer, *u.gold_aliases)) == u.cut_after_chars


@pytest.mark.parametrize(("lang", "text", "gold", "aliases", "end"), [
    ("ja", "えっと、アメリカ合衆国です。", "アメリカ合衆国", ("アメリカ", "米国"), 11),  # not after its prefix アメリカ
    ("ja", "えっと、1954年に公開されました。", "1954", ("1954年",), 9),  # the longer form said from the same place
    ("ja", "米国、つまりアメリカ合衆国です。", "アメリカ合衆国", ("米国",), 2),  # the form said first
    ("en", "It is the United States, I think.", "the United States", ("United States", "the US"), 23),
    ("en", "Lisbon.", "Lisbon", (), 6),
    ("en", "No idea.", "Lisbon", (), -1),
])
def test_where_the_answer_ends(task: dict, lang: str, text: str, gold: str, aliases: tuple[str, ...],
                               end: int) -> None:
    import dataclasses

    u = dataclasses.replace(next(x for x in task[lang].utterances if x.gold_answer), gold_answer=gold,
                            gold_aliases=aliases)
    assert _value_end(u, text, lang) == end


def test_answers_are_cached_and_template_asks_nothing(stub: Stub, tmp_path: Path, task: dict) -> None:
    stub.answer = lambda p, n: reworded(p, "en")
    first = writer_for(stub, tmp_path).write(task["en"])
    again = writer_for(stub, tmp_path)
    assert again.write(task["en"]) == first and len(stub.requests) == 1
    assert again.summary()["cache_hits"] == 1 and again.summary()["requests"] == 0
    assert TemplateWriter().write(task["en"]) is task["en"]


def _without_the_answer(draft: Dialogue) -> Callable[[int, str], str | None]:
    """Line 1 no longer says its answer, its marks kept."""
    forms = sorted((draft.utterances[1].gold_answer, *draft.utterances[1].gold_aliases), key=len, reverse=True)

    def edit(n: int, line: str) -> str | None:
        return re.sub("|".join(map(re.escape, forms)), "something", line, flags=re.IGNORECASE) if n == 1 else None
    return edit


def _first_bc(n: int, line: str) -> str | None:
    return re.sub(r"\{bc: [^}]*\}", "{bc: oh, right then}", line, count=1) if "{bc:" in line else None


@pytest.mark.parametrize("broken, rule", [
    ("gold", "gold"),
    (_first_bc, "backchannel"),
    (lambda n, line: line.replace("U: ", "U: So the the ", 1) if n == 0 else None, "doubled"),
    (lambda n, line: line + " Maybe 42 times." if n == 0 else None, "numbers"),
    (lambda n, line: "U: a b" if n == 0 else None, "length"),
    (lambda n, line: line.replace("{pause}", "") if "{pause}" in line else None, "pause"),
    (lambda n, line: line.replace("S:", "U:", 1) if n == 1 else None, "lines"),
])
def test_a_broken_rewrite_is_asked_for_again_naming_the_rule(stub: Stub, tmp_path: Path, task: dict,
                                                             broken: Callable, rule: str) -> None:
    draft = task["en"]
    assert draft.utterances[1].gold_answer and draft.utterances[0].relation == "first"  # line 1 answers line 0
    assert any(u.relation == "pause" for u in draft.utterances) and any(u.kind == "bc" for u in draft.utterances)
    edit = _without_the_answer(draft) if broken == "gold" else broken
    stub.answer = lambda p, n: reworded(p, "en", edit if n == 0 else None)
    w = writer_for(stub, tmp_path)
    w.write(draft)
    assert len(stub.requests) == 2
    assert f"Rule broken: {rule}:" in stub.prompts()[1] and "attempt 2 of 3" in stub.prompts()[1]
    assert w.summary()["rejected_attempts"] == {rule: 1} and w.summary()["rewritten"] == 1
    assert stub.requests[0]["seed"] != stub.requests[1]["seed"]  # a retry is a new request


def test_a_follow_up_about_the_answer_must_not_name_it(stub: Stub, tmp_path: Path) -> None:
    kb = load_bank(("en",)).knowledge
    draft = next(d for d in generate_dialogues("en", "task", 40) if any(u.follows_answer for u in d.utterances))
    i = next(i for i, u in enumerate(draft.utterances) if u.follows_answer)
    q = max(k for k in range(i) if draft.utterances[k].speaker == "user" and draft.utterances[k].kind == "turn")
    name = kb.entity(draft.utterances[i].topic).name["en"]
    line = sum(u.kind == "turn" and u.relation != "pause" for u in draft.utterances[:q + 1]) - 1
    stub.answer = lambda p, n: reworded(p, "en", (lambda k, text: text.replace("U: ", f"U: Okay, about {name}, ", 1)
                                                 if k == line else None) if n == 0 else None)
    writer_for(stub, tmp_path).write(draft)
    assert "Rule broken: follow-up:" in stub.prompts()[1]


def test_after_the_last_attempt_fail_or_keep_the_template(stub: Stub, tmp_path: Path, task: dict) -> None:
    stub.answer = lambda p, n: "Sorry, I can't do that."
    with pytest.raises(WriterError) as err:
        writer_for(stub, tmp_path, attempts=2).write(task["en"])
    assert "\n" not in str(err.value) and task["en"].dialogue_id in str(err.value) and "rule lines" in str(err.value)
    keep = writer_for(stub, tmp_path, attempts=1, on_failure="template")
    assert keep.write(task["en"]) is task["en"] and keep.summary()["fallback_dialogues"] == [task["en"].dialogue_id]
    stub.answer = lambda p, n: 503
    with pytest.raises(WriterError, match="HTTP 503"):
        writer_for(stub, tmp_path, http_attempts=1).write(task["en"])


def test_prompt_names_each_utterance_and_a_retry_names_the_rule(task: dict) -> None:
    kb = load_bank(("ja",)).knowledge
    text = prompt(task["ja"], kb)
    assert drafts(text) == render(task["ja"])  # the corpus's written form, marks where they fall
    assert "{bc: " in text and "{pause}" in text and "あいづち" in text and "# answer: " in text
    for lang in ("en", "ja"):  # read back as written, the dialogue is the same
        d = mini_dialogue(lang)
        assert parse_rewrite("\n".join(render(d)), d) == d
        assert "U> {why: " in "\n".join(render(d))


def test_build_m3_with_the_openai_writer_through_the_cli(stub: Stub, tmp_path: Path) -> None:
    stub.answer = lambda p, n: reworded(p, "en")
    out = tmp_path / "m3"
    assert main(["build", "m3", "--n", "2", "--config", "m3_task_en", "--scripts-only", "--no-progress",
                 "--writer", "openai", "--writer-arg", f"base_url={stub.url}", "--writer-arg", "model=stub-model",
                 "--writer-arg", f"cache_dir={tmp_path / 'cache'}", "--out", str(out)]) == 0
    rows = [json.loads(line) for line in (out / "scripts.jsonl").read_text().splitlines()]
    composed = generate_dialogues("en", "task", 2)
    assert len(rows) == 2 and len(stub.requests) == 2
    for row, d in zip(rows, composed, strict=True):
        turns = [u["text"] for u in row["dialogue"]["utterances"] if u["kind"] == "turn"]
        want = parse_rewrite(reworded(prompt(d, load_bank(("en",)).knowledge), "en"), d)
        assert turns == [u.text for u in want.utterances if u.kind == "turn"] != [
            u.text for u in d.utterances if u.kind == "turn"]


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_a_chat_conversation_is_rewritten_in_the_same_form(stub: Stub, tmp_path: Path, lang: str) -> None:
    draft = mini_dialogue(lang)
    stub.answer = lambda p, n: reworded(p, lang)
    new = writer_for(stub, tmp_path).write(draft)
    assert "U> {why: " in stub.prompts()[0] and "{cut}" in stub.prompts()[0]
    for old, u in zip(draft.utterances, new.utterances, strict=True):
        assert (u.speaker, u.kind, u.relation, u.why) == (old.speaker, old.kind, old.relation, old.why)
        if u.kind == "bc":  # still right after the same words, now a lead-in later
            host = next(x for x in reversed(new.utterances[:new.utterances.index(u)]) if x.kind == "turn")
            old_host = next(x for x in reversed(draft.utterances[:draft.utterances.index(old)]) if x.kind == "turn")
            assert host.text[:u.bc_at_chars].endswith(old_host.text[:old.bc_at_chars][-8:])
        if old.cut_after_chars:
            assert u.text[u.cut_after_chars:].strip() == old.text[old.cut_after_chars:].strip()
