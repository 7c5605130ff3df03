"""Whether a backchannel word fits what it answers (texts/README.md "Chat corpus"): the words before a `{bc: w}`
mark are classed by what they do (a telling, news, a request or suggestion, a compliment, bad news, a joke), the
word by what it does (`texts/{lang}/chat/backchannel_words.yaml`), and `FITS` says which go together: surprise
to news ("no way", へえー), a continuer to a telling ("mm-hmm", うん), agreement to a request ("sure", はい),
thanks or a modest reply to a compliment (いやいや), sympathy to bad news ("oh no", あらら), a laugh to a joke.

Heuristics on the written words, no parser: each class is a short list of cues, with known-answer tests on both
sides (`tests/test_m3_corpus.py`). A telling is what is left when no cue matches, so the rule refuses only what it
can tell is wrong: へえー to "come and meet her", "oh no" to good news, "ha" to bad news, "sure" to a story.
"""

from __future__ import annotations

import functools
import re

from dataset_builder.m3.bankio import TEXTS_DIR, Problems, read_yaml

HOST_CLASSES = ("telling", "news", "request", "compliment", "bad_news", "joke")
FUNCTIONS = ("continuer", "agreeing", "surprise", "positive", "laugh", "agreement", "sympathy", "thanks", "protest")
# What each function of a backchannel word answers. A telling (no cue found) takes any word: the rule refuses only
# what its cues show is wrong. A continuer or an agreeing "true" never answers a compliment (one thanks or waves it
# off); surprise never a request ("come and meet her": へえー is wrong there); sympathy only bad news; a laugh never
# bad news; thanks never news; a protest ("come on", うるさいな, ごめんって: teasing waved off) answers anything.
FITS: dict[str, frozenset[str]] = {
    "continuer": frozenset({"telling", "news", "request", "bad_news", "joke"}),
    "agreeing": frozenset({"telling", "news", "request", "bad_news", "joke"}),
    "surprise": frozenset({"telling", "news", "bad_news", "joke"}),
    "positive": frozenset({"telling", "news", "request"}),
    "laugh": frozenset({"telling", "news", "request", "joke"}),
    "agreement": frozenset({"telling", "request"}),
    "sympathy": frozenset({"telling", "bad_news"}),
    "thanks": frozenset({"telling", "compliment", "request"}),
    "protest": frozenset({"telling", "news", "request", "compliment", "bad_news", "joke"}),
}

# Cues per class, strongest first (a compliment that mentions trouble is still a compliment).
_CUES: dict[str, tuple[tuple[str, re.Pattern[str]], ...]] = {
    "en": (
        ("compliment", re.compile(
            r"\byou(?:'re| are) (?:so |really |such |actually )?(?:good|great|amazing|brilliant|clever|talented|a "
            r"natural|a star|a genius)|\byou(?:'ve)? always been good|\bwell done\b|\bproud of you\b|\bsuits you\b|"
            r"\byou look (?:great|amazing|lovely)|\byou can do this\b|\bnice work\b|\bgood for you\b|\byou did "
            r"(?:great|brilliantly|really well)", re.IGNORECASE)),
        ("bad_news", re.compile(
            r"\b(?:broke|broken|lost|died|passed away|sick|ill|hospital|cancel(?:l?ed)?|fired|laid off|awful|"
            r"terrible|nightmare|worst|stolen|crash(?:ed)?|flood(?:ed)?|injur\w*|hurt\w*|fail(?:ed)?|rejected|"
            r"dumped|burst|leak\w*|cracked|ruin\w*|disaster|can't (?:eat|have)|complain\w*|missed|"
            r"not worth repairing)\b",
            re.IGNORECASE)),
        ("request", re.compile(
            r"\b(?:could you|can you|would you|will you|why don't|how about|we should|you should|"
            r"we could|you could|maybe we|do you want to|come and|come over|please|promise me|let me know|"
            r"I'll (?:put|bring|drive|pick|send|make|do|lend|get|cook|ring|call|book|be your)|"
            r"shall we|you (?:have|need) to|just (?:ask|say|tell))\b|(?:^|[,.!?]\s*)(?:just |so )?(?:don't|"
            r"tell (?:her|him|them)|let's)\b", re.IGNORECASE)),
        ("joke", re.compile(r"\b(?:ha|haha|joke|joking|kidding|hilarious|ridiculous)\b", re.IGNORECASE)),
        ("news", re.compile(r"\b(?:guess what|finally|turns out|actually|just (?:got|found|heard|bought|adopted|"
                            r"booked|passed)|engaged|pregnant|promoted|won|booked|said yes)\b", re.IGNORECASE)),
    ),
    "ja": (
        ("compliment", re.compile(r"得意(?!先)|上手|さすが|えらい|偉い|似合|天才|かっこいい|センスある|すごいね|"
                                  r"すごいです|頑張った|がんばった|よくやった")),
        ("bad_news", re.compile(r"壊れ|なくし|無くし|失くし|落とし|亡くな|病院|風邪|熱が|入院|怪我|けが|ケガ|失敗|"
                                r"落ちた|落ちちゃ|最悪|大変|困っ|中止|キャンセル|盗ま|痛|足りなく|ひどい|きつい|つらい|"
                                r"辛い|目が死|残業|怒られ|しんどい")),
        ("request", re.compile(r"てくれない|てくれる？|てください|てもらえ(?:ない|ます)|ませんか|しよう|ましょう|"
                               r"ようよ|こうよ|ろうよ|たらどう|ほうがいい|方がいい|お願い|頼む|頼んで|用意する|"
                               r"用意します|買っとく|送るね|しとく|やっとく|持ってく|どう？|しない？")),
        ("joke", re.compile(r"笑|冗談|ふざけ|ネタ")),
        ("news", re.compile(r"ついに|やっと|実は|決まった|決まりました|受かった|合格|結婚|引っ越す|生まれ|当たった|"
                            r"安い|休みなんだ|休みなんです")),
    ),
}


