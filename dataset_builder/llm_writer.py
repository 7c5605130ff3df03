"""What the optional LLM writers of Duplex-MPE (`mpe/writer.py`) and M3 (`m3/writer.py`) share: the loop that asks
an OpenAI-compatible endpoint (`openai_compat.ChatClient`, cached on disk) for a rewrite, checks it, asks again
with the broken rule named, and after the last attempt stops the build with one line or (`on_failure=template`)
keeps the composed text and counts it. Each benchmark's writer brings its own prompt, parser and checks.
"""

from __future__ import annotations

import json
import logging
import re
import threading
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from dataset_builder.errors import UsageError
from dataset_builder.openai_compat import ChatClient, EndpointError

log = logging.getLogger("duplex_eval.build")

ON_FAILURE = ("fail", "template")

T = TypeVar("T")


class WriterError(RuntimeError):
    """A pair or dialogue no attempt could write within the rules, or an endpoint that failed; one line."""


class Rejected(ValueError):
    """A rewrite broke `rule`; `detail` says where and how (it goes back to the model in the next request)."""

    def __init__(self, rule: str, detail: str) -> None:
        super().__init__(f"{rule}: {detail}")
        self.rule, self.detail = rule, detail


def one_line(text: object, limit: int = 300) -> str:
    """`text` on one line, cut to `limit` characters."""
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[:limit - 3] + "..."


def json_object(content: str) -> Any:
    """The JSON object in a model's answer (code fences and words around it allowed); raises Rejected."""
    text = re.sub(r"^\s*```(?:json)?|```\s*$", "", content.strip())
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end < start:
        raise Rejected("json", "the answer holds no JSON object")
    try:
        return json.loads(text[start:end + 1])
    except json.JSONDecodeError as err:
        raise Rejected("json", f"the answer is not valid JSON ({err.msg} at character {err.pos})") from None


def default_cache_dir() -> Path:
    """Answers are kept next to the TTS clip cache ($DUPLEX_EVAL_CACHE/writer, else ~/.cache/duplex-eval/writer)."""
    from dataset_builder.tts.cache import default_cache_dir as tts_cache_dir

    return tts_cache_dir().parent / "writer"


class ChatWriter:
    """The ask-check-retry loop of an LLM writer and its counts; safe to share between threads. A subclass sets
    `unit` (what one rewrite is: "pair", "dialogue"), `kept` (what `on_failure=template` keeps: "template",
    "composed") and `prompt_version`, and calls `rewrite` with its own request and checks."""

    unit = "item"
    kept = "template"
    prompt_version = ""

    def __init__(self, base_url: str | None, model: str | None, *, api_key_env: str, cache_dir: Path | str | None,
                 timeout_s: float, attempts: int, temperature: float, max_tokens: int | None, on_failure: str,
                 json_mode: bool, http_attempts: int) -> None:
        if attempts < 1:
            raise UsageError(f"--writer-arg attempts must be >= 1, got {attempts}")
        if on_failure not in ON_FAILURE:
            raise UsageError(f"--writer-arg on_failure must be one of {ON_FAILURE}, got {on_failure!r}")
        self.client = ChatClient(str(base_url or ""), str(model or ""), api_key_env=api_key_env,
                                 cache_dir=Path(cache_dir) if cache_dir else None, timeout_s=timeout_s,
                                 http_attempts=http_attempts, option="--writer openai", arg_option="--writer-arg")
        self.name = f"openai:{self.client.model}"
        self.attempts, self.temperature, self.max_tokens = attempts, temperature, max_tokens
        self.on_failure, self.json_mode = on_failure, json_mode
        self.rewritten = 0
        self.fallback: list[str] = []  # ids whose composed text was kept
        self.rejections: Counter[str] = Counter()
        self._lock = threading.Lock()  # pairs may be written from several threads

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.client!r}, attempts={self.attempts})"

    def complete(self, content: str, seed: int) -> str:
        """The model's answer to one user message, with this writer's sampling settings."""
        return self.client.complete(
            [{"role": "user", "content": content}], temperature=self.temperature, max_tokens=self.max_tokens,
            # A different seed per attempt as well as the named rule: a retry is a new request, not a cache hit.
            seed=seed % 2**31, response_format={"type": "json_object"} if self.json_mode else None)

    def rewrite(self, item_id: str, ask: Callable[[int, Rejected | None], str],
                accept: Callable[[str], T]) -> T | None:
        """`accept(ask(attempt, rejected))` for the first attempt whose answer `accept` does not reject; None when
        every attempt was rejected and `on_failure=template` keeps the composed text (counted); else WriterError."""
        rejected: Rejected | None = None
        for attempt in range(1, self.attempts + 1):
            try:
                content = ask(attempt, rejected)
            except EndpointError as err:
                raise WriterError(f"writer {self.name}: {self.unit} {item_id}: {one_line(err)}") from None
            try:
                out = accept(content)
            except Rejected as err:
                rejected = err
                with self._lock:
                    self.rejections[err.rule] += 1
                log.info("writer %s: %s %s attempt %d/%d rejected: %s", self.name, self.unit, item_id, attempt,
                         self.attempts, one_line(err, 200))
                continue
            with self._lock:
                self.rewritten += 1
            return out
        assert rejected is not None
        what = f"{self.unit} {item_id}: rule {rejected.rule}: {one_line(rejected.detail)}"
        if self.on_failure == "template":
            log.warning("writer %s: %s after %d attempts; keeping the %s text", self.name, what, self.attempts,
                        self.kept)
            with self._lock:
                self.fallback.append(item_id)
            return None
        raise WriterError(f"writer {self.name}: {what} (after {self.attempts} attempts; pass --writer-arg "
                          f"on_failure=template to keep the {self.kept} text for such {self.unit}s)")

    def summary(self) -> dict[str, Any]:
        return {"name": self.name, "prompt": self.prompt_version, "rewritten": self.rewritten,
                "template_fallback": len(self.fallback), f"fallback_{self.unit}s": sorted(self.fallback),
                "rejected_attempts": dict(sorted(self.rejections.items())),
                "requests": self.client.requests_made, "cache_hits": self.client.cache_hits}
