"""The M3 text rules (dataset_builder/m3/speech_forms.py) on known answers: doubled words, Japanese register by
sentence-final forms, complete vs unfinished sentences before a held pause, questions where a backchannel would
fall; the build-time check naming the dialogue and turn; and slot fills that never double an article."""

from __future__ import annotations

import random

import pytest

from dataset_builder.m3.dialogues import Dialogue, DialogueUtterance, _bc_room, _fill
from dataset_builder.m3.language import LANGUAGES
from dataset_builder.m3.speech_forms import (
    CASUAL,
    POLITE,
    bc_in_question,
    check_dialogue,
    clause_register,
    complete_sentence,
    dialogue_problems,
    doubled_words,
    question_at,
    question_spans,
    repeated_markers,
    turn_register,
    unfinished,
    without_repeated_marker,
)
from dataset_builder.m3.timeline import place
from dataset_builder.rules.m3_timing_stats import default_stats
from dataset_builder.schema import SchemaError


@pytest.mark.parametrize("text, lang, found", [
    ("Right, I need to catch the next the ferry.", "en", ["the next the"]),
    ("Yes, the the neighbor's cat struck again.", "en", ["the the"]),
    ("Is it a good idea to buy an the guitar online?", "en", ["an the"]),
    ("I dug out my my old guitar.", "en", ["my my"]),
    ("Is this a long-term place for you?", "en", []),  # a demonstrative before an article is fine
    ("Which country would I have to go to to see Big Ben?", "en", []),  # grammatical
    ("Wait, wait, who is it by?", "en", []),  # a comma between: meant
    ("J. R. R. Tolkien wrote it.", "en", []),
    ("I was so so tired.", "en", []),  # "so so" is said on purpose
    ("We went to to the park.", "en", []),
    ("I saw it it was great.", "en", ["it it"]),
    ("学生のときのときも一か月くらいネットなしだったよ。", "ja", ["のときのとき"]),
    ("横浜横浜に行った。", "ja", ["横浜横浜"]),
    ("本をを読んだ。", "ja", ["をを"]),
    ("家でできる運動を探してるんです。", "ja", []),  # で + できる
    ("あはは、やるね。", "ja", []),
    ("最後はバタバタしてしまいました。", "ja", []),  # a sound-symbolic word
    ("行く行く、空いてる日送るね。", "ja", []),
    ("大丈夫大丈夫、ただの爪切りなんだ。", "ja", []),
])
def test_doubled_words(text: str, lang: str, found: list[str]) -> None:
    assert doubled_words(text, lang) == found


@pytest.mark.parametrize("clause, register", [
    ("関係ない話で申し訳ないんですけど、", POLITE),
    ("普段ご飯ってどうしてる？", CASUAL),
    ("今度の連休に引っ越すんだ。", CASUAL),
    ("楽しかったです。", POLITE),
    ("何泊されたんですか？", POLITE),
    ("大したものじゃないんだけど、", CASUAL),
    ("いいね、", CASUAL),
    ("決めるのに、", ""),  # a subordinate clause: polite speech uses plain forms there too
    ("勉強するの、", ""),
    ("久しぶりだったので、", ""),
    ("真似してみようかな。", ""),  # musing: both registers
    ("お休みの間、", ""),
    ("はい、", ""),
])
def test_clause_register(clause: str, register: str) -> None:
    assert clause_register(clause) == register


@pytest.mark.parametrize("text, register", [
    ("関係ない話で申し訳ないんですけど、ねえ、普段ご飯ってどうしてる？", "mixed"),  # the seam
    ("すみません、ちょっといいですか、一人で来てるお客さんも多くて、気軽に入れる雰囲気だった。", "mixed"),
    ("しそなんですけど、思ったより元気に育ってくれてます。何を植えるか決めるのに、本やネットで調べました。", POLITE),
    ("あ、それで思い出したんだけど、週末に博物館行ってきたんだよ。", CASUAL),
    ("会社の休憩室で勉強するの、いいですね。", POLITE),
    ("三泊四日で、", ""),
])
def test_turn_register(text: str, register: str) -> None:
    assert turn_register(text) == register


