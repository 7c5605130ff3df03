"""The authored M3 chat corpus (dataset_builder/m3/corpus.py, texts/README.md "Chat corpus"): the reader turns its
marks into the utterances the timeline places, each rule refuses what it is for naming file:line, the backchannel
rule (bc_functions.py) knows what fits what, a backchannel is placed right after the words it answers, and the
shipped corpus is complete and clean."""
# ruff: noqa: E501  (the corpus format writes one line of speech a line, however long)

from __future__ import annotations

import random
from pathlib import Path

import pytest

from dataset_builder.m3.bc_functions import FUNCTIONS, fit_problem, host_class, load_words
from dataset_builder.m3.corpus import (
    CorpusError,
    corpus_dialogues,
    mini_dialogue,
    read_corpus,
    to_dialogue,
)
from dataset_builder.m3.dialogues import PRESETS
from dataset_builder.m3.timeline import place
from dataset_builder.rules.m3_timing_stats import default_stats

EN = """\
## en-chat-001
situation: Two neighbours at the bins on a Saturday morning after a storm.
user: Dev, 39, owns the blue house; his shed is at the bottom of the garden.
system: Ruth, 62, retired postwoman next door.
storyline: the flooded path -> Dev's shed -> borrowing Ruth's pump.

U: Morning, Ruth. Did you see the path? It's basically a river down there.
S: I saw it at six. The drain by the gate has been blocked since the autumn,{bc: mm-hmm} and nobody from the council ever comes.
U: Well, it got into my shed as well. All my tools are sitting in about, um, {pause} four inches of muddy water.
S: Oh, Dev, that's rotten luck. I've still got the little pump my husband bought in the winter of {cut} two thousand and seven, when the street went under...
U> {why: he needs exactly that} A pump? Could I borrow it this afternoon? I'll bring it straight back.
S: Of course you can. It's in the garage by the freezer,{bc: okay} so just knock when you're ready.
U: Brilliant, thank you. And the tomatoes are ripe, so I'll, uh, {pause} bring you a bag of them at two.
S: Lovely. My grandson is coming at three,{bc: oh nice} so that's perfect timing, honestly.
U: Great. I'll go and find some gloves now,{bc: good} because that shed smells awful already.
S: Take the old blue ones from the porch. Nobody's worn them since the summer before last.
U: Thanks, Ruth. The path will have to wait until the council finally comes round to fix that drain.
S: Don't hold your breath. I've rung them four times since October and they still haven't come.
U: Then I'll ring them too. Five calls might get somebody out here before the next storm.
S: Let's hope so. Right, I'm going in before I freeze, see you at two.
"""

JA = """\
## ja-chat-001
situation: 大学時代の友人同士が日曜の夜に電話で話している。
user: 健太、三十歳、会社員。来週の土曜に引っ越す。
system: 翔、三十歳、軽トラックを持っている。
storyline: 引っ越しの準備 -> 段ボールが足りない -> 土曜の手伝いの約束
register: casual

U: もしもし、翔？ちょっと相談があるんだけど、今いい？
S: いいよ。引っ越し、来週の土曜なんでしょ。うちの兄貴も去年引っ越したけど、{bc: うん} 準備に一か月かかったって言ってた。
U: それがさ、段ボールが全然足りなくて、{pause} 本だけでもあと十箱はいりそうなんだよね。
S: あー、本は重いからね。駅前のスーパーで、夕方に行くと {cut} 空いた箱を好きなだけもらえるって聞いたよ。
U> {why: もう試したので、すぐに伝えたい} あ、それもう行った！でも小さい箱しかなかったんだよ。
S: そっか。じゃあ土曜は朝から軽トラで行くから、{bc: ほんとに} 足りないぶんは向こうで考えよう。
U: ほんとに助かる。じゃあ前の晩に、{pause} 冷蔵庫の中だけは空っぽにしておくね。
S: うん、それがいいよ。あと、洗濯機の水抜きも忘れないようにね、{bc: うんうん} 前の日の夜にやっとくと楽だから。
U: 水抜きか、全然知らなかった。ネットで調べとく。
S: 簡単だよ。ホースを外して、{bc: うん} バケツに水を出すだけだから。
U: わかった。お礼に、終わったら新しい部屋でピザでも頼もうよ。
S: いいね、じゃあ一番大きいやつにしよう。飲み物は俺が持ってくわ。
U: ありがとう。じゃあ土曜の朝、九時に駅で待ってるね。
S: 了解、九時ね。遅れそうだったら電話するから。
"""


def _root(tmp_path: Path, en: str = EN, ja: str = JA) -> Path:
    for lang, text in (("en", en), ("ja", ja)):
        folder = tmp_path / lang / "chat" / "corpus"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "001-050.txt").write_text(text, encoding="utf-8")
    return tmp_path


