"""Content judges (docs/scoring.md): did the model's (ASR'd) speech answer correctly, and is a short utterance a mere
acknowledgement rather than taking the floor?

`heuristic` is offline and deterministic and says so in its name; reports must label it. Its version moves when
its rules do, so scores made under old rules are told apart: v1 accepted an alias found anywhere in the response,
v2 requires the gold and no other answer of its kind.
`openai` asks any OpenAI-compatible chat endpoint (vLLM, llama.cpp, a provider), caching every call on disk by
content hash so an interrupted scoring run resumes without paying twice. Its requests go through
`dataset_builder.http_client` (retries with backoff on 429/5xx/timeouts/dropped connections, Retry-After honoured,
at most `max_concurrency` in flight from any number of threads). A reply that holds no verdict is the label
"unparseable" with the reply kept as evidence: each benchmark counts it (MPE as a wrong answer, docs/benchmarks/mpe.md)
and reports how many there were; it is never dropped.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from dataset_builder.atomic import atomic_write_json
from dataset_builder.http_client import RetryingClient, RetryPolicy
from dataset_builder.openai_compat import EndpointError, chat_url, check_endpoint
from dataset_builder.registry import LazyRegistry
from metrics.answer_match import match
from metrics.textnorm import normalize

ANSWER_LABELS = ("correct", "incorrect", "unparseable")
ACK_LABELS = ("acknowledgement", "intrusion", "unparseable")


@dataclass
class Verdict:
    label: str
    raw: str  # the evidence: the judge's raw output, or the heuristic's reason

    def to_dict(self) -> dict[str, str]:
        return {"label": self.label, "raw": self.raw}


@runtime_checkable
class Judge(Protocol):
    name: str
    heuristic: bool

    def judge_answer(self, question: str, gold: str, aliases: list[str], response: str) -> Verdict: ...

    def classify_ack(self, transcript: str) -> Verdict: ...


# --- heuristic --------------------------------------------------------------------------------------------

# Single-token acknowledgements, and multi-token ones as they come out of normalize() (hyphens split).
_ACK_WORDS = {
    "ok", "okay", "k", "mm", "mmm", "hmm", "hm", "mhm", "mmhmm", "uh", "huh", "uhhuh", "yeah", "yep", "yup",
    "yes", "sure", "right", "alright", "noted", "understood", "cool", "ah", "oh", "aha", "gotcha",
}  # fmt: skip
_ACK_PHRASES = [("got", "it"), ("i", "see"), ("all", "right"), ("sounds", "good"), ("of", "course")]
MAX_ACK_TOKENS = 4


def _is_ack(tokens: list[str]) -> bool:
    i = 0
    while i < len(tokens):
        pair = tuple(tokens[i : i + 2])
        if pair in _ACK_PHRASES:
            i += 2
        elif tokens[i] in _ACK_WORDS:
            i += 1
        else:
            return False
    return True


class HeuristicJudge:
    """Offline rules. An answer is correct when the response states the gold and no other answer of its kind
    (a number in its unit, a clock time, a weekday, a code or label; metrics/answer_match.py); a free-text gold
    is looked for as a phrase."""

    name = "heuristic-v2"
    heuristic = True

    def judge_answer(self, question: str, gold: str, aliases: list[str], response: str) -> Verdict:
        if not response.strip():
            return Verdict("incorrect", "empty response")
        correct, reason = match(question, gold, aliases, response)
        return Verdict("correct" if correct else "incorrect", reason)

    def classify_ack(self, transcript: str) -> Verdict:
        tokens = normalize(transcript)
        if not tokens:
            return Verdict("unparseable", "empty transcript")
        if len(tokens) <= MAX_ACK_TOKENS and _is_ack(tokens):
            return Verdict("acknowledgement", " ".join(tokens))
        return Verdict("intrusion", " ".join(tokens))


# --- OpenAI-compatible endpoint ----------------------------------------------------------------------------

_ANSWER_PROMPT = """You grade a spoken assistant's answer, transcribed by speech recognition (expect \
recognition errors, spelled-out numbers and filler words).

Question: {question}
Gold answer: {gold}
Also acceptable: {aliases}
Transcribed response: {response}

The response is correct if it states the gold answer (or an acceptable equivalent) as its answer. It is \
incorrect if it gives a different answer, refuses, hedges between several answers, or says nothing relevant.
Reply with JSON only: {{"verdict": "correct"}} or {{"verdict": "incorrect"}}."""

_ACK_PROMPT = """A voice assistant made a short sound while humans were talking to each other. Its speech, \
transcribed by speech recognition:

"{transcript}"

