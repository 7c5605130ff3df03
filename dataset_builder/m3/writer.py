"""Who writes the words of an M3 dialogue: the dialogue as it is (`template`: the authored chat corpus, the composed
task dialogues), or an LLM (`openai`), as the paper does ("Written dialogues are converted into spoken-style
dialogues using a large language model", M3-DuplexBench §III-B1) and as Duplex-MPE's writer does
(`dataset_builder/mpe/writer.py`).

The dialogue fixes everything but the wording: its utterances in order, who says each, which are backchannels (and
their words), held pauses and barge-ins, the task's facts and gold answers. `openai` shows any OpenAI-compatible chat
endpoint (`openai_compat.ChatClient`, cached on disk) the dialogue in the chat corpus's written form
(`corpus.render`: `U: ...`, `S: ...`, `U> {why: ...} ...` lines with `{pause}`, `{bc: word}` and `{cut}` where
they fall; texts/README.md "Chat corpus") and asks for it back in the same form, reworded in spoken style with
every mark kept where it belongs by meaning. An answer is read back with the corpus reader (`parse_rewrite`) and
accepted only when it passes every check a dialogue passes (`Dialogue.validate`) plus its own (`check_rewrite`):
the same lines and marks, backchannel words unchanged, each TURN still TURN-long, no doubled word, no number the
draft did not say, every task answer still says its gold answer (and, where a barge-in cuts it, says it with
enough after it to be cut there), a question naming its entity where the draft did and not where it asks about
the previous answer, no question giving its answer away. A rejected answer is asked for again with the broken
rule named; after the last attempt the build stops with one line naming the dialogue and the rule, or, with
`on_failure=template`, keeps the draft's text for it and counts it. The writer is never required: `template` is
the default and needs nothing.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import unicodedata
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dataset_builder.llm_writer import ChatWriter, Rejected, default_cache_dir
from dataset_builder.llm_writer import WriterError as WriterError  # what this writer raises
from dataset_builder.m3.bankio import Problems
from dataset_builder.m3.corpus import CorpusLine, parse_line, render
from dataset_builder.m3.dialogues import Dialogue, DialogueUtterance
from dataset_builder.m3.knowledge import Knowledge, normalise_ja
from dataset_builder.m3.language import LANGUAGES
from dataset_builder.registry import LazyRegistry
from dataset_builder.schema import SchemaError

if TYPE_CHECKING:
    from dataset_builder.build import BuildOptions

log = logging.getLogger("duplex_eval.build")

WRITER_PROMPT_VERSION = "m3-writer-2"  # bump when the prompt or the checks change: cached answers then differ
MAX_GROWTH = 2.0  # a rewritten TURN is at most this many times its draft's size (plus a few words)

_DIGITS = re.compile(r"\d+")
_DOUBLED = re.compile(r"\b(\w+)\s+\1\b", re.IGNORECASE)


class TemplateWriter:
    """The composer's text as it is."""

    name = "template"

    def write(self, dialogue: Dialogue) -> Dialogue:
        return dialogue

    def summary(self) -> dict[str, Any]:
        return {"name": self.name}


# --- what a rewrite must keep -----------------------------------------------------------------------------------

def _norm(text: str, lang: str) -> str:
    return normalise_ja(text) if lang == "ja" else " ".join(re.findall(r"[\w'.-]+", text.lower()))


def _said_at(text: str, phrase: str, lang: str) -> tuple[int, int] | None:
    """Where `phrase` is first said in `text` (start, end in characters), or None: as whole words in English, as
    characters (width-folded) in Japanese."""
    if lang == "ja":
        at = unicodedata.normalize("NFKC", text).find(unicodedata.normalize("NFKC", phrase))
        return (at, at + len(phrase)) if at >= 0 else None
    m = re.search(rf"(?<!\w){re.escape(phrase)}(?!\w)", text, re.IGNORECASE)
    return (m.start(), m.end()) if m else None


def says(text: str, phrase: str, lang: str) -> int:
    """Where `phrase` ends in `text` (characters; -1 when it is not said)."""
    span = _said_at(text, phrase, lang)
    return span[1] if span else -1


