"""A small client for OpenAI-compatible chat endpoints (vLLM, llama.cpp's server, a hosted provider).

One `POST {base_url}/v1/chat/completions` per request, standard library only. Every answer is cached on disk
under a digest of the request body (model, messages, sampling settings), so an interrupted job resumes without
asking twice and a rerun with the same cache gives the same text. The API key is read from an environment
variable whose *name* is configured; the key itself is sent in the Authorization header and nowhere else: not
stored on the client, not in the cache, not in an error message or a log line.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from dataset_builder.atomic import atomic_write_json
from dataset_builder.errors import UsageError

log = logging.getLogger("duplex_eval.openai_compat")

# HTTP statuses worth asking again (rate limits, an overloaded or restarting server); others fail at once.
TRANSIENT_STATUS = frozenset({408, 429, 500, 502, 503, 504})


class EndpointError(RuntimeError):
    """The endpoint could not be reached, or answered with an HTTP error or a body that is not a chat
    completion. Nothing is cached for such a request."""


def check_endpoint(base_url: str | None, model: str | None, option: str, arg_option: str,
                   api_key_env: str) -> tuple[str, str]:
    """(base_url, model), which no request can do without; a missing or schemeless one is a UsageError that
    names the command-line flags to pass (never the API key, which stays in the environment)."""
    missing = [name for name, value in (("base_url", base_url), ("model", model)) if not value]
    if missing:
        raise UsageError(f"{option} needs {arg_option} base_url=http://HOST:PORT and {arg_option} model=NAME "
                         f"(an OpenAI-compatible chat endpoint; missing: {', '.join(missing)}); an API key, if "
                         f"the server needs one, is read from the {api_key_env} environment variable")
    if urlsplit(str(base_url)).scheme not in ("http", "https"):
        raise UsageError(f"{option}: {arg_option} base_url must start with http:// or https://, "
                         "e.g. base_url=http://127.0.0.1:8000")
    return str(base_url), str(model)


def chat_url(base_url: str) -> str:
    """The chat-completions URL for a server root ("http://h:8000") or its API root ("http://h:8000/v1")."""
    base = base_url.rstrip("/")
    return base + ("/chat/completions" if base.endswith("/v1") else "/v1/chat/completions")


class ChatClient:
    """Cached chat completions from one model at one endpoint; safe to share between threads."""

    def __init__(self, base_url: str, model: str, *, api_key_env: str = "OPENAI_API_KEY",
                 cache_dir: Path | None = None, timeout_s: float = 120.0, http_attempts: int = 3,
                 option: str = "--openai", arg_option: str = "--openai-arg") -> None:
        base_url, model = check_endpoint(base_url, model, option, arg_option, api_key_env)
        if http_attempts < 1:
            raise UsageError(f"{arg_option} http_attempts must be >= 1, got {http_attempts}")
        if timeout_s <= 0:
            raise UsageError(f"{arg_option} timeout_s must be > 0, got {timeout_s}")
        self.url = chat_url(base_url)
        self.model = model
        self.api_key_env = api_key_env  # the name only; the key is read per request
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None
        self.timeout_s = float(timeout_s)
        self.http_attempts = int(http_attempts)
        self.requests_made = 0
        self.cache_hits = 0
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"ChatClient(url={self.url!r}, model={self.model!r}, api_key_env={self.api_key_env!r})"

    def request_body(self, messages: list[dict[str, str]], **sampling: Any) -> dict[str, Any]:
        """The JSON body sent for `messages`; `sampling` (temperature, seed, max_tokens, response_format...)
        is passed through, None values left out."""
        return {"model": self.model, "messages": messages, **{k: v for k, v in sampling.items() if v is not None}}

    def cache_path(self, body: dict[str, Any]) -> Path | None:
        if self.cache_dir is None:
            return None
        key = hashlib.sha256(json.dumps(body, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()
        return self.cache_dir / f"{key}.json"

    def complete(self, messages: list[dict[str, str]], **sampling: Any) -> str:
        """The assistant message's content for `messages`, from the cache when this exact request was made
        before."""
        body = self.request_body(messages, **sampling)
        path = self.cache_path(body)
        if path is not None and path.is_file():
            try:
                content = json.loads(path.read_text(encoding="utf-8"))["content"]
            except (OSError, ValueError, KeyError, TypeError):
                content = None  # a damaged entry is asked again and overwritten
            if isinstance(content, str):
                with self._lock:
                    self.cache_hits += 1
                return content
        content = self._post(body)
        if path is not None:
            atomic_write_json(path, {"request": body, "content": content})
        return content

    def _post(self, body: dict[str, Any]) -> str:
        headers = {"Content-Type": "application/json"}
        key = os.environ.get(self.api_key_env)
        if key:
            headers["Authorization"] = f"Bearer {key}"
        data = json.dumps(body).encode("utf-8")
        for attempt in range(1, self.http_attempts + 1):
            req = urllib.request.Request(self.url, data=data, headers=headers, method="POST")
            try:
                with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                    raw = resp.read()
                break
            except urllib.error.HTTPError as err:
                # The reason phrase only: an error body may echo the request, headers included.
                problem = f"HTTP {err.code} {err.reason}"
                transient = err.code in TRANSIENT_STATUS
            except (OSError, ValueError) as err:  # unreachable, refused, timed out
                problem = f"{type(err).__name__}: {getattr(err, 'reason', None) or err}"
                transient = True
            if not transient or attempt == self.http_attempts:
                raise EndpointError(f"request to {self.url} (model {self.model}) failed after {attempt} "
                                    f"attempt(s): {problem}")
            log.warning("request to %s failed (%s); asking again (%d of %d)", self.url, problem, attempt + 1,
                        self.http_attempts)
            time.sleep(min(2.0 ** attempt, 30.0))
        with self._lock:
            self.requests_made += 1
        try:
            payload = json.loads(raw.decode("utf-8"))
            content = payload["choices"][0]["message"]["content"]
        except (ValueError, KeyError, IndexError, TypeError):
            raise EndpointError(f"{self.url} (model {self.model}) did not answer with a chat completion: "
                                f"{raw[:200]!r}") from None
        return str(content or "")
