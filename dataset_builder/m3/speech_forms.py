"""What a line of M3 dialogue text says about how it is spoken: whether it doubles a word, which register (Japanese
polite です/ます or casual) its sentences end in, whether it ends a complete sentence, where its questions are.

The generator (`dialogues.py`) places PAUSEs and backchannels with these, and refuses a dialogue that breaks them
(`check_dialogue`); `chat_audit.py` measures them over a build for `build m3 --diagnostics`. Heuristics on the
written text, no parser: each rule is small and has known-answer tests (`tests/test_m3_speech_forms.py`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from dataset_builder.schema import SchemaError

# --- doubled words ---------------------------------------------------------------------------------------------

# English determiners and possessives: two of them around at most one modifier ("the next the ferry") is a slot
# fill gone wrong, never speech.
_DETERMINERS = r"(?:the|a|an|my|our|your|his|her|their|its|this|these|those)"
_MODIFIERS = r"(?:next|last|first|other|same|whole|old|new|little|big|local|usual|only)"
_ARTICLES = r"(?:the|a|an|my|our|your|his|her|their|its)"  # never followed by another ("is this a" is fine)
_EN_DOUBLE_DET = re.compile(rf"\b{_ARTICLES}\s+(?:{_MODIFIERS}\s+)?{_DETERMINERS}\b", re.IGNORECASE)
_EN_DOUBLE = re.compile(r"\b([A-Za-z']+)\s+(\1)\b", re.IGNORECASE)  # only a space between ("Wait, wait" is meant)
# Words people do say twice on purpose ("very very", "bye bye", "no no"); everything else doubled is a slip.
# "go to to see", "that that", "had had" are grammatical; one-letter initials repeat in names ("J. R. R.").
_EN_DOUBLE_OK = {"very", "no", "bye", "so", "really", "yeah", "ha", "that", "had", "to"}
# Japanese: a particle doubled across a slot boundary ("をを"), or a piece said twice in a row ("のときのとき" from a
# slot value and its template both saying "のとき", "横浜横浜"). Sound-symbolic words repeat on purpose (バタバタ,
# ぎゅうぎゅう, はいはい, 行く行く), so only a repeat of two kanji or more, or of a particle and two kana or more,
# counts; "家でできる" and "あはは" (one particle, then the same kana) are not doubles.
_JA_DOUBLE_PARTICLE = re.compile(r"(?:をを|がが|へへ)")
_JA_REPEAT = re.compile(r"([\u4e00-\u9fff]{2,}|[のがをにでとへも][\u3040-\u309f]{2,})\1")
_JA_REPEAT_OK = {"大丈夫", "五分", "時々", "少し", "一つ", "一人", "平気"}  # said twice on purpose ("大丈夫大丈夫")


def doubled_words(text: str, language: str) -> list[str]:
    """The doubled words or determiners in `text` (empty when none): "the the", "the next the ferry", "をを"."""
    if language == "en":
        found = {m.start(): m.group(0) for m in _EN_DOUBLE_DET.finditer(text)}
        for m in _EN_DOUBLE.finditer(text):  # one slip found by both rules counts once
            if m.group(1).lower() not in _EN_DOUBLE_OK and len(m.group(1)) > 1:
                found.setdefault(m.start(), m.group(0))
        return [found[k] for k in sorted(found)]
    return [m.group(0) for m in _JA_DOUBLE_PARTICLE.finditer(text)] + [
        m.group(0) for m in _JA_REPEAT.finditer(text) if m.group(1) not in _JA_REPEAT_OK]



# A discourse marker said again a clause or two later in one turn ("Okay, got it, okay, and when...",
# "あ、そういえば、あ、"): a reaction and a lead-in joined, each bringing its own marker. Said twice in a row
# ("Sorry, sorry,", "I know, I know,") it is meant; apart, it is two lead-ins stacked.
_EN_MARKERS = {"okay", "ok", "oh", "ah", "right", "so", "well", "alright", "sorry", "wait", "anyway", "now",
               "huh", "hmm", "yeah", "nice", "wow", "actually", "also", "and", "um", "hey", "cool", "ooh", "oops"}
_JA_MARKERS = {"あ", "あの", "えっと", "ところで", "そういえば", "なるほど", "じゃあ", "では", "それで", "ちなみに",
               "ねえ", "すみません", "ごめん", "ごめんなさい", "ちょっと", "はい", "うん", "へえ", "そうそう"}
_EN_IDIOMS = {"so to speak", "and so on", "oh well"}
_EN_CLAUSE = re.compile(r"[^,.!?]+")
_JA_LEAD_CLAUSE = re.compile(r"[^、。！？!?]+")


# Two lead-ins stacked where one ends in a conjunction: "Sorry, not to interrupt, but and when did he die?"
_EN_STACKED = re.compile(r"\bbut\s*,?\s+(?:and|but|okay|so)\b|\band\s*,?\s+(?:and|but|okay)\b", re.IGNORECASE)


def repeated_markers(text: str, language: str) -> list[str]:
    """The discourse markers `text` says twice in its short lead-in clauses, not side by side, and (English) a
    conjunction right after another ("but and") (empty when none)."""
    clauses = [c.strip() for c in (_EN_CLAUSE if language == "en" else _JA_LEAD_CLAUSE).findall(text)]
    markers = _EN_MARKERS if language == "en" else _JA_MARKERS
    seen: dict[str, int] = {}
    found: list[str] = [m.group(0) for m in _EN_STACKED.finditer(text)] if language == "en" else []
    if language == "en" and sum(c.lower().startswith("but ") for c in clauses) >= 2:
        found.append("but ... but")  # "Sorry to interrupt, but I should know this, but which city ...?"
    for k, clause in enumerate(clauses):
        words = clause.lower().split() if language == "en" else [clause]
        if language == "en" and (len(words) > 3 or clause.lower() in _EN_IDIOMS):
            continue  # a lead-in clause is short ("got it", "that makes sense"); a content clause is not one
        for w in dict.fromkeys(words[:1] if language == "en" else words):  # said first in its clause
            if w not in markers:
                continue
            if w in seen and seen[w] < k - 1:
                found.append(w)
            seen[w] = k
    return found


def _marker_clauses(text: str, language: str) -> list[str]:
    clauses = [c.strip().lower() for c in (_EN_CLAUSE if language == "en" else _JA_LEAD_CLAUSE).findall(text)]
    return [c for c in clauses if (len(c.split()) <= 3 if language == "en" else True)]


def without_repeated_marker(lead: str, text: str, language: str) -> str:
    """`text` without the discourse markers it starts with that `lead` (said just before it) already says:
    "Okay, got it," + "Okay, and when ..." -> "and when ..."."""
    markers = _EN_MARKERS if language == "en" else _JA_MARKERS
    said = {w for c in _marker_clauses(lead, language) for w in (c.split() if language == "en" else [c])}
    pattern = _EN_LEAD_MARKER if language == "en" else _JA_LEAD_MARKER
    while (m := pattern.match(text)) and (w := (m.group(1) or m.group(2) or "").lower()) in markers and w in said:
        text = text[m.end():]
    return text


_EN_LEAD_MARKER = re.compile(r"([A-Za-z]+),\s*|(so|and)\s+", re.IGNORECASE)
_JA_LEAD_MARKER = re.compile(r"([^、。！？!?]+)、")


# --- Japanese register -----------------------------------------------------------------------------------------

POLITE, CASUAL = "polite", "casual"
_JA_CLAUSE = re.compile(r"[^。！？!?、]+[。！？!?、]?")
# A clause's predicate is read after taking off a trailing connective ("...んですけど、" -> "...んです").
_CONNECTIVE = re.compile(r"(?:けれども|けれど|けど|ので|から|のに|が|し)$")
_POLITE_END = re.compile(r"(?:です|ます|ました|でした|ません|ましょう|でしょう|ください|ございます|ませ)"
                         r"(?:か|ね|よ|よね|な|わ)?$")
_POLITE_MARK = re.compile(r"(?:です|ます|ました|でした|ません|ましょう|でしょう|ください|ございます)")
# Casual anywhere: the copula だ and its forms, じゃん, and a plain predicate with a sentence particle ("いいね、").
# "かな" is left out: polite speakers muse with it too ("真似してみようかな").
_CASUAL_STRONG = re.compile(
    r"(?:(?:ん|の)?だ(?:よ|ね|よね|な|もん)?|だった(?:よ|ね|な|の)?|じゃん|でしょ|だろ|っけ|"
    r"(?:[るたいうくすつぬむぶぐ]|ない|てる|てた|ちゃう|ちゃった)(?:よ|ね|よね|な|さ|もん)|なんだ|もん)$")
_COPULA = re.compile(r"(?:ん|の|な)?だ$")
# Casual only at a sentence's end: a bare plain verb or adjective, or one with の ("忙しかった。", "どうしてる？",
# "行くの？"); inside a line the same form is a subordinate clause or a noun ("決めるのに、", "勉強するの、いいですね"),
# which polite speech uses too.
_CASUAL_FINAL = re.compile(r"(?:[るたいう]|ない|てる|てた|ちゃう|ちゃった)の?$|なの$")


# Words that end like a predicate but are not one: the conjunction ただ ("but"), まだ ("still").
# よかった and やった are exclamations polite speakers say to themselves too.
# Set phrases (行ってらっしゃい, いらっしゃい) belong to both registers.
_NOT_PREDICATES = {"ただ", "まだ", "なんだか", "あのね", "ねえ", "よかった", "やった", "よし", "行ってらっしゃい",
                   "いってらっしゃい", "いらっしゃい", "ただいま"}


def clause_register(clause: str) -> str:
    """POLITE, CASUAL or "" (cannot tell: a noun phrase, a te-form, a lead-in) for one clause, by its end."""
    raw = clause.strip()
    final = raw.endswith(("。", "！", "？", "!", "?")) or not raw.endswith("、")
    text = raw.rstrip("。！？!?、…ー〜 ")
    joined = bool(_CONNECTIVE.search(text)) and len(text) > 3
    if joined:  # "...んですけど、" reads as its predicate, "...決めるので、" as nothing (subordinate)
        text = _CONNECTIVE.sub("", text)
    if len(text) < 2 or text in _NOT_PREDICATES or text.endswith("よかった"):
        return ""
    if _POLITE_END.search(text) or _POLITE_MARK.search(text[-6:]):  # also "ですよねえ", "ますもんね"
        return POLITE
    # Before a connective only だけど shows casual speech ("...んだけど、"); "乗るのが", "だったので" are neutral.
    if joined:
        return CASUAL if _COPULA.search(text) and re.search(r"(?:けれど|けど|が)$", raw.rstrip("、 ")) else ""
    if _CASUAL_STRONG.search(text):
        return CASUAL
    if final and not joined and len(text) >= 3 and _CASUAL_FINAL.search(text):
        return CASUAL
    return ""


def registers(text: str) -> list[str]:
    """The register of each clause of a Japanese line that shows one, in order."""
    return [r for c in _JA_CLAUSE.findall(text) if (r := clause_register(c))]


def turn_register(text: str) -> str:
    """POLITE or CASUAL when every clause that shows a register shows that one; "mixed" when both appear; ""
    when none does."""
    found = set(registers(text))
    return "mixed" if len(found) > 1 else (found.pop() if found else "")


# Backchannels belong to a register too: うん and そっか are casual, はい and そうですね polite.
JA_BC_REGISTER = {"うん": CASUAL, "うんうん": CASUAL, "そっか": CASUAL, "そうなんだ": CASUAL, "なるほどね": CASUAL,
                  "わかる": CASUAL, "そうそう": CASUAL, "ほんとに": CASUAL,
                  "はい": POLITE, "ええ": POLITE, "ええ、ええ": POLITE, "そうですね": POLITE,
                  "そうなんですね": POLITE}


def bc_register(text: str) -> str:
    return JA_BC_REGISTER.get(text.strip().rstrip("。、"), "")


# --- complete sentences and questions ----------------------------------------------------------------------------

# English words a speaker cannot stop on: conjunctions, prepositions, articles, auxiliaries and subject pronouns
# leave a clause open ("and", "because", "with", "the", "was", "she's"); fillers hold the floor ("um", "like").
_EN_OPEN_WORDS = {
    "and", "but", "or", "so", "because", "cause", "then", "which", "who", "where", "if", "when", "while", "until",
    "since", "although", "though", "plus", "than", "whether", "with", "without", "to", "of", "for", "in", "on",
    "at", "from", "about", "into", "onto", "by", "like", "as", "the", "a", "an", "my", "your", "his", "her", "our",
    "their", "its", "some", "any", "every", "no", "is", "was", "were", "are", "am", "be", "been", "being", "have",
    "has", "had", "do", "does", "did", "can", "could", "will", "would", "should", "might", "must", "shall",
    "going", "gonna", "wanna", "gotta", "i", "you", "he", "she", "we", "they", "i'm", "you're", "he's", "she's",
    "it's", "we're", "they're", "there's", "that's", "i've", "we've", "i'd", "i'll", "we'll", "just", "really",
    "very", "more", "most", "kind", "sort", "thinking", "wondering", "hoping", "reckon", "suppose", "saying", "um",
    "uh", "er", "erm", "hmm", "well", "honestly", "basically", "actually", "literally", "anyway", "not", "never",
    "you'd", "he'd", "she'd", "they'd", "we'd", "you'll", "he'll", "she'll", "they'll", "it'll", "you've",
    "they've", "isn't", "wasn't", "aren't", "don't", "doesn't", "didn't", "can't", "won't", "couldn't",
}
# Demonstratives and object pronouns end a clause when a comma follows ("I'll try that,"); without one the
# speaker is mid-phrase ("I have to tell you {pause} what ...").
_EN_OPEN_BARE = {"that", "this", "it", "them", "there", "him", "me", "us", "what", "how", "why", "say", "said",
                 "tell", "told", "think", "thought", "mean", "guess", "know", "want", "wanted", "need", "needed",
                 "get", "got", "put"}
# A lead-in that announces what comes next ("I've always wondered,", "quick question,", "moving on,"): the speaker
# has not said it yet.
_EN_ANNOUNCES = re.compile(r"(?:wondered|wondering|curious|want(?:ed)? to (?:know|ask)|question(?: for you)?|"
                           r"another thing|what else|something else|while I have you|while we're at it|moving on|"
                           r"fact check|I was thinking|here's the thing|guess what|the thing is|I mean)$",
                           re.IGNORECASE)
_EN_FILLER_END = re.compile(r"(?:\byou know|\bI mean|\bsort of|\bkind of|\blet me see|\blet me think|\byou see)$",
                            re.IGNORECASE)
# Said alone, these are an answer or a reaction, not the start of a list: "Ah, right, 49," is finished.
_EN_INTERJECTIONS = {"ah", "oh", "right", "yeah", "yes", "no", "okay", "ok", "well", "so", "sure", "hey", "wow",
                     "um", "uh", "hm", "hmm", "fine", "alright", "mm", "huh", "great", "good", "cool", "nice", "thanks",
                     "ooh", "aha"}
_EN_SUBORDINATE = re.compile(r"(?:^|\b(?:that|and|but|so)\s+)(?:if|when|whenever|because|since|although|though|"
                             r"while|after|before|once|unless|until|as soon as|even if|even though|as long as|now "
                             r"that|so that|in case|whether|every time|the (?:thing|problem|point|funny thing|worst "
                             r"bit|trouble) is|what i(?:'m| am)? (?:mean|saying) is)\b", re.IGNORECASE)
# A question word before its auxiliary asks ("and when did he die,"): a whole question, not a "when" clause waiting
# for its main clause.
_EN_ASKS = re.compile(r"^(?:(?:and|but|so|or)\s+)?(?:when|where|what|who|how|why|which)\s+(?:did|does|do|was|is|"
                      r"were|are|will|would|can|could|has|have|had)\b", re.IGNORECASE)
# A phrase with no verb that opens with one of these waits for its clause: "and somewhere around row sixty",
# "but the organic stuff", "where the cable".
_EN_FRONTED = re.compile(r"^(?:and|but|so|or|then|around|somewhere|about|in|on|at|after|before|by|for|with|every|"
                         r"where|which|who|when|what|whose)\b", re.IGNORECASE)
_EN_NOUN_PHRASE = re.compile(r"^(?:the|a|an|my|our|your|his|her|their|this|that|these|those)\b", re.IGNORECASE)
_EN_VERBISH = re.compile(r"\b(?:is|was|are|were|am|be|been|has|have|had|do|does|did|can|could|will|would|"
                         r"should|\w+'(?:s|re|ve|ll|d|m)|\w+ed|went|came|said|got|took|made|saw|broke|fell|"
                         r"left|ran|froze|gave|told|thought|knew|found|felt|kept|lost|won|sat|stood|began|"
                         r"brought|bought|caught|taught|wrote|drove|rode|ate|drank|sang|swam|slept|woke|"
                         r"goes|comes|says|gets|takes|makes|looks|seems|needs|wants|works|happens)\b", re.IGNORECASE)
_EN_WORD = re.compile(r"[A-Za-z0-9']+")
_EN_INITIAL = re.compile(r"\b([A-Z])\.")


def _en_complete(text: str) -> bool:
    """Whether an English stretch ends a complete sentence or clause, whatever its last punctuation."""
    t = text.strip()
    if t.endswith(("...", "…", "-", "\u2014", ";", ":")):
        return False  # trailing off, a self-repair, a list announced
    if t[-1] in ".!?":
        return True
    comma = t.endswith(",")
    body = t.rstrip(", ")
    words = _EN_WORD.findall(body.lower())
    if not words or _EN_FILLER_END.search(body):
        return False
    last = words[-1]
    if last in _EN_OPEN_WORDS or (not comma and last in _EN_OPEN_BARE) or _EN_ANNOUNCES.search(body):
        return False
    # An initial's full stop ends no sentence: "Okay, C. S. Lewis," is one name.
    segments = [s.strip() for s in re.split(r"[,.!?;]", _EN_INITIAL.sub(r"\1", body)) if s.strip()]
    seg = segments[-1]
    seg_words = _EN_WORD.findall(seg.lower())
    if _EN_SUBORDINATE.search(seg) and not _EN_ASKS.match(seg):
        return False  # a clause waiting for its main clause: "if it rains on Saturday,"
    prev = _EN_WORD.findall(segments[-2].lower()) if len(segments) >= 2 else []
    after_interjection = len(prev) == 1 and prev[0] in _EN_INTERJECTIONS
    verbless = not _EN_VERBISH.search(seg)
    if (prev and not after_interjection and len(seg_words) <= 3 and seg.lower() not in _EN_INTERJECTIONS
            and verbless and len(prev) <= 4 and not _EN_VERBISH.search(segments[-2])):
        return False  # a list in progress: "eggs, flour,"
    rest = seg.split(None, 1)[1] if " " in seg else ""
    fronted = (_EN_NOUN_PHRASE.match(seg) or _EN_FRONTED.match(seg)) and not _EN_VERBISH.search(rest)
    # After a bare interjection a noun phrase is an echo, a complete reaction ("Wow, the Seine,", "Hm, 1982,"), and
    # so is one after "so": "Right, so Lucca," takes in an answer, which a listener may rightly follow with the
    # next turn, as after "Ah, right, 49,"; only "so" said alone first fronts a topic, and a phrase opened by any
    # other conjunction or preposition waits for its clause ("Oh, and out of interest,").
    opens = _EN_FRONTED.match(seg) and not seg.lower().startswith("so ")
    echo = after_interjection and prev[0] != "so" and not opens
    if fronted and not echo:
        return False  # a topic or an adverbial said first: "the thing with the car,", "so, uranium,"
    return True


# Japanese words that are a whole answer or reaction on their own ("うん、", "そうそう、"): a listener may take the
# turn after them.
_JA_ANSWERS = {"うん", "はい", "ええ", "いや", "いえ", "そう", "そうそう", "なるほど", "ほんと", "ほんとに", "そっか",
               "そうか", "たしかに", "だよね", "ですよね", "もちろん", "了解", "わかった", "わかりました"}


_JA_OPEN_KA = ("とか", "かどうか", "何か", "なにか", "誰か", "だれか", "いつか", "どこか", "どれか", "ほか", "確か",
               "たしか")
_JA_NOUN_END = re.compile(r"[\u4e00-\u9fff\u30a0-\u30ff0-9０-９]")  # a kanji, katakana or digit
_JA_FILLERS = {"えっと", "えーと", "ええと", "あの", "あのー", "その", "なんか", "まあ", "ほら", "こう", "で", "それで"}


def complete_sentence(text: str, language: str) -> bool:
    """Whether `text` (the first half of a held pause) ends a complete sentence or clause, so that the listener
    could take the turn there, whatever the punctuation: English "I'll try that," and "Ah, right, 49," are
    complete, "and she's, um," and "because" are not (`_en_complete`); Japanese by 。！？ or by a sentence-final
    form before a trailing comma ("引っ越すんだ、", "行ってきました、", "行ってきた、"), while a connective form
    ("〜て、", "〜けど、", "〜から、", "〜し、") or a filler ("あの、", "えっと、", "で、") is unfinished."""
    t = text.strip()
    if not t:
        return False
    if language == "en":
        return _en_complete(t)
    if t[-1] in "。！？!?":
        return True
    if t.endswith(("…", "ー", "〜")):
        return False
    clauses = _JA_CLAUSE.findall(t)
    last = clauses[-1] if clauses else t
    body = last.strip().rstrip("、 ")
    if body in _JA_ANSWERS:
        return True
    if body in _JA_FILLERS or body.endswith(("なんかこう", "なんか", "こう", "あの", "その", "えっと")):
        return False
    if body in ("そっか", "そうか") or (body.endswith("か") and len(body) > 1 and not body.endswith(_JA_OPEN_KA)
                                       and _JA_NOUN_END.match(body[-2])):
        return True  # a reaction that muses on a noun: "1889年か、", "そっか、" (after a verb: "回すか、" goes on)
    if _CONNECTIVE.search(body) or body.endswith(("て", "で", "と", "ば", "たり", "ながら", "けど", "し", "って",
                                                  "たら", "なら", "のに", "ので", "けれど")):
        return False  # an unfinished clause: "...んですけど、", "...してて、"
    # Read as if the sentence ended there: "行ってきた、" is as finished as "行ってきた。" (a past, a copula or a
    # particle; a bare る/う/い is as often a noun: "もう一枚のほう、").
    final = body.endswith(("た", "だ", "ない", "よ", "ね", "な", "の", "わ", "さ", "です", "ます"))
    return bool(clause_register(last)) or (final and bool(clause_register(body + "。")))


def unfinished(text: str, language: str) -> bool:
    """Whether a held pause after `text` leaves the speaker audibly unfinished: a clause that goes on, a filler or
    a list in progress ("and she's, um,", "because", "eggs, flour,", "〜て、", "〜けど、", "えっと、")."""
    return bool(text.strip()) and not complete_sentence(text, language)


# A Japanese sentence ending in か。 asks when か follows a polite or explanatory predicate (ですか。, ますか。,
# んですか。); after a plain form it muses ("ましか。", "細かいのか。") or proposes ("行こうか。"); "そうでしたか。"
# acknowledges, as do "そうですか。", "そうなんですか。" and "本当ですか。" written with 。, and
# "すごいじゃないですか。" exclaims.
_JA_ASKS = re.compile(r"(?<!じゃない)(?<!じゃありません)(?<!そうなん)(?<!本当)(?<!ほんと)(?<!そう)"
                      r"(?:です|ます|ません|ました|(?<!そう)でした|でしょう|ん)か。$")


def question_spans(text: str, language: str) -> list[tuple[int, int]]:
    """[start, end) character spans of the question sentences of `text` (ending in ? or ？, or Japanese か。)."""
    out = []
    pat = r"[^.!?]+[.!?]*" if language == "en" else r"[^。！？!?]+[。！？!?]*"
    for m in re.finditer(pat, text):
        s = m.group(0).rstrip()
        lead = len(s) - len(s.lstrip())
        if s.endswith(("?", "？")) or (language == "ja" and _JA_ASKS.search(s)):
            out.append((m.start() + lead, m.start() + len(s)))
    return out


def question_at(text: str, pos: int, language: str) -> bool:
    """Whether a backchannel written at character `pos` of `text` falls inside one of its questions or right after
    one (nobody backchannels a question: they answer it)."""
    if any(s < pos < e for s, e in question_spans(text, language)):
        return True
    before = text[:pos].rstrip()
    return before.endswith(("?", "？")) or (language == "ja" and bool(_JA_ASKS.search(before)))


def bc_window(text: str, lo: float = 0.15, hi: float = 0.85) -> tuple[int, int]:
    """The characters of a host TURN a listener's backchannel may fall in (the placement samples its start
    between `lo` and `hi` of the host's length, `rules/m3_timing_stats_default.json` bc_offset_frac)."""
    n = len(text)
    return int(n * lo), int(n * hi) + 1


