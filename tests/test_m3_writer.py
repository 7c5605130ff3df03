"""The M3 writers (dataset_builder/m3/writer.py): `template` keeps the composed text; `openai` rewords a composed
dialogue through an OpenAI-compatible endpoint (here the stand-in server of tests/test_mpe_writer.py) and keeps
only rewrites that pass every check, asking again with the broken rule named; answers are cached."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from dataset_builder.m3.dialogues import Dialogue, generate_dialogues
from dataset_builder.m3.textbank import load_bank
from dataset_builder.m3.writer import OpenAIWriter, TemplateWriter, WriterError, _value_end, prompt, says
from eval.cli import main
from tests.test_mpe_writer import Stub

LINE = re.compile(r"^(u\d\d)  (user|system)  \[([\w-]+)\]")
LEAD = {"en": "Well, ", "ja": "えっと、"}


@pytest.fixture
def stub() -> Iterator[Stub]:
    s = Stub()
    yield s
    s.close()


def drafts(text: str) -> list[dict[str, str]]:
    """The utterances of our prompt as a model reads them: id, kind and draft."""
    out: list[dict[str, str]] = []
    for line in text.splitlines():
        if m := LINE.match(line):
            out.append({"id": m.group(1), "kind": m.group(3)})
        elif out and line.startswith("    draft: "):
            out[-1]["text"] = line[len("    draft: "):]
    return out


def reworded(text: str, lang: str, edit: Callable[[dict[str, str]], str] | None = None) -> str:
    """What a well-behaved model answers: every turn with a lead-in, backchannels as they are."""
    items = [{"id": u["id"], "text": (edit(u) if edit else None) or (
        u["text"] if u["kind"] == "bc" else LEAD[lang] + u["text"][0].lower() + u["text"][1:]
        if lang == "en" and not u["text"].startswith("I ") else LEAD[lang] + u["text"])} for u in drafts(text)]
    return json.dumps({"utterances": items}, ensure_ascii=False)


def writer_for(stub: Stub, tmp_path: Path, **kwargs: Any) -> OpenAIWriter:
    args: dict[str, Any] = {"base_url": stub.url, "model": "stub-model", "api_key_env": "DUPLEX_TEST_M3_KEY",
                            "cache_dir": tmp_path / "writer-cache"}
    return OpenAIWriter(**{**args, **kwargs})


@pytest.fixture(scope="module")
def task() -> dict[str, Dialogue]:
    return {lang: generate_dialogues(lang, "task", 4)[3] for lang in ("en", "ja")}


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
        assert u.text == (old.text if u.kind == "bc" else u.text) and (u.kind == "bc" or u.text != old.text)
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


def _first(kind: str) -> Callable[[dict[str, str]], str | None]:
    done: list[bool] = []

    def edit(u: dict[str, str]) -> str | None:
        if done or u["kind"] != kind:
            return None
        done.append(True)
        return {"bc": "oh, right then", "turn": "Hello there, what a lovely day it is today."}[kind]
    return edit


@pytest.mark.parametrize("broken, rule", [
    (lambda d: (lambda u: u["text"].replace(d.utterances[1].text, "It is something I cannot recall right now.")
                if u["id"] == "u01" else None), "gold"),
    (lambda d: _first("bc"), "backchannel"),
    (lambda d: (lambda u: "So the the " + u["text"] if u["id"] == "u00" else None), "doubled"),
    (lambda d: (lambda u: u["text"] + " Maybe 42 times." if u["id"] == "u00" else None), "numbers"),
    (lambda d: (lambda u: "a b" if u["id"] == "u00" else None), "length"),
])
def test_a_broken_rewrite_is_asked_for_again_naming_the_rule(stub: Stub, tmp_path: Path, task: dict,
                                                             broken: Callable, rule: str) -> None:
    draft = task["en"]
    assert draft.utterances[1].gold_answer  # u01 answers the first question
    edit = broken(draft)
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
    qid = draft.utterances[q].utt_id.rsplit("-", 1)[1]
    stub.answer = lambda p, n: reworded(p, "en", (lambda u: f"Okay, about {name}, {u['text']}" if u["id"] == qid
                                                 else None) if n == 0 else None)
    writer_for(stub, tmp_path).write(draft)
    assert "Rule broken: follow-up:" in stub.prompts()[1]


def test_after_the_last_attempt_fail_or_keep_the_template(stub: Stub, tmp_path: Path, task: dict) -> None:
    stub.answer = lambda p, n: "Sorry, I can't do that."
    with pytest.raises(WriterError) as err:
        writer_for(stub, tmp_path, attempts=2).write(task["en"])
    assert "\n" not in str(err.value) and task["en"].dialogue_id in str(err.value) and "rule json" in str(err.value)
    keep = writer_for(stub, tmp_path, attempts=1, on_failure="template")
    assert keep.write(task["en"]) is task["en"] and keep.summary()["fallback_dialogues"] == [task["en"].dialogue_id]
    stub.answer = lambda p, n: 503
    with pytest.raises(WriterError, match="HTTP 503"):
        writer_for(stub, tmp_path, http_attempts=1).write(task["en"])


def test_prompt_names_each_utterance_and_a_retry_names_the_rule(task: dict) -> None:
    kb = load_bank(("ja",)).knowledge
    text = prompt(task["ja"], kb)
    assert [u["id"] for u in drafts(text)] == [u.utt_id.rsplit("-", 1)[1] for u in task["ja"].utterances]
    assert "JSON" in text and "あいづち" in text


def test_build_m3_with_the_openai_writer_through_the_cli(stub: Stub, tmp_path: Path) -> None:
    stub.answer = lambda p, n: reworded(p, "en")
    out = tmp_path / "m3"
    assert main(["build", "m3", "--n", "2", "--configs", "m3_task_en", "--scripts-only", "--no-progress",
                 "--writer", "openai", "--writer-arg", f"base_url={stub.url}", "--writer-arg", "model=stub-model",
                 "--writer-arg", f"cache_dir={tmp_path / 'cache'}", "--out", str(out)]) == 0
    rows = [json.loads(line) for line in (out / "scripts.jsonl").read_text().splitlines()]
    composed = generate_dialogues("en", "task", 2)
    assert len(rows) == 2 and len(stub.requests) == 2
    for row, d in zip(rows, composed, strict=True):
        turns = [u["text"] for u in row["dialogue"]["utterances"] if u["kind"] == "turn"]
        assert turns == [json.loads(reworded(prompt(d, load_bank(("en",)).knowledge), "en"))["utterances"][k]["text"]
                         for k, u in enumerate(d.utterances) if u.kind == "turn"]
