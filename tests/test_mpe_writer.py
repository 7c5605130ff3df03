"""The Duplex-MPE writers: `template` keeps the composer's text; `openai` rewrites pairs through an
OpenAI-compatible endpoint (here a stub server this test starts) and keeps only rewrites that pass every check."""

from __future__ import annotations

import dataclasses
import json
import logging
import re
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from dataset_builder.errors import UsageError
from dataset_builder.mpe import generate_pair
from dataset_builder.mpe.writer import (
    _CUES,
    Draft,
    OpenAIWriter,
    Rejected,
    Writer,
    WriterError,
    check_rewrite,
    get_writer,
    prompt,
    write_scenes,
    writer_names,
)
from dataset_builder.schema import ASSISTANT_NAME, CUE_KINDS, Script

VOICES = ["voice-a", "voice-b", "voice-c", "voice-d", "voice-e"]
SEED = 0
SECRET = "sk-test-4f1d0c9e-do-not-print"
KEY_ENV = "DUPLEX_TEST_WRITER_KEY"
LINE = re.compile(r"^(t\d+)  (\S+) -> (\S+)  \[(\w+)\]")


# --- a stub OpenAI-compatible server --------------------------------------------------------------------------

class Stub:
    """A chat-completions server whose answer to the n-th request (from 0) is `answer(prompt, n)`: a string
    for the message content, or an int for an HTTP error status."""

    def __init__(self) -> None:
        self.answer: Callable[[str, int], str | int] = lambda prompt, n: rewrite_json(prompt)
        self.requests: list[dict[str, Any]] = []
        self.auth: list[str | None] = []
        self._lock = threading.Lock()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with stub._lock:
                    n = len(stub.requests)
                    stub.requests.append({"path": self.path, **body})
                    stub.auth.append(self.headers.get("Authorization"))
                answer = stub.answer(body["messages"][-1]["content"], n)
                if isinstance(answer, int):
                    self.send_error(answer)
                    return
                data = json.dumps({"choices": [{"message": {"role": "assistant", "content": answer}}]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def prompts(self) -> list[str]:
        return [r["messages"][-1]["content"] for r in self.requests]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def stub() -> Iterator[Stub]:
    s = Stub()
    yield s
    s.close()


def read_drafts(prompt: str) -> list[dict[str, Any]]:
    """The turns of our prompt, as a model reads them: id, label, and the draft text(s)."""
    turns: list[dict[str, Any]] = []
    for line in prompt.splitlines():
        if m := LINE.match(line):
            turns.append({"id": m.group(1), "label": m.group(4)})
        elif turns and (m := re.match(r"^    (explicit draft|implicit draft|draft): (.*)$", line)):
            turns[-1][{"draft": "text", "explicit draft": "explicit", "implicit draft": "implicit"}[m.group(1)]] = \
                m.group(2)
    return turns


def reworded(text: str) -> str:
    """A rewording that keeps every rule: a lead-in word (the turn stays within the word limit)."""
    return text if len(text.split()) >= 39 else f"Okay, {text}"


def rewrite(prompt: str) -> dict[str, Any]:
    """What a well-behaved model answers: every draft reworded, the JSON shape the prompt asks for."""
    return {"turns": [{k: (reworded(v) if k in ("text", "explicit", "implicit") else v) for k, v in t.items()}
                      for t in read_drafts(prompt)]}


def rewrite_json(prompt: str) -> str:
    return json.dumps(rewrite(prompt))


def writer_for(stub: Stub, tmp_path: Path, **kwargs: Any) -> OpenAIWriter:
    args: dict[str, Any] = {"base_url": stub.url, "model": "stub-model", "api_key_env": KEY_ENV,
                            "cache_dir": tmp_path / "writer-cache", "concurrency": 1}
    return OpenAIWriter(**{**args, **kwargs})


@pytest.fixture(scope="module")
def pairs() -> list[tuple[Script, Script]]:
    return [generate_pair(i, SEED, VOICES) for i in range(4)]


def _t(script: Script) -> str:
    return script.turns[script.t_index].text


# --- broken answers --------------------------------------------------------------------------------------------

def _t_item(answer: dict[str, Any]) -> dict[str, Any]:
    return next(t for t in answer["turns"] if t["label"] == "T")


def aria_in_implicit_t(prompt: str) -> str:
    answer = rewrite(prompt)
    _t_item(answer)["implicit"] = f"{ASSISTANT_NAME}, {_t_item(answer)['implicit']}"
    return json.dumps(answer)


def changed_number(prompt: str) -> str:
    answer = rewrite(prompt)
    fact = next(t for t in answer["turns"] if re.search(r"\d", t.get("text", "")))
    fact["text"] = re.sub(r"\d+", lambda m: str(int(m.group()) + 1), fact["text"], count=1)
    return json.dumps(answer)


def missing_turn(prompt: str) -> str:
    answer = rewrite(prompt)
    del answer["turns"][-1]
    return json.dumps(answer)


def bad_json(prompt: str) -> str:
    return "Sure! Here is the scene: {turns: [" + rewrite_json(prompt)[12:40]


BROKEN = {"name": aria_in_implicit_t, "numbers": changed_number, "turns": missing_turn, "json": bad_json}


# --- tests -------------------------------------------------------------------------------------------------------

def test_registry_and_template_writer(pairs):
    assert writer_names() == ["openai", "template"]
    template = get_writer("template")
    assert isinstance(template, Writer) and template.name == "template"
    scripts = [s for pair in pairs for s in pair]
    assert write_scenes(template, scripts) == scripts
    with pytest.raises(UsageError, match="--writer-arg base_url=.*missing: base_url, model"):
        get_writer("openai")
    with pytest.raises(UsageError, match="unknown writer 'gpt'"):
        get_writer("gpt")
    with pytest.raises(UsageError, match="on_failure"):
        get_writer("openai", base_url="http://127.0.0.1:1", model="m", on_failure="skip")


def test_prompt_names_each_cue_kind_and_what_differs():
    seen = set()
    for i in range(40):
        draft = Draft.of(*generate_pair(i, SEED, VOICES))
        text = prompt(draft)
        assert draft.cue in CUE_KINDS and draft.explicit.t_index in draft.two_versions
        assert _CUES[draft.cue] in text
        for j in draft.two_versions:
            assert f"explicit draft: {draft.explicit.turns[j].text}" in text
            assert f"implicit draft: {draft.implicit.turns[j].text}" in text
        seen.add(draft.cue)
    assert seen == set(CUE_KINDS)


def test_valid_rewrite_is_accepted_and_lands_in_the_scripts(stub, tmp_path, monkeypatch, pairs):
    monkeypatch.setenv(KEY_ENV, SECRET)
    writer = writer_for(stub, tmp_path, concurrency=2)
    scripts = [s for pair in pairs for s in pair]
    written = write_scenes(writer, scripts)
    assert len(stub.requests) == len(pairs)
    assert {r["path"] for r in stub.requests} == {"/v1/chat/completions"}
    assert all(r["model"] == "stub-model" for r in stub.requests)
    assert stub.auth == [f"Bearer {SECRET}"] * len(pairs)  # the key is sent, in the header only
    assert [s.script_id for s in written] == [s.script_id for s in scripts]
    for old, new in zip(scripts, written, strict=True):
        assert [t.text for t in new.turns] == [reworded(t.text) for t in old.turns]
        assert [(t.turn_id, t.speaker, t.label, t.addressee) for t in new.turns] == \
               [(t.turn_id, t.speaker, t.label, t.addressee) for t in old.turns]
        assert (new.gold_answer, new.attributes, new.speakers) == (old.gold_answer, old.attributes, old.speakers)
    summary = writer.summary()
    assert summary["rewritten"] == len(pairs) and summary["template_fallback"] == 0
    # The prompt carries the scene, the draft and the facts with their exact numbers.
    e, i = pairs[0]
    sent = next(p for p in stub.prompts() if _t(i) in p)
    for value in e.attributes.values():
        assert value in sent
    assert _t(e) in sent
    facts = [t for t in e.turns[: e.t_index] if re.search(r"\d", t.text)]
    assert facts
    for turn in facts:
        said = re.search(rf"^{turn.turn_id} .*must say: (.*)$", sent, re.MULTILINE)
        assert said and said.group(1).split(", ")[: len(re.findall(r"\d+(?::\d+)?", turn.text))] == \
            re.findall(r"\d+(?::\d+)?", turn.text)


def test_rerun_reads_the_cache(stub, tmp_path, pairs):
    scripts = [s for pair in pairs[:2] for s in pair]
    first = write_scenes(writer_for(stub, tmp_path), scripts)
    stub.answer = lambda prompt, n: 500
    again = writer_for(stub, tmp_path)
    assert write_scenes(again, scripts) == first
    assert again.summary()["requests"] == 0 and again.summary()["cache_hits"] == 2


@pytest.mark.parametrize("rule", sorted(BROKEN))
def test_a_broken_answer_is_asked_again(stub, tmp_path, pairs, rule):
    broken = BROKEN[rule]
    stub.answer = lambda prompt, n: broken(prompt) if n == 0 else rewrite_json(prompt)
    writer = writer_for(stub, tmp_path)
    e, i = writer.write_pair(*pairs[1])
    assert len(stub.requests) == 2
    first, second = stub.prompts()
    assert f"Rule broken: {rule}:" in second and "Rule broken" not in first
    assert stub.requests[0]["seed"] != stub.requests[1]["seed"]
    assert [t.text for t in e.turns] == [reworded(t.text) for t in pairs[1][0].turns]
    assert ASSISTANT_NAME not in _t(i)
    assert writer.summary()["rejected_attempts"] == {rule: 1}


def test_persistent_failure_is_one_line_naming_the_pair_and_rule(stub, tmp_path, pairs, monkeypatch):
    monkeypatch.setenv(KEY_ENV, SECRET)
    stub.answer = lambda prompt, n: changed_number(prompt)
    scripts = [s for pair in pairs for s in pair]
    with pytest.raises(WriterError) as err:
        write_scenes(writer_for(stub, tmp_path, attempts=3), scripts)
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith("writer openai:stub-model: pair mpe-00000: rule numbers:")
    assert "after 3 attempts" in message
    assert len(stub.requests) == 3  # the first failing pair stops the build


def test_fallback_to_template_is_counted(stub, tmp_path, pairs, caplog):
    target = _t(pairs[2][1])
    stub.answer = lambda prompt, n: aria_in_implicit_t(prompt) if target in prompt else rewrite_json(prompt)
    writer = writer_for(stub, tmp_path, attempts=2, on_failure="template")
    scripts = [s for pair in pairs for s in pair]
    with caplog.at_level(logging.WARNING, logger="duplex_eval.build"):
        written = write_scenes(writer, scripts)
    assert written[4:6] == scripts[4:6]  # pair 2 keeps the composer's text
    assert written[:4] != scripts[:4]
    summary = writer.summary()
    assert (summary["rewritten"], summary["template_fallback"], summary["fallback_pairs"]) == \
           (3, 1, ["mpe-00002"])
    assert "pair mpe-00002: rule name" in caplog.text and "keeping the template text" in caplog.text


def test_api_key_never_leaks(stub, tmp_path, pairs, monkeypatch, caplog):
    monkeypatch.setenv(KEY_ENV, SECRET)
    writer = writer_for(stub, tmp_path)
    with caplog.at_level(logging.DEBUG):
        stub.answer = lambda prompt, n: bad_json(prompt) if n == 0 else rewrite_json(prompt)
        writer.write_pair(*pairs[0])
        stub.answer = lambda prompt, n: 401
        with pytest.raises(WriterError) as err:
            writer.write_pair(*pairs[1])
    assert "HTTP 401" in str(err.value)
    cached = [p.read_text(encoding="utf-8") for p in (tmp_path / "writer-cache").rglob("*") if p.is_file()]
    assert len(cached) == 2  # the two answers of pair 0; an HTTP error is not cached
    shown = [str(err.value), repr(writer), json.dumps(writer.summary()), caplog.text, *cached]
    assert stub.auth[-1] == f"Bearer {SECRET}"
    assert not [s for s in shown if SECRET in s]


def test_unreachable_endpoint_is_one_line(tmp_path, pairs):
    writer = OpenAIWriter(base_url="http://127.0.0.1:9", model="m", cache_dir=None, http_attempts=1,
                          timeout_s=5)
    with pytest.raises(WriterError, match=r"^writer openai:m: pair mpe-00000: request to http://127.0.0.1:9/v1/chat"):
        writer.write_pair(*pairs[0])


# --- the checks, one near miss each ------------------------------------------------------------------------------

def _edit(script: Script, index: int, text: str) -> Script:
    turns = list(script.turns)
    turns[index] = dataclasses.replace(turns[index], text=text)
    return dataclasses.replace(script, turns=turns)


def _edit_both(pair: tuple[Script, Script], index: int, text: str) -> tuple[Script, Script]:
    return _edit(pair[0], index, text), _edit(pair[1], index, text)


def _side_talk(script: Script) -> int:
    """A side-talk turn before T between people, without a number: where a stray number or day would change
    the facts."""
    people = {s.name for s in script.speakers}
    return next(j for j, t in enumerate(script.turns[: script.t_index - 1])
                if t.label in ("N2", "N3") and (t.addressee is None or t.addressee in people)
                and not re.search(r"\d", t.text))


def test_every_composed_pair_passes_the_writer_checks():
    """The writer's rules are no stricter than the composer: its own text is always an acceptable answer."""
    for i in range(150):
        pair = generate_pair(i, SEED + 1, VOICES)
        check_rewrite(Draft.of(*pair), *pair)


def test_checks_reject_near_misses(pairs):
    pair = pairs[1]
    draft = Draft.of(*pair)
    check_rewrite(draft, *pair)  # the composer's own text passes
    e, i = pair
    j = _side_talk(e)
    side = e.turns[j].text
    t = e.t_index
    people = [s.name for s in e.speakers]
    cases: dict[str, tuple[Script, Script]] = {
        "a number word in side talk": _edit_both(pair, j, f"{side} We need three more chairs."),
        "a digit in side talk": _edit_both(pair, j, f"{side} We need 3 more chairs."),
        "a weekday in side talk": _edit_both(pair, j, f"{side} Same as last Sunday."),
        "a hidden name": _edit_both(pair, j, f"{side} The vegetarian option is fine."),
        "the word assistant": _edit_both(pair, j, f"{side} The assistant can wait."),
        "a stranger": _edit_both(pair, j, f"{side} Ada said so too." if "Ada" not in people
                                 else f"{side} Ruth said so too."),
        "too long": _edit_both(pair, j, " ".join(["word"] * 41)),
        "a speaker label": _edit_both(pair, j, f"{e.turns[j].speaker}: {side}"),
        "a shared turn that differs": (e, _edit(i, j, f"{side} Anyway.")),
        "implicit T names a person": (e, _edit(i, t, f"{people[0]}, {_t(i)}")),
        "implicit T is the explicit T without the name": (
            e, _edit(i, t, re.sub(rf"\s*\b{ASSISTANT_NAME}\b,?\s*", " ", _t(e)).strip(" ,").capitalize())),
        "the fact dropped": _edit_both(pair, next(k for k in range(t) if re.search(r"\d", e.turns[k].text)),
                                       "Let me think about that for a moment."),
    }
    for what, (ne, ni) in cases.items():
        with pytest.raises(Rejected):
            check_rewrite(draft, ne, ni)
            pytest.fail(f"accepted {what}")


# --- the build and the command line -----------------------------------------------------------------------------

def _cli_args(stub: Stub, out: Path, *extra: str) -> list[str]:
    return ["build", "mpe", "--n", "2", "--out", str(out), "--no-progress", "--writer", "openai",
            "--writer-arg", f"base_url={stub.url}", "--writer-arg", "model=stub-model",
            "--writer-arg", f"cache_dir={out.parent / 'writer-cache'}", *extra]


def test_cli_scripts_only_with_the_openai_writer(stub, tmp_path, capsys):
    from dataset_builder.build import read_scripts
    from eval.cli import main

    out = tmp_path / "scripts"
    assert main(_cli_args(stub, out, "--scripts-only")) == 0
    info = json.loads((out / "build-info.json").read_text())  # the build's statistics go to the folder
    assert info["writer"]["name"] == "openai:stub-model" and info["writer"]["rewritten"] == 2
    written = read_scripts(out / "scripts.jsonl")
    composed = [s for i in range(2) for s in generate_pair(i, SEED, VOICES)]  # the voices do not change the words
    assert [(s.script_id, s.gold_answer, [t.label for t in s.turns]) for s in written] == \
           [(s.script_id, s.gold_answer, [t.label for t in s.turns]) for s in composed]
    assert [[t.text for t in s.turns] for s in written] == [[reworded(t.text) for t in s.turns] for s in composed]


def test_cli_persistent_failure_exits_with_one_line(stub, tmp_path, capsys):
    from eval.cli import main

    stub.answer = lambda prompt, n: missing_turn(prompt)
    out = tmp_path / "scripts"
    assert main(_cli_args(stub, out, "--scripts-only", "--writer-arg", "attempts=2")) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert err[0].startswith("error: writer openai:stub-model: pair mpe-00000: rule turns: expected ")
    assert not (out / "scripts.jsonl").exists()


def test_card_records_the_writer(stub, tmp_path):
    from dataset_builder.build import BuildOptions
    from dataset_builder.mpe.build import build

    out = tmp_path / "set"
    info = build(out, BuildOptions(n=1, tts="espeak", workers=1, cache_dir=tmp_path / "tts", writer="openai",
                                   writer_args={"base_url": stub.url, "model": "stub-model",
                                                "cache_dir": str(tmp_path / "writer-cache")}))
    assert info["writer"]["rewritten"] == 1
    card = (out / "README.md").read_text(encoding="utf-8")
    assert '"name": "openai:stub-model"' in card and '"template_fallback": 0' in card
    assert '"requests"' not in card  # the card stays the same when a rebuild reads the cache
