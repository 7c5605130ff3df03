"""The transcript-conditioned reference on the mini set, and its chat decider against a local stub server."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest

from dataset_builder.hf_dataset import list_cases
from eval.text_reference import ChatDecider, text_reference


def test_policy_on_exact_transcripts(mini_dataset: Path, tmp_path: Path) -> None:
    res = text_reference(list_cases(mini_dataset), _policy(), tmp_path)
    ex, im = res["by_condition"]["explicit"], res["by_condition"]["implicit"]
    # An independent solver recomputes every explicit gold answer from the script text alone.
    assert (ex["response_rate"]["k"], ex["response_rate"]["n"]) == (6, 6)
    assert ex["answer_accuracy"]["value"] == 1.0
    assert im["response_rate"]["k"] == 0  # it answers only when named
    assert res["scores"]["silence_preservation"]["value"] == 1.0
    assert res["paired"]["explicit_only"] == 6 and res["paired"]["mcnemar_p"] == pytest.approx(2 * 0.5 ** 6)
    assert res["heuristic"] is True
    assert (tmp_path / "text_reference_decisions.jsonl").read_text().count("\n") > 12


def _policy():
    from eval.text_reference import PolicyDecider

    return PolicyDecider()


class _Chat(BaseHTTPRequestHandler):
    prompts: list[str] = []

    def do_POST(self) -> None:  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        prompt = body["messages"][0]["content"]
        _Chat.prompts.append(prompt)
        latest = prompt.rsplit("The latest turn:", 1)[1]
        content = '{"respond": true, "answer": "42"}' if "Aria," in latest else '{"respond": false}'
        data = json.dumps({"choices": [{"message": {"content": content}}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


def test_chat_decider_sends_speaker_attributed_history(mini_dataset: Path, tmp_path: Path) -> None:
    server = HTTPServer(("127.0.0.1", 0), _Chat)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        cases = list_cases(mini_dataset)[:2]
        decider = ChatDecider(f"http://127.0.0.1:{server.server_port}", "stub", cache_dir=str(tmp_path / "c"))
        res = text_reference(cases, decider, tmp_path)
        n_prompts = len(_Chat.prompts)
        text_reference(cases, ChatDecider(f"http://127.0.0.1:{server.server_port}", "stub",
                                          cache_dir=str(tmp_path / "c")), tmp_path)
    finally:
        server.shutdown()
    # One request per distinct prompt: the explicit and implicit versions share every turn before the cue,
    # and those identical prompts are answered from the disk cache.
    assert len(set(_Chat.prompts)) == n_prompts < sum(len(c.script.turns) for c in cases)
    assert len(_Chat.prompts) == n_prompts  # the second pass is served from the disk cache
    first_turn = cases[0].script.turns[0]
    assert f"{first_turn.speaker}: {first_turn.text}" in _Chat.prompts[1]  # history is speaker-attributed
    assert "Aria" in _Chat.prompts[0]  # the duty preamble leads every prompt
    assert res["decider"] == "openai:stub" and res["heuristic"] is False