def bc_in_question(host_text: str, language: str, lo: float = 0.15, hi: float = 0.85, before_chars: int = 0) -> bool:
    """Whether a backchannel placed in `host_text` may fall inside one of its questions (`before_chars`: it is
    placed to end within the host's first this many characters)."""
    a, b = bc_window(host_text, lo, hi)
    if before_chars:
        a, b = min(a, before_chars), before_chars
    return any(s < b and e > a for s, e in question_spans(host_text, language))


# --- connectives in task dialogues ---------------------------------------------------------------------------------

# A lead-in that announces a new topic: right before a question about another entity, wrong before a follow-up
# about the same one ("ところで、いつ完成したんですか？" right after the tower's height).
_TOPIC_CHANGE = {
    "en": re.compile(r"^(?:\W*(?:okay|ok|oh|right|so|well|and|hmm|thanks|got it|cool|great|nice|alright)\b\W*)*"
                     r"(?:by the way|anyway|totally off topic|off topic|different (?:topic|question|thing)|switching "
                     r"gears|changing the subject|on another note|on a different note|unrelated|moving on|new question|"
                     r"something else|random (?:question|one)|totally different|let's switch|another (?:one|random))",
                     re.IGNORECASE),
    "ja": re.compile(r"ところで|話(?:は|が)?変わ|別の話|関係ない|別件|違う話|話を変え|それとは別に|全然違う|"
                     r"突然なんですけど|そういえば"),
}
_JA_LEAD_SPAN = 24  # a Japanese lead-in is said in the first this many characters