@pytest.mark.parametrize("text, lang, complete", [
    ("I love it.", "en", True),
    ("Did you see it?", "en", True),
    ("I love it,", "en", True),  # a complete clause, whatever the punctuation
    ("and then, um...", "en", False),
    # The PAUSE rule: refused after a complete sentence or clause, a trailing comma or not ...
    ("I'll try that,", "en", True),
    ("Ah, right, 49,", "en", True),  # an answer, not a list in progress
    ("About ten minutes in the camera just froze,", "en", True),
    ("she's the most nervous creature I have ever met", "en", True),
    # ... allowed where the speaker cannot stop: mid-clause, a filler, a list, a conjunction or preposition.
    ("and she's, um,", "en", False),
    ("because", "en", False),
    ("because the thing is", "en", False),
    ("I was going to say", "en", False),
    ("eggs, flour,", "en", False),  # a list in progress
    ("Dad was, um,", "en", False),
    ("and I was thinking,", "en", False),
    ("Even if they each take five,", "en", False),  # a clause waiting for its main clause
    ("and when did he die,", "en", True),  # a question, not a "when" clause
    ("and when I got there,", "en", False),
    ("Oh, and out of interest,", "en", False),
    ("Okay, C. S. Lewis,", "en", True),  # an echo of one name, not a list of three
    ("and somewhere around row sixty", "en", False),
    ("and the bus from the terminal", "en", False),  # a subject still waiting for its verb
    ("and I'm worried that if I stop now", "en", False),
    ("I'll come along if it helps,", "en", True),
    ("Oh, Russia, that makes sense,", "en", True),  # a reaction, not a list
    ("Wow, the Seine,", "en", True),  # an echo
    ("Got it, thanks,", "en", True),
    ("Good to know,", "en", True),
    ("Oh, the United Kingdom, okay,", "en", True),
    ("Right, so uranium,", "en", True),  # an answer taken in: the listener may go on
    ("Right, so Lucca,", "en", True),
    ("Hm, 1982,", "en", True),  # an echo after "hm" too, not a list in progress
    ("Hm, Franz Liszt,", "en", True),
    ("so, uh,", "en", False),
    ("Also, I've always wondered,", "en", False),  # announces the question to come
    ("Right, moving on,", "en", False),
    ("へえ、1889年か、", "ja", True),  # a musing reaction
    ("パンとか、", "ja", False),
    ("来年に回すか、", "ja", False),  # "either ... or": goes on
    ("前回は確か、", "ja", False),
    ("not on the bed, not", "en", False),
    ("I've got about, let me see,", "en", False),
    ("though, so she'd", "en", False),
    ("the thing with the car,", "en", False),
    ("so, uh,", "en", False),
    ("そうなんだ、", "ja", True),
    ("行ってきました、", "ja", True),
    ("行ってきた、", "ja", True),
    ("うん、", "ja", True),
    ("〜て、", "ja", False),
    ("バスが遅れて、", "ja", False),
    ("行ってみたんだけど、", "ja", False),
    ("課長って話があっちこっち飛ぶから、", "ja", False),
    ("せっかくだから、なんかこう、", "ja", False),  # a filler
    ("えっと、", "ja", False),
    ("で、", "ja", False),
    ("それでさ、もう一枚のほう、", "ja", False),  # a noun said first
    ("今度の連休に引っ越すんだ。", "ja", True),
    ("今度の連休に引っ越すんだ、", "ja", True),  # a sentence-final form before a comma still ends it
    ("引っ越しの準備でばたばたしてて、", "ja", False),
    ("申し訳ないんですけど、", "ja", False),
    ("そういえば、", "ja", False),
    ("あ、1930年なんですか、", "ja", True),
])
def test_complete_sentence_and_unfinished(text: str, lang: str, complete: bool) -> None:
    assert complete_sentence(text, lang) is complete
    assert unfinished(text, lang) is (not complete)


def test_questions_and_where_a_backchannel_falls() -> None:
    en = LANGUAGES["en"]
    host = "That's the best way, people appreciate the effort. Did you try to learn any of the language before?"
    assert question_spans(host, "en") == [(51, len(host))]
    assert bc_in_question(host, "en")  # 15-85 % of the host reaches into the question
    assert not bc_in_question(host, "en", before_chars=51)  # ending before it: a telling
    assert _bc_room(en, host) == 51  # a backchannel may go in the first 51 characters
    assert _bc_room(en, "Are you a night reader or a morning reader, or neither really?") is None
    assert _bc_room(en, "That's lucky, usually it's the other way round, honestly.") == 0
    assert _bc_room(en, "Ha, how big is it?") is None
    assert question_spans("旅行はどうでしたか。楽しかったです。", "ja") == [(0, 10)]
    # か。 after a plain form muses, "そうでしたか。" acknowledges, "すごいじゃないですか。" exclaims: no question.
    assert question_spans("まあ新人の頃を思えばましか。そうでしたか。すごいじゃないですか。", "ja") == []
    assert question_spans("まあ、そうなんですか。本当ですか。どうですか。", "ja") == [(17, 23)]
    assert question_at("Did you go? I did.", 11, "en") and not question_at("I did. Did you go?", 6, "en")
    assert question_at("それ、どうしてる？うちは", 9, "ja") and question_at("週末、行かない？", 3, "ja")


def _utts(did: str, rows: list[tuple[str, str, str, str]]) -> list[DialogueUtterance]:
    return [DialogueUtterance(f"{did}-u{i:02d}", sp, kind, text, rel) for i, (sp, kind, text, rel) in enumerate(rows)]