def _value_end(u: DialogueUtterance, text: str, lang: str) -> int:
    """Where the answer, said first in `text` in any of its gold forms, ends, or -1. Of forms said from the same
    place, the longest: "アメリカ合衆国" ends after 合衆国, not after its alias アメリカ."""
    spans = [span for form in (u.gold_answer, *u.gold_aliases) if (span := _said_at(text, form, lang))]
    return min(spans, key=lambda se: (se[0], -se[1]))[1] if spans else -1


def check_rewrite(draft: Dialogue, new: Dialogue, knowledge: Knowledge | None = None) -> None:
    """`new` keeps what `draft` fixed and passes what a composed dialogue passes; raises Rejected."""
    lang = LANGUAGES[draft.language]
    code = draft.language
    for old, u in zip(draft.utterances, new.utterances, strict=True):
        where, text = f"{u.utt_id} ({u.speaker} {u.kind})", u.text
        if u.kind == "bc":
            if text != old.text:
                raise Rejected("backchannel", f"{where} is a backchannel and stays {old.text!r}")
            continue
        if re.match(r"\s*(user|system|u|s|ユーザー|システム)\s*[:：]", text, re.IGNORECASE) or any(
                c in text for c in "{}|\n*#\""):
            raise Rejected("format", f"{where} is not plain speech: {text!r}")
        size, before = lang.size(text), lang.size(old.text)
        if size < lang.half_min:
            raise Rejected("length", f"{where} is too short to be a turn ({size} < {lang.half_min} "
                                     f"{'words' if code == 'en' else 'morae'})")
        if size > MAX_GROWTH * before + 6:
            raise Rejected("length", f"{where} grew from {before} to {size}; keep it about as long as the draft")
        if code == "en" and (m := _DOUBLED.search(text)):
            raise Rejected("doubled", f"{where} says {m.group(0)!r}")
        if u.gold_answer:
            end = _value_end(u, text, code)
            if end < 0:
                raise Rejected("gold", f"{where} must say the answer {u.gold_answer!r}")
            if old.cut_after_chars and lang.size(text[end:]) < lang.tail_min:
                raise Rejected("barge-in", f"{where} is cut by a barge-in after its answer: it must go on for "
                                           f"at least {lang.tail_min} {'words' if code == 'en' else 'morae'} "
                                           f"after {u.gold_answer!r}")
        if Counter(_DIGITS.findall(text)) != Counter(_DIGITS.findall(old.text)):
            raise Rejected("numbers", f"{where} says the numbers {sorted(_DIGITS.findall(text))}; it must say "
                                      f"exactly {sorted(_DIGITS.findall(old.text)) or 'none'}")
    _check_questions(draft, new, knowledge)
    try:
        new.validate()
    except SchemaError as err:
        raise Rejected("structure", str(err)) from None


def _check_questions(draft: Dialogue, new: Dialogue, knowledge: Knowledge | None) -> None:
    """A task question names its entity where the draft did and not where it asks about the previous answer (a
    reaction may still echo that answer), and never says its own answer."""
    if draft.domain != "task" or knowledge is None:
        return
    code = draft.language
    start = 0
    for j, u in enumerate(new.utterances):
        if not u.gold_answer:
            continue
        asked = [k for k in range(start, j) if new.utterances[k].speaker == "user" and new.utterances[k].kind == "turn"]
        start = j + 1
        question = " ".join(new.utterances[k].text for k in asked)
        drafted = " ".join(draft.utterances[k].text for k in asked)
        name = _norm(knowledge.entity(u.topic).name[code], code)
        where = new.utterances[asked[-1]].utt_id if asked else u.utt_id
        if u.follows_answer and _norm(question, code).count(name) > _norm(drafted, code).count(name):
            # The draft names it only where a reaction echoes the previous answer ("Oh, Jane Austen, okay, ...").
            raise Rejected("follow-up", f"{where} asks about the previous answer and must not name it again "
                                        f"({knowledge.entity(u.topic).name[code]!r}): say it as the draft does")
        elif name in _norm(drafted, code) and name not in _norm(question, code):
            raise Rejected("entity", f"{where} must name {knowledge.entity(u.topic).name[code]!r} as the draft does")
        if says(question, u.gold_answer, code) >= 0 and says(drafted, u.gold_answer, code) < 0:
            raise Rejected("gold", f"{where} gives its own answer {u.gold_answer!r} away")


_FENCE = re.compile(r"^```\w*\s*$")