def topic_change_lead(text: str, language: str) -> bool:
    """Whether `text` opens with a lead-in that announces a new topic ("By the way,", "ところで、")."""
    if language == "ja":
        return bool(_TOPIC_CHANGE["ja"].search(text[:_JA_LEAD_SPAN]))
    return bool(_TOPIC_CHANGE["en"].match(text.strip()))


def echoes_as_question(text: str, answer: str, language: str) -> bool:
    """Whether `text` says `answer` back as a question ("Oh, 1889?", "1889年なんですか、"): a listener who has
    just been told something acknowledges it, not asks it again."""
    if not answer:
        return False
    at = text.lower().find(answer.lower())
    if at < 0:
        return False
    after = text[at + len(answer):at + len(answer) + 8]
    if language == "en":
        return after.lstrip().startswith("?")
    return bool(re.match(r"^(?:[?？]|(?:です|なん(?:です)?|ます|でした)か[、。？?])", after))


# --- a dialogue's rules, at build time ---------------------------------------------------------------------------

@dataclass(frozen=True)
class FormProblem:
    dialogue_id: str
    utt_id: str
    rule: str
    text: str

    def __str__(self) -> str:
        return f"{self.dialogue_id} {self.utt_id}: {self.rule}: {self.text!r}"


class _Utt:  # the fields of dialogues.DialogueUtterance these rules read (dialogues imports this module)
    utt_id: str
    speaker: str
    kind: str
    text: str
    relation: str