def test_dialogue_problems_and_the_build_time_check() -> None:
    utts = _utts("ja-chat-d007", [
        ("user", "turn", "週末は何をされてたんですか？", "first"),
        ("system", "turn", "家でゆっくりしてました、そちらはどうでしたか？", "shift"),
        ("user", "bc", "うん", "bc"),  # a casual backchannel from a polite speaker
        ("user", "turn", "関係ない話で申し訳ないんですけど、ねえ、普段ご飯ってどうしてる？", "shift"),
    ])
    problems = dialogue_problems("ja-chat-d007", "ja", utts)
    assert [(p.utt_id, p.rule) for p in problems] == [
        ("ja-chat-d007-u02", "user speaks casual after polite (ja-chat-d007-u00)"),
        ("ja-chat-d007-u03", "turn mixes polite and casual sentence endings")]
    assert dialogue_problems("ja-chat-d007", "ja", utts, register_rules=False) == []
    with pytest.raises(SchemaError) as err:
        check_dialogue("ja-chat-d007", "ja", utts)
    assert "ja-chat-d007" in str(err.value) and "u02" in str(err.value) and "(and 1 more)" in str(err.value)
    en = _utts("en-chat-d069", [("user", "turn", "Right, I need to catch the next the ferry.", "first")])
    with pytest.raises(SchemaError, match=r"dialogue en-chat-d069.*u00.*doubled word 'the next the'"):
        check_dialogue("en-chat-d069", "en", en)


@pytest.mark.parametrize("template, values, said", [
    ("Right, I need to catch the next {t}.", {"t": "the ferry"}, "Right, I need to catch the next ferry."),
    ("Is it a good idea to buy an {i} online?", {"i": "the guitar"}, "Is it a good idea to buy a guitar online?"),
    ("So I caved and bought a new {d}.", {"d": "the printer"}, "So I caved and bought a new printer."),
    ("Really well, except for the {p}.", {"p": "a very determined squirrel"},
     "Really well, except for the very determined squirrel."),
    ("It's quicker than {t}.", {"t": "the bus"}, "It's quicker than the bus."),  # no article before: kept
    ("That was {value}.", {"value": "the Wright brothers"}, "That was the Wright brothers."),
    ("A {x} at last.", {"x": "the apple"}, "An apple at last."),
])
def test_slot_fills_never_double_an_article(template: str, values: dict[str, str], said: str) -> None:
    assert _fill(template, values) == said


def test_a_backchannel_before_a_question_is_placed_in_the_telling() -> None:
    host = "That's the best way, people appreciate the effort. Did you try to learn any of the language before?"
    did = "en-chat-d000"
    utts = [DialogueUtterance(f"{did}-u00", "user", "turn", "I learned a few phrases before the trip.", "first"),
            DialogueUtterance(f"{did}-u01", "system", "turn", host, "shift"),
            DialogueUtterance(f"{did}-u02", "user", "bc", "mm-hm", "bc", bc_before_chars=51),
            DialogueUtterance(f"{did}-u03", "user", "turn", "Barely, I mostly pointed and smiled.", "shift")]
    d = Dialogue(did, "en", "chat", 0, 0, ("trip",), tuple(utts))
    d.validate()
    clips = {"en-chat-d000-u00": 2000, "en-chat-d000-u01": 6000, "en-chat-d000-u02": 400, "en-chat-d000-u03": 1800}
    for seed in range(20):
        tl = place(d, clips, default_stats("en", "chat"), random.Random(seed))
        by = tl.by_id()
        host_at, bc = by["en-chat-d000-u01"], by["en-chat-d000-u02"]
        # 51 of the host's 99 characters take 51/99 of its 6 s: the backchannel ends by then.
        assert bc.end_ms <= host_at.start_ms + round(6000 * 51 / len(host)), seed


@pytest.mark.parametrize("text, lang, found", [
    ("Okay, got it, okay, and when was the inventor born?", "en", ["okay"]),
    ("Sorry, not to interrupt, but and what year did he die?", "en", ["but and"]),
    ("Sorry to interrupt, but it's a sad question, but when did the composer die?", "en", ["but ... but"]),
    ("I should know this, but which city is it in?", "en", []),
    ("Sorry, sorry, and one place further, which element is that?", "en", []),  # side by side: meant
    ("I know, I know, I'll sort it out this weekend.", "en", []),
    ("so the tower, when did it open its doors, so to speak?", "en", []),  # an idiom, not a lead-in
    ("So, I'm planning a trip, so Claude Debussy, where was he born?", "en", ["so"]),
    ("あ、ダブリンなんですか、あ、それから、その街の川って？", "ja", ["あ"]),
    ("あ、1884年なんですか、なるほど、それと、生まれたのは？", "ja", []),
])
def test_repeated_markers(text: str, lang: str, found: list[str]) -> None:
    assert repeated_markers(text, lang) == found


@pytest.mark.parametrize("lead, text, lang, said", [
    ("Okay, got it,", "Okay, and when did {x} die?", "en", "and when did {x} die?"),
    ("So, I'm planning a trip,", "so {entity}, where was he born?", "en", "{entity}, where was he born?"),
    ("Huh, 1936,", "Okay, and when was the author born?", "en", "Okay, and when was the author born?"),  # new marker
    ("あ、ダブリンなんですか、", "あ、それから、その街の川って？", "ja", "それから、その街の川って？"),
])
def test_a_marker_the_lead_in_said_is_not_said_again(lead: str, text: str, lang: str, said: str) -> None:
    assert without_repeated_marker(lead, text, lang) == said