class BcWordsError(ValueError):
    pass


@functools.cache
def load_words(language: str) -> dict[str, frozenset[str]]:
    """word -> its functions, from `texts/{language}/chat/backchannel_words.yaml`; raises BcWordsError."""
    path = TEXTS_DIR / language / "chat" / "backchannel_words.yaml"
    problems = Problems()
    data = read_yaml(path, problems)
    if problems.errors or not isinstance(data, dict):
        raise BcWordsError(f"{path}: {problems.errors[0] if problems.errors else 'expected function: [words]'}")
    out: dict[str, set[str]] = {}
    for function, items in data.items():
        if function not in FUNCTIONS or not isinstance(items, list):
            raise BcWordsError(f"{path}: {function!r}: expected one of {FUNCTIONS} with a list of words")
        for w in items:
            out.setdefault(normal(str(w)), set()).add(str(function))
    return {w: frozenset(f) for w, f in out.items()}


def normal(word: str) -> str:
    """A backchannel word as the lists key it: lower case, no final punctuation, one space."""
    return " ".join(word.lower().replace(",", " ").strip().rstrip(".!?。！？").split())


def host_class(before: str, language: str) -> str:
    """What the words before a backchannel do (`HOST_CLASSES`): the cues of the sentence it follows (and of the
    one before when that is only a word or two), strongest class first; a telling when none matches."""
    pat = r"[^.!?]+[.!?]*" if language == "en" else r"[^。！？!?]+[。！？!?]*"
    sentences = [x.strip() for x in re.findall(pat, before.strip()) if x.strip()]
    tail = sentences[-1] if sentences else ""
    short = len(tail.split()) < 3 if language == "en" else len(tail) < 6
    if short and len(sentences) > 1:
        tail = f"{sentences[-2]} {tail}"
    for cls, cue in _CUES[language]:
        if cue.search(tail):
            return cls
    return "telling"


# An English reply that says it back ("you are", "she does", "it did", "me too", "I remember"): agreeing.
_EN_SAYS_BACK = re.compile(r"^(?:(?:i|you|he|she|it|we|they|that|there)(?:'s)? (?:am|are|is|was|were|do|does|did|"
                           r"have|has|had|can|could|will|would|won't|don't|didn't|remember|know)|me too|me neither)$")


def word_functions(word: str, before: str, language: str) -> frozenset[str] | None:
    """The functions of a backchannel `word` said after `before`: the lists', else "agreeing" for a reply that
    says it back or an echo of a word of `before` ("beer" after "I use beer traps"); None when unknown."""
    w = normal(word)
    functions = load_words(language).get(w)
    if functions is not None:
        return functions
    if language == "en" and _EN_SAYS_BACK.match(w):
        return frozenset({"agreeing"})
    if len(w) >= 2 and w in normal(before):
        return frozenset({"agreeing"})
    return None


def fit_problem(word: str, before: str, language: str) -> str | None:
    """Why `word` does not fit as a backchannel to `before` (the words it answers), or None."""
    functions = word_functions(word, before, language)
    if functions is None:
        return f"backchannel {word!r} is not in texts/{language}/chat/backchannel_words.yaml"
    cls = host_class(before, language)
    if any(cls in FITS[f] for f in functions):
        return None
    return f"backchannel {word!r} ({', '.join(sorted(functions))}) does not fit {cls.replace('_', ' ')}"
