"""The OpenAI-compatible judge against a local server that answers 429 (with Retry-After), 500, garbage, hangs, or
holds requests to count how many are in flight: retries, backoff, the concurrency limit, the on-disk cache and
unparseable replies each behave as specified. Waits are recorded on a fake clock, not timed."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

import dataset_builder.http_client as http_client
from dataset_builder.errors import UsageError
from dataset_builder.http_client import RetryPolicy, retry_after_s
from metrics.judges import JudgeError, OpenAIJudge
from tests.http_fakes import FakeClock, FakeServer, Reply, Seen, chat_reply, json_reply

CORRECT = '{"verdict": "correct"}'
SECRET = "sk-judge-test-never-print-42"


@pytest.fixture()
def server() -> Iterator[FakeServer]:
    s = FakeServer(lambda seen: chat_reply(CORRECT))
    yield s
    s.close()


@pytest.fixture()
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    c = FakeClock()
    monkeypatch.setattr(http_client, "_sleep", c.sleep)
    monkeypatch.setattr(http_client, "_clock", c.clock)
    return c


def _judge(server: FakeServer, **kwargs: object) -> OpenAIJudge:
    return OpenAIJudge(server.url, "judge-model", **kwargs)  # type: ignore[arg-type]


def _ask(judge: OpenAIJudge, response: str = "It is Paris.") -> str:
    return judge.judge_answer("Capital of France?", "Paris", [], response).label


# --- retries ------------------------------------------------------------------------------------------------


def test_429_waits_exactly_what_retry_after_says(server: FakeServer, clock: FakeClock) -> None:
    server.script = [json_reply({"error": "slow down"}, 429, {"Retry-After": "7"})]
    judge = _judge(server)
    assert _ask(judge) == "correct"
    assert clock.waits == [7.0]  # the server's number, not our own backoff
    assert len(server.requests) == 2 and judge.requests_made == 1


def test_retry_after_is_capped_and_read_in_both_forms(server: FakeServer, clock: FakeClock) -> None:
    server.script = [json_reply({}, 429, {"Retry-After": "3600"})]
    assert _ask(_judge(server, max_backoff_s=30)) == "correct"
    assert clock.waits == [30.0]
    assert retry_after_s("2.5") == 2.5 and retry_after_s("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0
    assert retry_after_s("soon") is None and retry_after_s(None) is None and retry_after_s("-3") == 0.0


def test_500s_back_off_exponentially_then_succeed(server: FakeServer, clock: FakeClock) -> None:
    server.script = [Reply(500), Reply(502), Reply(503)]
    judge = _judge(server, backoff_s=2.0)
    assert _ask(judge) == "correct"
    assert len(server.requests) == 4 and len(clock.waits) == 3
    for attempt, wait in enumerate(clock.waits, start=1):
        full = 2.0 * 2 ** (attempt - 1)
        assert full / 2 <= wait <= full, clock.waits  # jittered down by at most half


def test_attempts_are_limited_and_nothing_is_cached(server: FakeServer, clock: FakeClock, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch,
                                                     caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setenv("JUDGE_TEST_KEY", SECRET)
    server.default = lambda seen: Reply(500, b'{"echo": "' + seen.headers.get("Authorization", "").encode() + b'"}')
    judge = _judge(server, max_attempts=3, api_key_env="JUDGE_TEST_KEY", cache_dir=tmp_path)
    with caplog.at_level(logging.WARNING), pytest.raises(JudgeError, match="failed after 3 attempt") as err:
        _ask(judge)
    assert len(server.requests) == 3 and len(clock.waits) == 2
    assert all(r.headers["Authorization"] == f"Bearer {SECRET}" for r in server.requests)
    assert SECRET not in str(err.value) and SECRET not in caplog.text  # the key is sent, never said
    assert "HTTP 500" in str(err.value) and "trying again" in caplog.text
    assert list(tmp_path.iterdir()) == []


def test_a_client_error_is_not_retried(server: FakeServer, clock: FakeClock) -> None:
    server.default = lambda seen: json_reply({"error": "no such model"}, 404)
    with pytest.raises(JudgeError, match="after 1 attempt.*HTTP 404"):
        _ask(_judge(server))
    assert len(server.requests) == 1 and clock.waits == []


def test_a_hanging_server_times_out_and_is_asked_again(server: FakeServer, clock: FakeClock) -> None:
    server.script = [Reply(hang=True)]
    judge = _judge(server, timeout_s=1.0)
    assert _ask(judge) == "correct"
    # The hung request and the answered one (a host too loaded to answer within the timeout would add tries).
    assert len(server.requests) >= 2 and len(clock.waits) == len(server.requests) - 1


def test_a_dropped_connection_is_asked_again(clock: FakeClock) -> None:
    # A server that accepts and closes at once: no status line at all.
    import socket

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    accepted: list[int] = []

    def serve() -> None:
        while len(accepted) < 3:
            conn, _ = sock.accept()
            accepted.append(1)
            conn.close()

    threading.Thread(target=serve, daemon=True).start()
    judge = OpenAIJudge(f"http://127.0.0.1:{sock.getsockname()[1]}", "m", max_attempts=3)
    with pytest.raises(JudgeError, match="after 3 attempt"):
        _ask(judge)
    sock.close()
    assert len(accepted) == 3 and len(clock.waits) == 2


def test_unreachable_server_fails_after_its_attempts(clock: FakeClock) -> None:
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(JudgeError, match="after 2 attempt"):
        _ask(OpenAIJudge(f"http://127.0.0.1:{port}", "m", max_attempts=2))
    assert len(clock.waits) == 1


def test_bad_settings_are_usage_errors(server: FakeServer) -> None:
    for bad in ({"max_attempts": 0}, {"max_concurrency": 0}, {"timeout_s": 0}, {"backoff_s": -1}):
        with pytest.raises(UsageError, match="--judge-arg"):
            _judge(server, **bad)
    assert RetryPolicy(backoff_s=0).wait_s(3, None) == 0.0


# --- garbage ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("content", ["Correct!", '{"verdict": "probably"}', "{verdict: correct", ""])
def test_garbage_is_unparseable_with_the_reply_kept(server: FakeServer, content: str) -> None:
    server.default = lambda seen: chat_reply(content)
    judge = _judge(server)
    v = judge.judge_answer("q", "Paris", [], "Paris")
    assert (v.label, v.raw) == ("unparseable", content)
    a = judge.classify_ack("okay")
    assert (a.label, a.raw) == ("unparseable", content)


def test_a_body_that_is_not_a_chat_completion(server: FakeServer) -> None:
    server.default = lambda seen: json_reply({"object": "error", "message": "context too long"})
    v = _judge(server).judge_answer("q", "Paris", [], "Paris")
    assert v.label == "unparseable" and "context too long" in v.raw  # JSON, but no choices: evidence kept
    server.default = lambda seen: Reply(200, b"<html>proxy login</html>")
    with pytest.raises(JudgeError, match="not JSON"):
        _judge(server).judge_answer("q", "Paris", [], "Paris")  # the wrong server: loud, not a verdict


# --- cache --------------------------------------------------------------------------------------------------


def _batch(judge: OpenAIJudge) -> list[str]:
    answers = [judge.judge_answer("How long?", "150", [], f"It takes {n} minutes.").label for n in (140, 150, 160)]
    return answers + [judge.classify_ack(t).label for t in ("Mm-hmm.", "The answer is 150.")]


def test_rerun_over_the_cache_makes_no_request(server: FakeServer, tmp_path: Path) -> None:
    def grade(seen: Seen) -> Reply:
        prompt = seen.json()["messages"][0]["content"]
        if "Transcribed response: It takes 150 minutes." in prompt:
            return chat_reply(CORRECT)
        if "Mm-hmm" in prompt:
            return chat_reply("I'd say it's a backchannel")  # unparseable, cached like any reply
        return chat_reply('{"verdict": "incorrect"}' if "Gold answer" in prompt else '{"verdict": "intrusion"}')

    server.default = grade
    first = _batch(_judge(server, cache_dir=tmp_path))
    assert first == ["incorrect", "correct", "incorrect", "unparseable", "intrusion"]
    assert len(server.requests) == 5 and len(list(tmp_path.glob("*.json"))) == 5
    assert not [p for p in tmp_path.iterdir() if not p.name.endswith(".json")]  # no temporary file left behind
    rerun = _judge(server, cache_dir=tmp_path)
    assert _batch(rerun) == first and len(server.requests) == 5 and rerun.requests_made == 0
    # The model is part of the key: another judge model asks for itself.
    other = OpenAIJudge(server.url, "another-model", cache_dir=tmp_path)
    other.judge_answer("How long?", "150", [], "It takes 150 minutes.")
    assert len(server.requests) == 6


def test_a_damaged_cache_entry_is_asked_again(server: FakeServer, tmp_path: Path) -> None:
    judge = _judge(server, cache_dir=tmp_path)
    assert _ask(judge) == "correct"
    (entry,) = tmp_path.glob("*.json")
    entry.write_text('{"model": "judge-model", "content": ')  # cut short by a crash of an older writer
    server.default = lambda seen: chat_reply('{"verdict": "incorrect"}')
    assert _ask(_judge(server, cache_dir=tmp_path)) == "incorrect"
    assert len(server.requests) == 2 and json.loads(entry.read_text())["content"] == '{"verdict": "incorrect"}'


# --- concurrency --------------------------------------------------------------------------------------------


def test_at_most_max_concurrency_requests_in_flight(server: FakeServer, tmp_path: Path) -> None:
    """The server holds each request until three are in flight at once. A limit of 3 therefore shows exactly 3
    (fewer would leave the first ones waiting for a timeout; more would show more)."""
    limit, n = 3, 12
    state = {"in": 0, "max": 0, "full": False}
    cond = threading.Condition()

    def hold(seen: Seen) -> None:
        with cond:
            state["in"] += 1
            state["max"] = max(state["max"], state["in"])
            state["full"] = state["full"] or state["in"] >= limit
            cond.notify_all()
            cond.wait_for(lambda: state["full"], timeout=20)
            state["in"] -= 1

    server.on_request = hold
    judge = _judge(server, max_concurrency=limit, cache_dir=tmp_path)
    labels: list[str] = [""] * n

    def work(i: int) -> None:
        labels[i] = judge.judge_answer("How long?", "150", [], f"It takes {i} minutes.").label

    threads = [threading.Thread(target=work, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert labels == ["correct"] * n and len(server.requests) == n
    assert state["max"] == limit and judge.http.max_in_flight == limit
    assert len(list(tmp_path.glob("*.json"))) == n


def test_retry_after_holds_back_every_thread_of_the_client(server: FakeServer, clock: FakeClock) -> None:
    judge = _judge(server, max_concurrency=2)
    server.script = [json_reply({}, 429, {"Retry-After": "5"})]
    assert _ask(judge, "first") == "correct"
    assert clock.waits == [5.0]
    # Another thread arriving inside the pause waits out the rest of it before asking.
    judge.http._pause(4.0)
    assert _ask(judge, "second") == "correct"
    assert clock.waits == [5.0, 4.0]