def _written(lines: Sequence[str], lang: str, what: str) -> list[CorpusLine]:
    problems = Problems()
    out = [parse_line(line, lang, f"line {k}", problems) for k, line in enumerate(lines, 1)]
    if problems.errors or any(x is None for x in out):
        raise Rejected("format", f"{what}: {problems.errors[0] if problems.errors else 'unreadable line'}")
    return [x for x in out if x is not None]


def parse_rewrite(content: str, draft: Dialogue) -> Dialogue:
    """The dialogue an answer in the corpus's written form describes (checked by `check_rewrite`, not here): its
    lines must match the draft's one for one (speaker, barge-in, pauses, backchannel words, cut); raises Rejected."""
    lang = draft.language
    lines = [ln.strip() for ln in content.strip().splitlines()]
    lines = [ln for ln in lines if ln and not ln.startswith("#") and not _FENCE.match(ln)]
    want = _written(render(draft), lang, "the draft")
    if len(lines) != len(want):
        raise Rejected("lines", f"expected the draft's {len(want)} lines ('U: ...', 'S: ...', 'U> {{why: ...}} ...'"
                                f"), got {len(lines)}")
    got = _written(lines, lang, "the answer")
    out: list[DialogueUtterance] = []
    k = 0
    for n, (a, b) in enumerate(zip(want, got, strict=True), 1):
        head = "U>" if a.barge_in else "U:" if a.speaker == "user" else "S:"
        if (a.speaker, a.barge_in) != (b.speaker, b.barge_in):
            raise Rejected("lines", f"line {n} starts with {head!r} as in the draft")
        if len(a.pauses) != len(b.pauses):
            raise Rejected("pause", f"line {n} keeps its {len(a.pauses)} {{pause}} mark(s)")
        if [w for _, w in a.bcs] != [w for _, w in b.bcs]:
            raise Rejected("backchannel", f"line {n} keeps its backchannels {[w for _, w in a.bcs]} in this order, "
                                          "each right after the words it answers")
        if (a.cut >= 0) != (b.cut >= 0):
            raise Rejected("barge-in", f"line {n} keeps its {{cut}} mark" if a.cut >= 0 else
                           f"line {n} has no {{cut}}")
        group = draft.utterances[k:k + 1 + len(a.pauses) + len(a.bcs)]
        k += len(group)
        out += _rewritten_line(group, b, lang)
    return dataclasses.replace(draft, utterances=tuple(out))


def _rewritten_line(group: Sequence[DialogueUtterance], line: CorpusLine, lang: str) -> list[DialogueUtterance]:
    """The draft utterances of one line with the rewritten line's texts and mark positions."""
    bounds = [0, *line.pauses, len(line.text)]
    pieces = []  # (start in the line, text)
    for a, b in zip(bounds, bounds[1:], strict=False):
        raw = line.text[a:b]
        pieces.append((a + len(raw) - len(raw.lstrip()), raw.strip()))
    out: list[DialogueUtterance] = []
    turn, bcs = -1, iter(line.bcs)
    for u in group:
        if u.kind == "turn":
            turn += 1
            start, text = pieces[turn]
            cut = 0
            if u.cut_after_chars and u.gold_answer:  # a barge-in comes right after the answer, wherever it is said
                cut = max(0, _value_end(u, text, lang))
            elif u.cut_after_chars:
                cut = min(max(1, line.cut - start), len(text) - 1)
            out.append(dataclasses.replace(u, text=text, cut_after_chars=cut))
            continue
        pos, _ = next(bcs)
        start, text = pieces[turn]
        at = min(max(1, pos - start), max(1, len(text) - 1))
        out.append(dataclasses.replace(u, bc_at_chars=at if u.bc_at_chars else 0,
                                       bc_before_chars=at if u.bc_before_chars else 0))
    return out


# --- the request ------------------------------------------------------------------------------------------------

