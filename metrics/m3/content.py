"""M3-DuplexBench content scores for SHIFT responses (paper §IV-B2, docs/benchmarks/m3.md, docs/scoring.md): response
relevance, context consistency and QA accuracy, each 0–2, reported normalised to [0, 1] (the authors' code keeps 0–2:
`rules.py`).

What is judged: the model's speech from its takeover onset — the earliest model utterance starting at or after
s − 0.4 s and overlapping W (the paper's takeover) — to the window end, transcribed by ASR in the episode's
language. The same audio serves both rule sets (the code judges all model text of P + W; a takeover-led response
is what the paper's "model response" means). A SHIFT without a takeover gave no response and scores 0 on all
three without a judge call.

- Relevance: does the response address the user's turn before s (gold `question`)?
- Context consistency: is it consistent with the dialogue before s (gold `context`, the reference transcript of
  both parties; the same text under every condition, since it is the dialogue the model is measured against).
- QA accuracy (task SHIFTs with a gold answer): does it state the gold answer (aliases accepted)?

Judges (metrics/judges.py): relevance and consistency need a served LLM judge (a non-heuristic judge with a chat
`ask(prompt) -> str`, e.g. `OpenAIJudge`, cached on disk by prompt so a rescore resumes); without one they are
"not computed (needs an LLM judge)", never filled by a stand-in.
QA accuracy with an LLM judge uses our 0–2 prompt; without one, the offline heuristic judge's `judge_answer` against
the gold aliases scores it 2 (correct) or 0, labelled heuristic (English only: it reads English number words and
phrases). A judge reply must be one strict JSON object {"score": 0|1|2, "reason": "..."}; a reply that is not is
asked again with a note saying what was wrong (which also makes the cached prompt new), up to `MAX_ATTEMPTS`, then
recorded "unparseable" with the raw replies (it scores 0: STYLE 10).

ASR per language: an ASR backend declares the languages it transcribes as `languages` (ISO codes; a backend
without the attribute is taken as English-only, which is what `whisper-tiny-en` and our `qwen3-asr` wrapper
transcribe today) and takes `transcribe(audio, sr, language=code)` when it accepts a `language` argument.
Content in a language the ASR cannot transcribe is "not computed" with the reason (Japanese: run with an ASR that
declares "ja", e.g. `--asr qwen3-asr` once it is language-aware).
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from metrics.judges import json_reply

MAX_ATTEMPTS = 3
SCALE = (0, 1, 2)
KEYS = ("relevance", "consistency", "qa_accuracy")
NOT_COMPUTED = "not computed (needs an LLM judge)"
NO_TRANSCRIPT = "not computed (the row was imported without a transcript: no question or context to judge against)"
HEURISTIC_EN_ONLY = "not computed (the offline heuristic judge reads English answers only; needs an LLM judge)"
NO_RESPONSE = "(no response: the model did not take the turn)"
LANGUAGE_NAMES = {"en": "English", "ja": "Japanese"}

Transcribe = Callable[[np.ndarray, int], str]


# --- ASR per language ----------------------------------------------------------------------------------------


def asr_languages(asr: Any) -> tuple[str, ...]:
    langs = getattr(asr, "languages", None)
    return tuple(langs) if langs else ("en",)


def language_problem(asr: Any, language: str) -> str | None:
    """Why `asr` cannot transcribe `language`, or None."""
    if language in asr_languages(asr):
        return None
    name = getattr(asr, "name", type(asr).__name__)
    return (f"not computed: the ASR {name} transcribes {', '.join(asr_languages(asr))} only, not "
            f"{LANGUAGE_NAMES.get(language, language)}; score with an ASR that declares {language!r}")


def transcriber(asr: Any, language: str) -> Transcribe:
    """`asr.transcribe` bound to a language (passed on when the backend takes a `language` argument)."""
    try:
        takes_language = "language" in inspect.signature(asr.transcribe).parameters
    except (TypeError, ValueError):
        takes_language = False
    if takes_language:
        return lambda audio, sr: str(asr.transcribe(audio, sr, language=language))
    return lambda audio, sr: str(asr.transcribe(audio, sr))


# --- judges --------------------------------------------------------------------------------------------------


_HEAD = """You grade one reply of a voice assistant in a spoken conversation, transcribed by speech recognition \
(expect recognition errors, missing punctuation and filler words). Judge only what it says, not how it is \
transcribed. The conversation is in {language}.
"""

_RELEVANCE = _HEAD + """
The user's last turn:
<<<
{question}
>>>
The assistant's reply:
<<<
{response}
>>>
Does the reply address the user's last turn?
2 = it responds to what the user said (answers, or reacts on topic);
1 = it is partly related, vague or generic;
0 = it is unrelated, empty, or ignores the user.
Reply with one JSON object and nothing else: {{"score": 0, "reason": "..."}}"""

_CONSISTENCY = _HEAD + """
The conversation so far (User / Assistant, in order):
<<<
{context}
>>>
The assistant's next reply:
<<<
{response}
>>>
Is the reply consistent with the conversation so far (its facts, the topic, what was already said and asked)?
2 = fully consistent and it follows naturally;
1 = partly consistent, or generic enough to fit without using the history;
0 = it contradicts the conversation, repeats it as if new, or makes no sense after it.
Reply with one JSON object and nothing else: {{"score": 0, "reason": "..."}}"""

_QA = _HEAD + """
The user's question: {question}
Reference answer: {gold}
Also acceptable: {aliases}
The assistant's reply:
<<<
{response}
>>>
Does the reply give the reference answer?
2 = it states the reference answer (or an acceptable equivalent) as its answer;
1 = it is partly right (incomplete, or hedged between the right answer and another);
0 = it gives another answer, refuses, or does not answer.
Reply with one JSON object and nothing else: {{"score": 0, "reason": "..."}}"""

_RETRY = "\n\nYour previous reply could not be used: {why}. Reply again with the JSON object only."


def context_text(context: Any) -> str:
    lines = []
    for u in context or []:
        if isinstance(u, list | tuple) and len(u) >= 2 and str(u[1]).strip():
            lines.append(f"{'User' if u[0] == 'user' else 'Assistant'}: {str(u[1]).strip()}")
    return "\n".join(lines) or "(nothing before this reply)"


def prompts(gold: dict[str, Any], response: str, language: str) -> dict[str, str]:
    """The judge prompts of one SHIFT (qa_accuracy only where it has a gold answer)."""
    lang = LANGUAGE_NAMES.get(language, language)
    out = {"relevance": _RELEVANCE.format(language=lang, question=gold.get("question", ""), response=response),
           "consistency": _CONSISTENCY.format(language=lang, context=context_text(gold.get("context")),
                                              response=response)}
    if gold.get("gold_answer"):
        out["qa_accuracy"] = _QA.format(language=lang, question=gold.get("question", ""),
                                        gold=gold["gold_answer"], aliases=", ".join(gold.get("gold_aliases") or [])
                                        or "(none)", response=response)
    return out


def parse_score(content: str) -> tuple[int | None, str]:
    """(score, "") from a strict JSON reply {"score": 0|1|2, ...} (optionally in one ```json fence), or
    (None, why it cannot be used)."""
    obj, why = json_reply(content)
    if obj is None:
        return None, why
    score = obj.get("score")
    if isinstance(score, bool) or not isinstance(score, int | float) or not math.isfinite(score) \
            or score not in SCALE:
        return None, '"score" must be 0, 1 or 2'
    return int(score), ""


def ask_scored(judge: Any, prompt: str) -> dict[str, Any]:
    """One judgement with retries: {"status": "ok", "score"} or {"status": "unparseable", "why"}, with the raw
    replies and the attempts it took."""
    asked, raws, why = prompt, [], ""
    for attempt in range(1, MAX_ATTEMPTS + 1):
        content = judge.ask(asked)
        raws.append(str(content)[:4000])
        score, why = parse_score(str(content))
        if score is not None:
            return {"status": "ok", "score": score, "attempts": attempt, "raw": raws}
        asked = prompt + _RETRY.format(why=why)
    return {"status": "unparseable", "score": None, "why": why, "attempts": MAX_ATTEMPTS, "raw": raws}


def judge_content(gold: dict[str, Any], response: str, language: str, llm: Any | None, heuristic: Any
                  ) -> dict[str, dict[str, Any]]:
    """The three content judgements of one SHIFT: {key: {"status": "ok" | "unparseable" | "not computed",
    "score" (0–2), "judge", "heuristic", ...}}; qa_accuracy is absent where there is no gold answer."""
    has_gold = bool(gold.get("gold_answer"))
    out: dict[str, dict[str, Any]] = {}
    if gold.get("transcribed") is False:  # imported without txt_align: an empty question is not a question
        return {key: {"status": "not computed", "score": None, "reason": NO_TRANSCRIPT}
                for key in KEYS if key != "qa_accuracy" or has_gold}
    if not response.strip():
        keys = [k for k in KEYS if k != "qa_accuracy" or has_gold]
        for key in keys:
            heur = llm is None and key == "qa_accuracy"
            if llm is None and not heur:
                out[key] = {"status": "not computed", "score": None, "reason": NOT_COMPUTED}
            elif heur and language != "en":
                out[key] = {"status": "not computed", "score": None, "reason": HEURISTIC_EN_ONLY}
            else:
                judge = heuristic if heur else llm
                out[key] = {"status": "ok", "score": 0, "why": NO_RESPONSE, "judge": judge.name,
                            "heuristic": bool(heur)}
        return out
    asks = prompts(gold, response, language)
    for key in ("relevance", "consistency"):
        if llm is None:
            out[key] = {"status": "not computed", "score": None, "reason": NOT_COMPUTED}
        else:
            out[key] = ask_scored(llm, asks[key]) | {"judge": llm.name, "heuristic": False}
    if has_gold:
        if llm is not None:
            out["qa_accuracy"] = ask_scored(llm, asks["qa_accuracy"]) | {"judge": llm.name, "heuristic": False}
        elif language != "en":
            out["qa_accuracy"] = {"status": "not computed", "score": None, "reason": HEURISTIC_EN_ONLY}
        else:
            v = heuristic.judge_answer(str(gold.get("question", "")), str(gold["gold_answer"]),
                                       list(gold.get("gold_aliases") or []), response)
            out["qa_accuracy"] = {"status": "ok", "score": 2 if v.label == "correct" else 0, "why": v.raw,
                                  "judge": heuristic.name, "heuristic": True}
    return out