Is this only a brief acknowledgement or backchannel ("okay", "mm-hmm", "got it") that does not take the \
floor, or does it say something of its own (an answer, a question, a comment)?
Reply with JSON only: {{"verdict": "acknowledgement"}} or {{"verdict": "intrusion"}}."""


class JudgeError(EndpointError):
    """The judge endpoint could not be reached, or kept failing past the retries, or answered with an HTTP error
    a retry cannot cure, or with a body that is not JSON (nothing is cached)."""


def json_reply(content: str) -> tuple[dict[str, Any] | None, str]:
    """(the object, "") from a judge's strict JSON reply: one object, optionally inside one ```json fence; or
    (None, why it cannot be used)."""
    text = content.strip()
    fence = re.fullmatch(r"```(?:json)?\s*(.*?)\s*```", text, flags=re.DOTALL)
    if fence:
        text = fence.group(1)
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as err:
        return None, f"not a JSON object ({err.msg})"
    if not isinstance(obj, dict):
        return None, "not a JSON object"
    return obj, ""


def _parse_verdict(content: str, allowed: tuple[str, ...]) -> str:
    m = re.search(r"\{.*?\}", content, flags=re.DOTALL)
    if not m:
        return "unparseable"
    try:
        obj = json.loads(m.group())
    except json.JSONDecodeError:
        return "unparseable"
    label = obj.get("verdict") if isinstance(obj, dict) else None
    label = label.strip().lower() if isinstance(label, str) else None
    return label if label in allowed else "unparseable"


class OpenAIJudge:
    """LLM judge over `POST {base_url}/v1/chat/completions`, temperature 0, our own prompts. Safe to call from
    several threads: the cache writes are atomic and `max_concurrency` bounds the requests in flight."""

    heuristic = False

    def __init__(
        self,
        base_url: str | None = None,
        model: str | None = None,
        api_key_env: str = "OPENAI_API_KEY",
        cache_dir: Path | None = None,
        timeout_s: float = 60,
        max_attempts: int = 5,
        max_concurrency: int = 4,
        backoff_s: float = 1.0,
        max_backoff_s: float = 60.0,
    ) -> None:
        base_url, model = check_endpoint(base_url, model, "--judge openai", "--judge-arg", api_key_env)
        self.url = chat_url(base_url)
        self.model = model
        self.api_key_env = api_key_env  # the name only; the key itself is read per request, never stored
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None
        self.timeout_s = float(timeout_s)
        self.http = RetryingClient(self.url, timeout_s=timeout_s, max_concurrency=int(max_concurrency),
                                   policy=RetryPolicy(int(max_attempts), float(backoff_s), float(max_backoff_s)),
                                   arg_option="--judge-arg")
        self.name = f"openai:{model}"

    def __repr__(self) -> str:
        return f"OpenAIJudge(url={self.url!r}, model={self.model!r}, api_key_env={self.api_key_env!r})"

    @property
    def max_concurrency(self) -> int:
        """Requests this client keeps in flight at most; a scorer measures that many items at once."""
        return self.http.max_concurrency

    @property
    def requests_made(self) -> int:
        """Requests the endpoint answered (cache hits and failed tries not counted)."""
        return self.http.requests_made

    def _cache_path(self, prompt: str) -> Path | None:
        if self.cache_dir is None:
            return None
        # The request is the model and the prompt (temperature is always 0): both are in the key, nothing else.
        key = hashlib.sha256(json.dumps([self.model, prompt]).encode("utf-8")).hexdigest()
        return self.cache_dir / f"{key}.json"

    def _post(self, prompt: str) -> str:
        body = {
            "model": self.model,
            "temperature": 0,
            "messages": [{"role": "user", "content": prompt}],
        }
        headers = {"Content-Type": "application/json"}
        key = os.environ.get(self.api_key_env)
        if key:
            headers["Authorization"] = f"Bearer {key}"
        try:
            raw = self.http.post(json.dumps(body).encode("utf-8"), headers, f"judge request (model {self.model})")
        except EndpointError as e:
            raise JudgeError(str(e)) from None
        try:
            payload = json.loads(raw.decode("utf-8"))
        except ValueError:
            raise JudgeError(f"judge at {self.url} (model {self.model}) answered with a body that is not JSON: "
                             f"{raw[:200]!r}") from None
        try:
            return str(payload["choices"][0]["message"]["content"] or "")
        except (KeyError, IndexError, TypeError):
            return json.dumps(payload)[:2000]  # kept as the raw evidence; parses as unparseable

    def ask(self, prompt: str) -> str:
        """One cached chat completion for a prompt of ours (also used by the transcript reference)."""
        path = self._cache_path(prompt)
        if path is not None and path.is_file():
            try:
                cached = json.loads(path.read_text(encoding="utf-8"))
                same = [cached.get("model"), cached.get("prompt")] == [self.model, prompt]
                content = cached["content"] if same else None
            except (OSError, ValueError, KeyError, TypeError, AttributeError):
                content = None  # a damaged entry is asked again and overwritten
            if isinstance(content, str):
                return content
        content = self._post(prompt)
        if path is not None:
            atomic_write_json(path, {"model": self.model, "prompt": prompt, "content": content})
        return content

    def judge_answer(self, question: str, gold: str, aliases: list[str], response: str) -> Verdict:
        if not response.strip():
            return Verdict("incorrect", "empty response")  # nothing to ask about
        prompt = _ANSWER_PROMPT.format(
            question=question, gold=gold, aliases=", ".join(aliases) or "(none)", response=response
        )
        content = self.ask(prompt)
        return Verdict(_parse_verdict(content, ANSWER_LABELS[:2]), content)

    def classify_ack(self, transcript: str) -> Verdict:
        if not transcript.strip():
            return Verdict("unparseable", "empty transcript")  # no exemption for silence-like noise
        content = self.ask(_ACK_PROMPT.format(transcript=transcript))
        return Verdict(_parse_verdict(content, ACK_LABELS[:2]), content)


_REGISTRY = LazyRegistry("judge", {
    "heuristic": "metrics.judges:HeuristicJudge",
    "openai": "metrics.judges:OpenAIJudge",
}, option="--judge", arg_option="--judge-arg")
DEFAULT_JUDGE = "heuristic"


def judge_names() -> list[str]:
    return _REGISTRY.names()


def get_judge(name: str = DEFAULT_JUDGE, **kwargs: Any) -> Judge:
    return _REGISTRY.load(name, **kwargs)


def chat_judge(judge: Any) -> Any | None:
    """The judge if it is a served model with a chat interface (`ask(prompt) -> str`, not heuristic), else None:
    what graded, open-ended judgements (persona adherence, M3 relevance and consistency) need."""
    if judge is None or getattr(judge, "heuristic", True) or not callable(getattr(judge, "ask", None)):
        return None
    return judge