_PROMPT = {"en": """\
Rewrite one spoken dialogue so that it sounds like two real people talking: contractions, fillers where people \
use them (um, uh, like), self-repair, short answers, each line answering the one before it. It is read aloud by \
text-to-speech in a benchmark of turn-taking ({domain}). Your job is the wording; everything else stays.

## The dialogue, in the corpus's written form
One line a turn: "U: text" (the user), "S: text" (the system), "U> {{why: reason}} text" (the user cutting in on \
the line before). Marks inside a line: {{pause}} (the user stops for a moment and goes on: only where what came \
before cannot end a turn, mid-clause, after a filler or a conjunction, never after a complete sentence or clause), \
{{bc: word}} (the listener's short backchannel, right after the words it reacts to, never inside or right after \
a question), {{cut}} (where the user cuts in; the line goes on after it with what the system would have said). \
A "# ..." line is a note about the line after it.
{lines}

## Rules
1. Keep every line, in this order, with the same start (U:, S:, U>) and the same marks: as many {{pause}}, the \
same {{bc: word}} words in the same order, {{cut}} where there is one. Move a mark only to keep it right after the \
words it belongs to.
2. A line noted "answer:" says that answer in those words; "cut after the answer" means {{cut}} comes after the \
answer and the line goes on for a few words. No line says a number the draft does not say.
3. A line noted "names: X" says X; one noted "about the previous answer" does not name it again (use he, she, \
it, there).
4. A U> line starts as an interruption whose reason (its why) is audible in its first words.
5. Keep each line about as long as its draft. Plain speech: no quotation marks, no stage directions, no word said \
twice in a row.

Answer with the lines only, in the same form, nothing else.""",
                 "ja": """\
次の対話を、実際に二人が話しているような自然な話し言葉に書き直してください（えっと、あの、なんか、言い直し、短い\
返事、終助詞）。音声合成で読み上げ、ターンテイキングのベンチマーク（{domain}）に使います。変えてよいのは言い回しだけです。

## 対話（コーパスの書式）
一行が一発話：「U: 本文」（ユーザー）、「S: 本文」（システム）、「U> {{why: 理由}} 本文」\
（直前の行へのユーザーの割り込み）。行の中の記号：{{pause}}（ユーザーが一瞬止まって続ける。「〜て、」「〜けど、」「えっと、」のように、そこで話が終われない\
所だけ。言い切った文や節の後には置かない）、{{bc: 語}}（聞き手の短いあいづち。応える言葉の直後に置き、\
質問の中や直後には置かない）、{{cut}}（ユーザーが割り込む所。その後ろにはシステムが言うはずだった続きを書く）。\
「# ...」の行は次の行への注記。
{lines}

## 規則
1. すべての行を同じ順序・同じ書き出し（U:、S:、U>）・同じ記号で残す。{{pause}} の数、{{bc: 語}} の語と順序、\
{{cut}} の有無は下書きのまま。記号は、それが応える言葉の直後に来るようにだけ動かしてよい。
2. 「answer:」の注記がある行はその答えをその表記で言う。「cut after the answer」は答えの後に {{cut}} が来て、\
その後にも少し話が続く。下書きにない数字は言わない。
3. 「names: X」の行は X を言う。「about the previous answer」の行はそれを言い直さない（「その人」「そこ」など）。
4. U> の行は割り込みとして始め、その理由（why）が最初の言葉から伝わるようにする。
5. 各行は下書きと同じくらいの長さ。かぎかっこ、ト書きは書かない。丁寧さ（です・ます／くだけた話し方）は話者ごとに\
下書きのとおり。

同じ書式の行だけで答える。ほかには何も書かない。"""}

_RETRY = {"en": """

## Your previous answer was rejected
Rule broken: {rule}: {detail}
Write the whole dialogue again from the draft and keep to every rule (attempt {attempt} of {attempts}).""",
          "ja": """

## 前の答えは不採用でした
破った規則：{rule}: {detail}
下書きからもう一度すべて書き直し、すべての規則を守ってください（{attempts} 回中 {attempt} 回目）。"""}

def _lines(d: Dialogue, knowledge: Knowledge | None) -> str:
    """The draft's written lines, each after its notes ("# answer: ...", "# names: ...")."""
    answers = [i for i, u in enumerate(d.utterances) if u.gold_answer]
    notes: dict[int, list[str]] = {}  # line -> notes
    line = -1
    for i, u in enumerate(d.utterances):
        if u.kind == "turn" and u.relation != "pause":
            line += 1
        if u.kind != "turn":
            continue
        if u.gold_answer:
            notes.setdefault(line, []).append(f"answer: {u.gold_answer}"
                                              + ("; cut after the answer" if u.cut_after_chars else ""))
        elif u.speaker == "user" and u.topic and knowledge is not None and d.domain == "task":
            answer = next((d.utterances[j] for j in answers if j > i), None)
            if answer is not None and (answer.topic, answer.fact) == (u.topic, u.fact):
                name = knowledge.entity(u.topic).name[d.language]
                if answer.follows_answer:
                    notes.setdefault(line, []).append("about the previous answer")
                elif _norm(name, d.language) in _norm(u.text, d.language):
                    notes.setdefault(line, []).append(f"names: {name}")
    out = []
    for n, text in enumerate(render(d)):
        out += [f"# {note}" for note in notes.get(n, [])] + [text]
    return "\n".join(out)