def _errors(tmp_path: Path, lang: str, old: str, new: str) -> list[str]:
    text = {"en": EN, "ja": JA}[lang]
    assert old in text, old
    root = _root(tmp_path, **{lang: text.replace(old, new, 1)})
    return [str(p) for p in read_corpus(lang, root)[2].errors]


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_the_handmade_conversations_are_clean(tmp_path: Path, lang: str) -> None:
    convs, mini, problems = read_corpus(lang, _root(tmp_path))
    assert [str(p) for p in problems.items] == [] and mini is None
    assert [c.conv_id for c in convs] == [f"{lang}-chat-001"]


def test_the_reader_turns_marks_into_utterances(tmp_path: Path) -> None:
    (conv,), _, _ = read_corpus("en", _root(tmp_path))
    d = to_dialogue(conv, seed=3)
    assert d.dialogue_id == "en-chat-d001" and d.index == 1 and d.domain == "chat"
    assert d.topics == ("the flooded path", "Dev's shed", "borrowing Ruth's pump.")
    rows = [(u.speaker, u.kind, u.relation) for u in d.utterances[:9]]
    assert rows == [("user", "turn", "first"), ("system", "turn", "shift"), ("user", "bc", "bc"),
                    ("user", "turn", "shift"), ("user", "turn", "pause"),  # {pause}: two TURNs
                    ("system", "turn", "shift"), ("user", "turn", "barge_in"),  # {cut} then U>
                    ("system", "turn", "shift"), ("user", "bc", "bc")]
    host, bc = d.utterances[1], d.utterances[2]
    assert host.text.endswith("council ever comes.") and "{" not in host.text and "  " not in host.text
    assert host.text[:bc.bc_at_chars].endswith("since the autumn,") and bc.text == "mm-hmm"
    first, second = d.utterances[3], d.utterances[4]
    assert first.text.endswith("sitting in about, um,") and second.text == "four inches of muddy water."
    cut = d.utterances[5]
    assert cut.text[:cut.cut_after_chars].endswith("in the winter of") and "{cut}" not in cut.text
    barge = d.utterances[6]
    assert barge.why == "he needs exactly that" and barge.text.startswith("A pump?")  # the reason is not spoken
    assert all(u.utt_id == f"en-chat-d001-u{i:02d}" for i, u in enumerate(d.utterances))
    ja = to_dialogue(read_corpus("ja", _root(tmp_path))[0][0])
    assert ja.utterances[1].text == "いいよ。引っ越し、来週の土曜なんでしょ。うちの兄貴も去年引っ越したけど、準備に一か月かかったって言ってた。"
    assert ja.utterances[1].text[:ja.utterances[2].bc_at_chars].endswith("引っ越したけど、")
    assert ja.utterances[3].text == "それがさ、段ボールが全然足りなくて、" and ja.utterances[4].relation == "pause"


@pytest.mark.parametrize("lang, old, new, rule", [
    ("en", "about, um, {pause} four inches", "about four inches of water, {pause} all", "PAUSE after a complete"),
    ("en", "so I'll, uh, {pause} bring", "so I'll bring a bag, {pause} of", "PAUSE after a complete"),
    ("en", "sitting in about, um, {pause} four", "sitting in about, um, four", "{pause} marks"),  # one is too few
    ("en", "the autumn,{bc: mm-hmm} and", "the autumn, and", "{bc:} marks in S lines"),
    ("en", "U: Morning, Ruth.", "U: {bc: yeah} Morning, Ruth.", "never at the very start"),
    ("en", "It's in the garage by the freezer,{bc: okay} so", "Is it in the garage by the freezer?{bc: okay} So",
     "in or right after a question"),
    ("en", "It's in the garage by the freezer,{bc: okay} so", "Just come and get it from the garage,{bc: no way} so",
     "does not fit request"),
    ("en", "three,{bc: oh nice} so", "three,{bc: blah blah} so", "not in texts/en/chat/backchannel_words.yaml"),
    ("en", "U: Brilliant, thank you.", "S: Brilliant, thank you.", "speakers alternate"),
    ("en", "Oh, Dev, that's rotten luck. I've still got the little pump my husband bought in the winter of {cut}",
     "Oh, Dev, {cut} that's rotten luck. I've still got the little pump my husband bought in the winter of",
     "{cut} after at least"),
    ("en", "U> {why: he needs exactly that} A pump?", "U: A pump?", "the user's barge-in"),
    ("en", "U> {why: he needs exactly that}", "U> {why: }", "starts with {why: reason}"),
    ("en", "U: Then I'll ring them too. Five calls might get somebody out here before the next storm.", "U: So?",
     "at least 3"),
    ("en", "see you at two.", "see you at two?", "the last line is not a question"),
    ("en", "situation: Two neighbours", "where: Two neighbours", "header 'situation:' missing"),
    ("ja", "足りなくて、{pause} 本だけ", "足りないんだ、{pause} 本だけ", "PAUSE after a complete"),
    ("ja", "register: casual", "register: polite", "casual in a polite conversation"),
    ("ja", "じゃあ土曜は朝から軽トラで行くから、{bc: ほんとに}", "健太はそういうの得意だもんね、{bc: へえー}",
     "does not fit compliment"),
    ("ja", "{bc: うんうん}", "{bc: はい}", "polite in a casual conversation"),
])
def test_each_rule_names_the_line(tmp_path: Path, lang: str, old: str, new: str, rule: str) -> None:
    errors = _errors(tmp_path, lang, old, new)
    assert any(rule in e and "001-050.txt:" in e for e in errors), errors


