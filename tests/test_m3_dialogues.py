"""M3 task dialogues (dataset_builder/m3/dialogues.py) and the gold answers of the knowledge base: seeded and
prefix-stable, valid records that round-trip through JSON, the structure DESIGN.md promises, golds re-derived from
the facts, aliases that no wrong answer contains, and lead-ins that fit (no topic change on a follow-up, no answer
asked back). Chat dialogues are authored: tests/test_m3_corpus.py."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable

import pytest

from dataset_builder.m3.dialogues import (
    PRESETS,
    SHAPE,
    Dialogue,
    DialogueUtterance,
    _held_bc_room,
    _one_stop,
    _value_at,
    _word_cut,
    connective_problems,
    generate,
    generate_dialogues,
)
from dataset_builder.m3.knowledge import Fact, gold, said, year_words
from dataset_builder.m3.language import LANGUAGES
from dataset_builder.m3.textbank import bank_languages, checked_bank, load_bank, missing_files
from dataset_builder.mpe.answers import unsafe_aliases
from dataset_builder.schema import SchemaError

LANGS = [code for code in bank_languages() if not missing_files(code)]
CONFIGS = [(lang, "task") for lang in LANGS]
N = 40  # dialogues per config for the structural checks (the full preset is tests/test_m3_diversity.py)


@pytest.fixture(scope="module")
def dialogues() -> dict[tuple[str, str], list[Dialogue]]:
    return {(lang, domain): generate_dialogues(lang, domain, N) for lang, domain in CONFIGS}


def test_seeded_deterministic_and_prefix_stable() -> None:
    fresh = checked_bank(["en"])  # a bank of its own: no cached draws are shared
    again = checked_bank(["en"])
    for domain in ("task",):
        a = generate_dialogues("en", domain, 6, seed=3, bank=fresh)
        b = generate_dialogues("en", domain, 6, seed=3, bank=again)
        assert [d.to_dict() for d in a] == [d.to_dict() for d in b]
        assert [d.to_dict() for d in generate_dialogues("en", domain, 3, seed=3, bank=checked_bank(["en"]))] == \
            [d.to_dict() for d in a[:3]]  # the first n are the same whatever the preset
        assert generate("en", domain, 4, seed=3, bank=fresh) == a[4]
        other = generate_dialogues("en", domain, 6, seed=4, bank=fresh)
        assert [d.utterances for d in other] != [d.utterances for d in a]
    assert PRESETS == {"mini": 1, "full": 200}
    with pytest.raises(ValueError, match="authored"):
        generate_dialogues("en", "chat", 1)


@pytest.mark.parametrize("lang, domain", CONFIGS)
def test_records_validate_and_round_trip_json(dialogues: dict, lang: str, domain: str) -> None:
    for d in dialogues[lang, domain]:
        d.validate()
        back = Dialogue.from_dict(json.loads(json.dumps(d.to_dict(), ensure_ascii=False)))
        assert back == d
        assert d.dialogue_id == f"{lang}-{domain}-d{d.index:03d}"


def _user_events(d: Dialogue) -> Counter[str]:
    return Counter(u.relation for u in d.utterances if u.speaker == "user")


@pytest.mark.parametrize("lang, domain", CONFIGS)
def test_shape_of_a_dialogue(dialogues: dict, lang: str, domain: str) -> None:
    bank = load_bank((lang,)).language(lang)
    language = LANGUAGES[lang]
    bcs = {t for side in bank.backchannels.values() for t in side}
    openers = list(bank.barge_in)
    without_bc = 0
    for d in dialogues[lang, domain]:
        most = max(n for n, _ in SHAPE.task_entities)  # entities run short
        assert 2 <= len(d.topics) <= most and len(set(d.topics)) == len(d.topics)
        assert 12 <= len(d.utterances) <= 40, (d.dialogue_id, len(d.utterances))
        assert 1 <= d.count("barge_in") <= 3, d.dialogue_id
        assert _user_events(d)["pause"] >= 1, d.dialogue_id
        without_bc += not _user_events(d)["bc"]
        turns = [u for u in d.utterances if u.kind == "turn"]
        for u in d.utterances:
            if u.kind == "bc":
                assert u.text in bcs and language.bc_problem(u.text) is None
            else:
                assert language.size(u.text) >= language.half_min, u.text
            if u.relation == "barge_in" and lang == "en":
                assert any(u.text.startswith(o.rstrip(",")[:6]) for o in openers), u.text
        assert turns[0].speaker == "user"
    assert without_bc == 0, without_bc  # every dialogue has a user backchannel
    firsts = [d for d in dialogues[lang, domain] if d.index == 0]
    events = _user_events(firsts[0])
    # The mini preset is the first dialogue: it has every event the timeline and the oracle tests need.
    assert events["shift"] and events["pause"] and events["bc"] and events["barge_in"], (firsts[0].dialogue_id, events)


@pytest.mark.parametrize("lang", LANGS)
def test_follow_ups_keep_their_entity_and_answers_are_not_asked_back(dialogues: dict, lang: str) -> None:
    for d in dialogues[lang, "task"]:
        assert connective_problems(d) == [], d.dialogue_id


@pytest.mark.parametrize("lang, follow_up, echo, bad", [
    ("en", "By the way, when was it finished?", "", 1),  # a topic change said about the same tower
    ("en", "Okay, and when was it finished?", "", 0),
    ("en", "Oh, 1889? And how tall is it?", "1889", 1),  # the answer asked back
    ("en", "Oh, 1889, okay. And how tall is it?", "1889", 0),
    ("ja", "ところで、いつ完成したんですか？", "", 1),
    ("ja", "それで、いつ完成したんですか？", "", 0),
    ("ja", "へえ、1889年なんですか、高さはどのくらいですか？", "1889年", 1),
    ("ja", "へえ、1889年なんですね、高さはどのくらいですか？", "1889年", 0),
])
def test_connective_rules_known_answers(lang: str, follow_up: str, echo: str, bad: int) -> None:
    did = f"{lang}-task-d000"
    utts = [DialogueUtterance(f"{did}-u00", "user", "turn", "so how tall is the tower then", "first", topic="t"),
            DialogueUtterance(f"{did}-u01", "system", "turn", "It was finished in 1889, I think.", "shift",
                              topic="t", fact="completed", gold_answer=echo or "1889"),
            DialogueUtterance(f"{did}-u02", "user", "turn", follow_up, "shift", topic="t")]
    d = Dialogue(did, lang, "task", 0, 1, ("t",), tuple(utts))
    assert len(connective_problems(d)) == bad, connective_problems(d)
    other = Dialogue(did, lang, "task", 0, 1, ("t", "u"), (*utts[:2], DialogueUtterance(
        f"{did}-u02", "user", "turn", follow_up, "shift", topic="u")))  # another entity: a topic change is right
    assert len(connective_problems(other)) == (1 if echo and bad else 0)


@pytest.mark.parametrize("lang", LANGS)
def test_task_questions_follow_ups_and_golds(dialogues: dict, lang: str) -> None:
    kb = load_bank((lang,)).knowledge
    for d in dialogues[lang, "task"]:
        answers = [u for u in d.utterances if u.gold_answer]
        by_entity: dict[str, list[DialogueUtterance]] = {}
        for u in answers:
            by_entity.setdefault(u.topic, []).append(u)
        assert list(by_entity) == list(d.topics)
        assert len({u.gold_answer for u in answers}) == len(answers)  # no gold answer twice in a dialogue
        previous: DialogueUtterance | None = None
        for entity_id, said_answers in by_entity.items():
            entity = kb.entity(entity_id)
            first = said_answers[0]
            # The first question names the entity, unless it asks about the previous answer ("And when was she
            # born?"): then the entity is the one that answer named.
            if first.follows_answer:
                assert previous is not None and kb.link(kb.entity(previous.topic).facts[previous.fact]) == entity
            assert first.context_dependent == first.follows_answer
            assert all(u.context_dependent and not u.follows_answer for u in said_answers[1:])
            assert len(said_answers) - 1 <= 3  # at most 3 follow-ups
            assert len({u.fact for u in said_answers}) == len(said_answers)  # no fact asked twice
            for u in said_answers:
                fact = entity.facts[u.fact]
                assert (u.gold_answer, list(u.gold_aliases)) == kb.gold(entity, u.fact, lang)
                value = said(fact, lang).lower()
                assert value in u.text.lower()  # the reference answer says the gold
                if u.cut_after_chars:  # a barge-in comes after the answer has been said, whole
                    assert value in u.text[:u.cut_after_chars].lower()
                    assert not (lang == "en" and u.text[u.cut_after_chars:][:1].isalnum()), u.text
            previous = said_answers[-1]
        # every answer follows a user question about the same fact; a question about the previous answer does
        # not name its entity (a reaction may echo the answer: "Oh, Jane Austen, okay, when was she born?")
        said_before = ""
        for i, u in enumerate(d.utterances):
            if u.gold_answer:
                question = [q for q in d.utterances[:i] if q.kind == "turn" and q.speaker == "user"][-1]
                assert (question.topic, question.fact) == (u.topic, u.fact)
                if u.follows_answer:
                    asked = question.text.lower().replace(said_before.lower(), "", 1)
                    assert kb.entity(u.topic).name[lang].lower() not in asked, question.text
                said_before = said(kb.entity(u.topic).facts[u.fact], lang)


def test_knowledge_golds_and_safe_aliases() -> None:
    kb = load_bank(("en",)).knowledge
    for e in kb.entities:
        for relation, fact in e.facts.items():
            for lang in ("en", "ja"):
                g, aliases = kb.gold(e, relation, lang)
                assert g and g not in aliases
                if fact.kind == "text" and lang == "en":
                    assert not unsafe_aliases(aliases, kb.others(relation, fact, lang)), (e.id, relation)
    assert kb.gold(kb.entity("eiffel_tower"), "completed", "en") == ("1889", ["eighteen eighty-nine"])
    assert kb.gold(kb.entity("eiffel_tower"), "completed", "ja") == ("1889", ["1889年"])
    assert kb.gold(kb.entity("mars"), "position", "en") == ("4", ["fourth", "4th"])
    assert kb.gold(kb.entity("mars"), "position", "ja") == ("4", ["4番目", "第4"])
    fuji = kb.gold(kb.entity("mount_fuji"), "height", "en")
    assert fuji[0] == "3776" and "3776 metres" in fuji[1] and "3776 meters" in fuji[1]
    assert kb.gold(kb.entity("mount_fuji"), "height", "ja") == ("3776", ["3776メートル"])
    # Both Brontë sisters wrote a book here: "Bronte" alone would pass a wrong answer, so it is no alias.
    assert kb.gold(kb.entity("jane_eyre"), "author", "en") == ("Charlotte Bronte", [])
    assert "Scotland" in kb.gold(kb.entity("ben_nevis"), "country", "en")[1]
    assert said(kb.entity("mount_fuji").facts["height"], "en") == "3776 meters"
    assert said(kb.entity("mars").facts["position"], "ja") == "4番目"


def test_year_words_and_near_misses() -> None:
    assert year_words(1889) == ["eighteen eighty-nine"]
    assert year_words(1905) == ["nineteen oh five"]
    assert year_words(2005) == ["two thousand five", "two thousand and five"]
    assert year_words(2012) == ["twenty twelve", "two thousand twelve"]
    # No alias that a near miss contains: 1900's "nineteen hundred" is not in "nineteen oh one", so it stays.
    assert gold(Fact("x", "year", 1900), "en") == ("1900", ["nineteen hundred"])
    wrong = ["1901", "nineteen oh one", "1899", "eighteen ninety-nine"]
    assert not unsafe_aliases(gold(Fact("x", "year", 1900), "en")[1], wrong)
    # A text alias another value contains is dropped.
    fact = Fact("author", "text", {"en": "Anne Smith", "ja": "A"}, aka={"en": ("Smith", "A. Smith")})
    assert gold(fact, "en", ["John Smith"]) == ("Anne Smith", ["A. Smith"])
    assert gold(fact, "en", ["John Brown"]) == ("Anne Smith", ["Smith", "A. Smith"])


@pytest.mark.parametrize("change, field", [
    (lambda us: [us[0], DialogueUtterance("x", "user", "bc", "yeah", "bc")], "speaker"),
    (lambda us: [us[0], DialogueUtterance("x", "system", "turn", "and then some more words", "pause")], "relation"),
    (lambda us: [us[0], DialogueUtterance("x", "user", "turn", "and then some more words", "shift")], "relation"),
    (lambda us: [us[0], DialogueUtterance("x", "system", "bc", "yeah", "shift")], "relation"),
    (lambda us: [DialogueUtterance("x", "user", "turn", "a | b and c", "first")], "text"),
    (lambda us: [us[0], DialogueUtterance("x", "user", "turn", "sorry, one more thing", "barge_in")], "relation"),
])
def test_validation_rejects_broken_relations(change: Callable[[list[DialogueUtterance]], list[DialogueUtterance]],
                                               field: str) -> None:
    first = DialogueUtterance("en-chat-d000-u00", "user", "turn", "so how was your weekend then", "first")
    utts = change([first])
    utts = [DialogueUtterance(**{**u.__dict__, "utt_id": f"en-chat-d000-u{i:02d}"}) for i, u in enumerate(utts)]
    with pytest.raises(SchemaError, match=field):
        Dialogue("en-chat-d000", "en", "chat", 0, 1, ("weekend",), tuple(utts)).validate()


def test_a_cut_follows_the_answer_said_whole_and_no_pause_splits_a_name() -> None:
    # The gold "Indiana" inside "Indianapolis": a cut there would come before the answer is said.
    text = "Indianapolis is the state capital of Indiana."
    assert _value_at(text, "Indiana") == text.rindex("Indiana")
    assert _value_at("It rises in India.", "India") == 12
    assert _value_at("That was Indiana.", "Ohio") == -1
    assert _value_at("1889年に完成しました。", "1889") == 0  # Japanese words run on without spaces
    en = LANGUAGES["en"]
    line = "Let's switch topics, I'm looking at a photo of The Last Supper and I can't remember which city it's in."
    cut = _word_cut(en, line)
    assert cut is not None and not (cut[0].endswith("The") and cut[1].startswith("Last")), cut
    assert " ".join(cut) == line


def test_one_full_stop_and_no_backchannel_inside_a_question_split_by_a_pause() -> None:
    assert _one_stop("The capital is Washington, D.C..") == "The capital is Washington, D.C."
    assert _one_stop("Well... it was 1889.") == "Well... it was 1889."
    en = LANGUAGES["en"]
    # The listener says nothing inside a question, even one a held pause splits: "so what's the | hometown ...?"
    assert _held_bc_room(en, "Okay, Steven Spielberg, I'll remember that, so what's the",
                         "hometown of the filmmaker, where was he born?") is None
    telling = "Hmm, okay, so I'm writing about The Scream for a class and"
    assert _held_bc_room(en, telling, "I need the year it was painted.") == 0