def prompt(draft: Dialogue, knowledge: Knowledge | None = None, attempt: int = 1, attempts: int = 1,
           rejected: Rejected | None = None) -> str:
    """The request for `draft`; from the second attempt on it names the rule the previous answer broke."""
    domain = {"chat": "casual chat", "task": "question answering"}[draft.domain]
    text = _PROMPT[draft.language].format(domain=domain, lines=_lines(draft, knowledge))
    if rejected is not None:
        text += _RETRY[draft.language].format(rule=rejected.rule, detail=rejected.detail, attempt=attempt,
                                              attempts=attempts)
    return text


# --- the LLM writer ---------------------------------------------------------------------------------------------

class OpenAIWriter(ChatWriter):
    """Rewrites each dialogue through an OpenAI-compatible chat endpoint; see the module docstring."""

    unit, kept, prompt_version = "dialogue", "composed", WRITER_PROMPT_VERSION

    def __init__(self, base_url: str | None = None, model: str | None = None, api_key_env: str = "OPENAI_API_KEY",
                 cache_dir: Path | str | None = None, timeout_s: float = 120.0, attempts: int = 3,
                 temperature: float = 0.7, max_tokens: int | None = None, on_failure: str = "fail",
                 json_mode: bool = False, http_attempts: int = 3, knowledge: Knowledge | None = None) -> None:
        super().__init__(base_url, model, api_key_env=api_key_env, cache_dir=cache_dir, timeout_s=float(timeout_s),
                         attempts=int(attempts), temperature=float(temperature),
                         max_tokens=int(max_tokens) if max_tokens else None, on_failure=on_failure,
                         json_mode=str(json_mode).lower() in ("1", "true", "yes"), http_attempts=int(http_attempts))
        self.knowledge = knowledge

    def _knowledge(self) -> Knowledge:
        if self.knowledge is None:
            from dataset_builder.m3.textbank import load_bank

            self.knowledge = load_bank().knowledge
        return self.knowledge

    def ask(self, draft: Dialogue, attempt: int, rejected: Rejected | None) -> str:
        return self.complete(prompt(draft, self._knowledge(), attempt, self.attempts, rejected), draft.seed + attempt)

    def write(self, dialogue: Dialogue) -> Dialogue:
        def accept(content: str) -> Dialogue:
            new = parse_rewrite(content, dialogue)
            check_rewrite(dialogue, new, self._knowledge())
            return new

        new = self.rewrite(dialogue.dialogue_id, lambda attempt, rejected: self.ask(dialogue, attempt, rejected),
                           accept)
        return dialogue if new is None else new


# --- registry and the build's entry point -----------------------------------------------------------------------

_REGISTRY = LazyRegistry("writer", {
    "template": "dataset_builder.m3.writer:TemplateWriter",
    "openai": "dataset_builder.m3.writer:OpenAIWriter",
}, option="--writer", arg_option="--writer-arg")


def writer_for_build(options: BuildOptions) -> TemplateWriter | OpenAIWriter:
    """The writer `--writer`/`--writer-arg` chose. The openai writer caches its answers next to the TTS clips
    unless told where (`cache_dir`), and not at all with `--no-cache` (as Duplex-MPE's)."""
    args = dict(options.writer_args)
    if options.writer == "openai" and "cache_dir" not in args and options.cache_dir is not None:
        args["cache_dir"] = default_cache_dir()
    return _REGISTRY.load(options.writer, **args)


def write_dialogues(writer: TemplateWriter | OpenAIWriter, dialogues: Sequence[Dialogue]) -> list[Dialogue]:
    """`dialogues` with their texts written by `writer`, in order."""
    return [writer.write(d) for d in dialogues]