def test_a_storyline_told_twice_and_an_id_out_of_range(tmp_path: Path) -> None:
    second = EN.replace("en-chat-001", "en-chat-002")
    root = _root(tmp_path, en=EN + "\n" + second + "\n" + EN.replace("en-chat-001", "en-chat-060"))
    errors = [str(p) for p in read_corpus("en", root)[2].errors]
    assert any("storyline also told in en-chat-001" in e for e in errors), errors
    assert any("en-chat-060 is outside the file's range 001-050" in e for e in errors), errors


@pytest.mark.parametrize("before, lang, cls", [
    ("Could you come and meet her on Sunday,", "en", "request"),
    ("I finally got the job,", "en", "news"),
    ("You're so good at this,", "en", "compliment"),
    ("The boiler's broken again,", "en", "bad_news"),
    ("I went to the market on Saturday,", "en", "telling"),
    ("Don't panic. Nobody buys the blazer,", "en", "telling"),  # the sentence it follows, not the one before
    ("今度うちに来て、彼女に会ってくれない？", "ja", "request"),
    ("ついに内定が決まったんだ、", "ja", "news"),
    ("美咲、そういうの得意じゃん、", "ja", "compliment"),
    ("母が入院しちゃって、", "ja", "bad_news"),
    ("昨日、駅前の本屋に行ったんだけど、", "ja", "telling"),
])
def test_what_the_words_before_a_backchannel_do(before: str, lang: str, cls: str) -> None:
    assert host_class(before, lang) == cls


@pytest.mark.parametrize("word, before, lang, fits", [
    ("no way", "Could you come and meet her on Sunday,", "en", False),  # surprise to a request
    ("sure", "Could you come and meet her on Sunday,", "en", True),
    ("oh no", "I finally got the job,", "en", False),  # sympathy to good news
    ("no way", "I finally got the job,", "en", True),
    ("ha", "The boiler's broken again,", "en", False),  # a laugh at bad news
    ("oh no", "The boiler's broken again,", "en", True),
    ("yeah", "You're so good at this,", "en", False),  # a compliment is thanked or waved off
    ("thanks", "You're so good at this,", "en", True),
    ("mm-hmm", "I went to the market on Saturday,", "en", True),
    ("she does", "She looks about nineteen.", "en", True),  # a reply that says it back
    ("へえー", "今度うちに来て、彼女に会ってくれない？", "ja", False),
    ("うん", "今度うちに来て、彼女に会ってくれない？", "ja", True),
    ("いやいや", "美咲、そういうの得意じゃん、", "ja", True),
    ("うん", "美咲、そういうの得意じゃん、", "ja", False),
    ("へえー", "ついに内定が決まったんだ、", "ja", True),
    ("あらら", "ついに内定が決まったんだ、", "ja", False),
    ("あらら", "母が入院しちゃって、", "ja", True),
])
def test_a_backchannel_word_fits_what_it_answers(word: str, before: str, lang: str, fits: bool) -> None:
    assert (fit_problem(word, before, lang) is None) is fits, fit_problem(word, before, lang)


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_the_backchannel_word_lists(lang: str) -> None:
    words = load_words(lang)
    assert all(f in FUNCTIONS for fs in words.values() for f in fs)
    assert {"yes", "no"} <= set(words) if lang == "en" else "うん" in words  # YAML's yes/no read as words


def test_a_backchannel_is_placed_right_after_the_words_it_answers(tmp_path: Path) -> None:
    d = to_dialogue(read_corpus("en", _root(tmp_path))[0][0])
    host, bc = d.utterances[1], d.utterances[2]
    clips = {u.utt_id: (400 if u.kind == "bc" else 40 * len(u.text)) for u in d.utterances}
    at = round(clips[host.utt_id] * bc.bc_at_chars / len(host.text))
    for seed in range(10):
        by = place(d, clips, default_stats("en", "chat"), random.Random(seed)).by_id()
        start = by[bc.utt_id].start_ms - by[host.utt_id].start_ms
        assert at <= start <= at + 400, (seed, at, start)  # after the words, late by at most BC_AT_LAG_MS


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_the_mini_conversation(lang: str) -> None:
    d = mini_dialogue(lang)
    assert d.index == 0 and {"pause", "bc", "barge_in"} <= {u.relation for u in d.utterances if u.speaker == "user"}


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_the_shipped_corpus_is_complete_and_clean(lang: str) -> None:
    convs, _, problems = read_corpus(lang)
    assert [str(p) for p in problems.errors] == []
    assert [c.number for c in convs] == list(range(1, PRESETS["full"] + 1))
    assert len(corpus_dialogues(lang, PRESETS["full"])) == PRESETS["full"]
    with pytest.raises(CorpusError, match="conversations; 201 asked for"):
        corpus_dialogues(lang, PRESETS["full"] + 1)