def dialogue_problems(dialogue_id: str, language: str, utterances: Sequence[_Utt], *,
                      register_rules: bool = True) -> list[FormProblem]:
    """Every doubled word, and (Japanese, `register_rules`) every turn mixing registers or a speaker leaving theirs."""
    out: list[FormProblem] = []
    for u in utterances:
        for d in doubled_words(u.text, language):
            out.append(FormProblem(dialogue_id, u.utt_id, f"doubled word {d!r}", u.text))
    if language != "ja" or not register_rules:
        return out
    held: dict[str, tuple[str, str]] = {}  # speaker -> (register, the utt_id that set it)
    for u in utterances:
        reg = bc_register(u.text) if u.kind == "bc" else turn_register(u.text)
        if reg == "mixed":
            out.append(FormProblem(dialogue_id, u.utt_id, "turn mixes polite and casual sentence endings", u.text))
            continue
        if not reg:
            continue
        if u.speaker in held and held[u.speaker][0] != reg:
            out.append(FormProblem(dialogue_id, u.utt_id, f"{u.speaker} speaks {reg} after {held[u.speaker][0]} "
                                   f"({held[u.speaker][1]})", u.text))
        held.setdefault(u.speaker, (reg, u.utt_id))
    return out


def check_dialogue(dialogue_id: str, language: str, utterances: Sequence[_Utt], *, register_rules: bool = True) -> None:
    """Raise SchemaError naming the dialogue and turn of the first broken rule (`dialogue_problems`)."""
    problems = dialogue_problems(dialogue_id, language, utterances, register_rules=register_rules)
    if problems:
        p = problems[0]
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise SchemaError(f"{p.rule}: {p.text!r}{more}", source=f"dialogue {p.dialogue_id}", field=p.utt_id)

