"""`vllm-omni-duplex`: MiniCPM-o 4.5 full duplex served by vLLM-Omni on `/v1/realtime?duplex=1` (docs/models.md).

Written against vLLM-Omni's experimental full-duplex serving (upstream PR 5115, read in the fork vraiti/vllm-omni at
d6240742, `UPSTREAM`), and driven the way its own clients drive it: `RealtimeDuplexClient` and `build_realtime_url`
(vllm_omni/experimental/fullduplex/client.py), the demo examples/online_serving/minicpmo/realtime_duplex_demo.py and
the web client examples/online_serving/minicpmo/realtime_web/app/static/app.js. Paths below are in that tree.

- The URL carries `duplex=1`, `model`, `minicpmo45_native_duplex=1` and `autostart=0` (client.py:68-85; app.js:84-91;
  the demo passes autostart=0 with its reference voice, realtime_duplex_demo.py:186-191). Without `autostart=0`,
  `?model=` makes the server open a default session before it reads ours (openai/realtime_session.py:54-57), and our
  `session.update` only updates it.
- `session.update` is `RealtimeDuplexClient.configure`'s (client.py:329-356): beta layout, `turn_detection: null`
  (anything else is refused, openai/realtime_input.py:995-1012), `overlap_policy: "listen_only"`,
  `playback_commit_policy: "ack_only"` and `extra_body {auto_response: true, minicpmo45_native_duplex: true,
  force_listen_count: 0}`. Without `extra_body.minicpmo45_native_duplex` the session is the generic commit-only path
  (minicpmo45/adapter.py:43-45), which answers only a committed turn: this adapter never commits, so it measured a
  silent model. `ref_audio` (the assistant's reference voice, a WAV file sent as a data URL, as the demo's
  `_ref_audio_data_url`, realtime_duplex_demo.py:171-175) is required: a native session with audio output without it
  is refused with `ref_audio_required` (minicpmo45/adapter.py:101-106; openai/serving.py:1152-1168).
- The prompt is sent raw as `instructions`: the server wraps it (`<|im_start|>system\\n...`, and `<|audio_start|>` +
  reference + `<|audio_end|><|im_end|>`, minicpmo45/policy.py:46-56; an empty one becomes "Streaming Omni
  Conversation.").
- User audio goes at 16 kHz PCM16 in 200 ms appends with `sample_rate_hz` (client.py:23,363-390; app.js:23-25,
  257-280): the model hears 1 s units at 16 kHz (minicpmo45/policy.py:14-22), so a 200 ms cadence moves no unit
  boundary. The 24 kHz session audio is resampled here, one 200 ms chunk at a time (adapters/chunking.py).
- The model owns turn-taking: it decides at each unit whether to listen (`response.listen`, possibly without a
  response) or speak (`response.speak` with `metadata {session_id, epoch, model_speak}`, after `response.created`
  and no later than the first audio, openai/realtime_output.py:74-100,727-745); both are counted. Its speech comes as
  `response.audio.delta` (`format`, `sample_rate_hz` 24000: minicpmo45/data_plane.py:739-753), each followed by its
  `response.audio_transcript.delta` (DESIGN.md:572; realtime_output.py:112-150): a transcript piece is due when
  the audio delta before it starts sounding. Every delta is played from its arrival, as the web client plays it
  (app.js:359-366: nothing is dropped on a cancelled response); once a response's audio is done and played out, the
  client acknowledges it (`playback.ack`, client.py:395-409, app.js:313-338), which `ack_only` needs to commit the
  response to the model's history.
- A session is closed with `session.close` and its `session.closed` awaited (client.py:411-417; app.js:603-620). A
  native session left without it is kept for resume for `disconnect_grace_s` 30 s (engine/lease.py:28;
  deploy/minicpmo_4_5_duplex.yaml:12), and the server admits at most `max_sessions` at once (1 by default,
  DESIGN.md:463; 2 in deploy/minicpmo_4_5_duplex.yaml:19): back-to-back episodes without the close met
  `resource_exhausted`. `sessions=N` beyond the server's limit meets it too. A
  session whose connection dropped is still held for the grace: a reset refused for capacity retries for up to
  `admission_wait_s` (35 s: the grace and the 5 s reaper interval, DESIGN.md:457-458), one log line per try.
- `step` takes the audio that has arrived before it sends the user frame: the frame in slot t was here before user
  frame t left (docs/adding-a-model.md, one timing rule).

`sessions=N` opens N concurrent sessions, one per batch slot (`batch_size = N`), so the lockstep runner keeps N
episodes in flight against one engine, all paced together in wall-clock time; each slot's session is independent
(its own connection), and a session that breaks fails its own episode only. Live feasibility is measured per
session from the client (`session_feasibility(slot)`), and each episode's rec.json records its own session's
(docs/scale.md). `session_stats` keeps each slot's last closed session with its listen/speak decisions.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import time
from pathlib import Path
from typing import Any

import numpy as np

from adapters.chunking import ChunkGatherer
from adapters.openai_realtime import (
    SAMPLE_RATE,
    OpenAIRealtimeAgent,
    RealtimeSessionError,
    _Session,
    session_url,
)
from adapters.protocol import Frame
from adapters.upstream import Pin
from dataset_builder.audio import to_pcm16
from dataset_builder.errors import UsageError

log = logging.getLogger(__name__)

UPSTREAM: tuple[Pin, ...] = (Pin("git", "vraiti/vllm-omni", "d6240742f365cd813991b540b8ea797347aac72e"),)
DEFAULT_MODEL = "openbmb/MiniCPM-o-4_5"  # the demo's --model (realtime_duplex_demo.py:372)
INPUT_RATE = 16_000  # client.py:23 PCM16_SAMPLE_RATE; app.js:23 INPUT_RATE
APPEND_S = 0.2  # client.py:367 chunk_ms=200; app.js:25 SEND_INTERVAL_MS
CLOSE_TIMEOUT_S = 20.0  # client.py:411 close_session(timeout_s=20.0)
# A session whose connection dropped is held for its disconnect grace (30 s) and reaped within the reaper interval
# (5 s) after it (DESIGN.md:457-458): a reset refused for capacity retries that long.
ADMISSION_WAIT_S = 35.0


def ref_audio_url(ref_audio: str) -> str:
    """A reference voice as the server takes it: a data URL as is, a WAV file as `data:audio/wav;base64,...`."""
    if ref_audio.startswith("data:"):
        return ref_audio
    path = Path(ref_audio).expanduser()
    if not path.is_file():
        raise UsageError(f"vllm-omni-duplex: ref_audio {ref_audio}: no such file (a WAV of the assistant's voice)")
    return "data:audio/wav;base64," + base64.b64encode(path.read_bytes()).decode("ascii")


def duplex_url(url: str, model: str) -> str:
    """`build_realtime_url` (client.py:68-85): the native-duplex query, each parameter kept where the URL has it."""
    return session_url(url, model, {"duplex": "1", "minicpmo45_native_duplex": "1", "autostart": "0"})


class _DuplexSession(_Session):
    """One native-duplex session: vLLM-Omni's events on top of the Realtime ones, its acknowledgements and close."""

    name, server = "vllm-omni-duplex", "vLLM-Omni server"
    ready = "session.created"  # RealtimeDuplexClient.configure waits for it (client.py:357-361)

    def __init__(self, loop: asyncio.AbstractEventLoop, frame_size: int) -> None:
        super().__init__(loop, frame_size, playback="keep")
        self.decisions: dict[str, int] = {}  # the model's listen/speak decisions, counted
        self.acked: set[str] = set()  # items whose playback was acknowledged
        self.closed = asyncio.Event()  # `session.closed` arrived

    def _on_dialect(self, event: dict[str, Any]) -> bool:
        kind = event.get("type")
        if kind in ("response.listen", "response.speak"):
            decision = kind.removeprefix("response.")
            if kind == "response.speak" and (event.get("metadata") or {}).get("model_speak") is not True:
                raise RealtimeSessionError(f"a response.speak without metadata.model_speak: {json.dumps(event)[:160]}")
            with self.lock:
                self.decisions[decision] = self.decisions.get(decision, 0) + 1
            return True
        if kind == "session.closed":
            self.closed.set()
            return True
        if kind == "response.audio.delta":
            fmt, rate = event.get("format", "pcm16"), event.get("sample_rate_hz", SAMPLE_RATE)
            if fmt != "pcm16" or rate != SAMPLE_RATE:
                raise RealtimeSessionError(f"the server sent {fmt} audio at {rate} Hz; this adapter plays 24 kHz "
                                           "PCM16 (MiniCPM-o's rate, minicpmo45/data_plane.py:739-753)")
        return False

    def _text_mark(self, item_id: str) -> int:
        # vLLM-Omni sends each transcript piece after the audio delta it belongs to (DESIGN.md:572).
        return self.last_delta_at.get(item_id, self.received.get(item_id, 0))

    def take(self, n: int) -> tuple[np.ndarray, str | None]:
        out = super().take(n)
        with self.lock:
            due = [i for i in self.audio_done if i and i not in self.acked and i in self.received
                   and self.played.get(i, 0) >= self.received[i]]
            self.acked.update(due)
            acks = [{"type": "playback.ack", "response_id": self.item_response.get(i, ""), "item_id": i,
                     "played_ms": self.played[i] * 1000 // SAMPLE_RATE,
                     "committed_ms": self.played[i] * 1000 // SAMPLE_RATE} for i in due]
        for ack in acks:  # app.js:313-338: once a response's audio has been played out
            self.send(ack)
        return out

    async def aclose(self) -> None:
        """`session.close`, then its `session.closed` (bounded), then the connection (client.py:411-417). Sent
        whenever the connection is still up, a failed episode's too: the server holds what is not closed."""
        if self.ws is not None and len(self.tasks) == 2 and not self.tasks[0].done() and not self.closing:
            self.closing = True  # the server may close the connection after `session.closed`: not a failure
            self.outbox.put_nowait(json.dumps({"type": "session.close"}))
            closed = asyncio.create_task(self.closed.wait())
            await asyncio.wait([closed, self.tasks[0]], timeout=CLOSE_TIMEOUT_S, return_when=asyncio.FIRST_COMPLETED)
            closed.cancel()
            if not self.closed.is_set():
                log.warning("vllm-omni-duplex: no session.closed after session.close: the server may hold the session "
                            "for its disconnect grace (30 s) and refuse the next one (resource_exhausted)")
        await super().aclose()


class VllmOmniDuplexAgent(OpenAIRealtimeAgent):
    """N concurrent native-duplex sessions against a vLLM-Omni server; a plain agent when `sessions=1`."""

    name = "vllm-omni-duplex"

    def __init__(self, url: str = "ws://localhost:8000/v1/realtime", model: str = DEFAULT_MODEL,
                 ref_audio: str = "", api_key_env: str = "", sessions: int = 1, frame_size: int = 480,
                 voice: str | None = None, session_extra: str | dict[str, Any] | None = None,
                 connect_timeout_s: float = 60.0, admission_wait_s: float = ADMISSION_WAIT_S) -> None:
        if not isinstance(sessions, int) or sessions < 1:
            raise UsageError(f"vllm-omni-duplex: sessions must be a positive integer, got {sessions!r}")
        if not ref_audio:
            raise UsageError("vllm-omni-duplex: ref_audio is required (--adapter-arg ref_audio=VOICE.wav, the "
                             "assistant's reference voice): vLLM-Omni refuses a native MiniCPM-o session with audio "
                             "output without one (ref_audio_required)")
        if isinstance(session_extra, str):
            try:
                session_extra = json.loads(session_extra) if session_extra else None
            except json.JSONDecodeError as err:
                raise UsageError(f"vllm-omni-duplex: session_extra is not JSON: {err}") from None
        if session_extra is not None and not isinstance(session_extra, dict):
            raise UsageError("vllm-omni-duplex: session_extra must be a JSON object (extra `session` fields)")
        self.session_extra: dict[str, Any] = session_extra or {}
        self.ref_audio = ref_audio_url(ref_audio)
        # `session.update` is built here (`_session_update`); api "ga" only keeps the beta header off, which
        # vLLM-Omni's client does not send. The model owns its turns: no server VAD protocol applies.
        super().__init__(url=url, model=model, api_key_env=api_key_env, frame_size=frame_size, api="ga",
                         turn_detection="none", voice=voice, connect_timeout_s=connect_timeout_s, protocol="live")
        self.url = duplex_url(url, model)
        self.batch_size = sessions
        self.admission_wait_s = admission_wait_s
        self.version = f"2/duplex/{model}"
        self._gatherers = [ChunkGatherer(APPEND_S, SAMPLE_RATE, frame_size, INPUT_RATE) for _ in range(sessions)]
        self._sent = [0] * sessions  # 16 kHz samples appended in each slot's session
        self._slots: list[_DuplexSession | None] = [None] * sessions
        self.session_stats: list[dict[str, Any] | None] = [None] * sessions  # each slot's last closed session

    @staticmethod
    def _pins() -> tuple[Pin, ...]:
        return UPSTREAM

    def __repr__(self) -> str:
        return (f"VllmOmniDuplexAgent(model={self.model!r}, sessions={self.batch_size}, "
                f"frame_size={self.frame_size}, api_key_env={self.api_key_env!r})")

    def runtime(self) -> dict[str, Any]:
        """Recorded in every rec.json: how many sessions ran at once (they share the engine's throughput)."""
        return {"sessions": self.batch_size, "session_extra_keys": sorted(self.session_extra),
                "input_rate": INPUT_RATE, "append_ms": round(APPEND_S * 1000), "playback": "keep",
                "upstream": self.upstream}

    def _session_update(self, system_prompt: str | None) -> dict[str, Any]:
        session: dict[str, Any] = {
            "model": self.model, "modalities": ["audio", "text"], "input_audio_format": "pcm16",
            "output_audio_format": "pcm16", "turn_detection": None, "overlap_policy": "listen_only",
            "playback_commit_policy": "ack_only",
            "extra_body": {"auto_response": True, "minicpmo45_native_duplex": True, "force_listen_count": 0},
            "ref_audio": self.ref_audio}
        if self.config.voice:
            session["voice"] = self.config.voice
        if system_prompt is not None:
            session["instructions"] = system_prompt
        session.update(self.session_extra)
        return {"type": "session.update", "session": session}

    def _new_session(self) -> _Session:
        return _DuplexSession(self._io.loop, self.frame_size)

    def reset(self, system_prompt: str | None, seed: int) -> None:
        self.reset_slot(0, system_prompt, seed)

    def reset_slot(self, slot: int, system_prompt: str | None, seed: int) -> None:
        """A fresh server session for one slot; the others go on. `seed` cannot reach a served model."""
        self._close_slot(slot)
        self._gatherers[slot].reset()
        self._sent[slot] = 0
        deadline = time.monotonic() + self.admission_wait_s
        while True:
            try:
                session = self._open_session(system_prompt)
                break
            except RealtimeSessionError as err:  # the server is full: a dropped session is still held
                if "resource_exhausted" not in str(err) or time.monotonic() >= deadline:
                    raise
                log.warning("vllm-omni-duplex: slot %d: the server is at its session limit (resource_exhausted); "
                            "retrying for up to %.0f s while a dropped session's hold runs out", slot,
                            deadline - time.monotonic())
                time.sleep(1.0)
        assert isinstance(session, _DuplexSession)
        self._slots[slot] = session

    def step(self, user_frame: np.ndarray, forced_model_frame: np.ndarray | None = None) -> Frame:
        frame = self._step_slot(0, user_frame)
        if isinstance(frame, BaseException):
            raise frame
        return frame

    def step_batch(self, user_frames: np.ndarray, forced: np.ndarray | None = None,
                   forced_mask: np.ndarray | None = None) -> list[Frame | BaseException]:
        return [self._step_slot(i, user_frames[i]) for i in range(self.batch_size)]

    def _step_slot(self, slot: int, user_frame: np.ndarray) -> Frame | BaseException:
        session = self._slots[slot]
        if session is None:  # a slot without an episode hears silence and says nothing
            return Frame(np.zeros(self.frame_size, np.float32))
        try:
            audio, text = session.take(self.frame_size)  # before this frame is sent: slot t cannot depend on it
        except RealtimeSessionError as err:
            return err
        chunk = self._gatherers[slot].push(user_frame)
        if chunk is not None:
            self._sent[slot] += chunk.size
            session.send({"type": "input_audio_buffer.append",
                          "audio": base64.b64encode(to_pcm16(chunk).astype("<i2").tobytes()).decode("ascii"),
                          "input_audio_format": "pcm16", "sample_rate_hz": INPUT_RATE,
                          "duration_ms": round(APPEND_S * 1000), "audio_end_ms": self._sent[slot] * 1000 // INPUT_RATE})
        return Frame(audio, text)

    def _close_slot(self, slot: int) -> None:
        session, self._slots[slot] = self._slots[slot], None
        if session is None:
            return
        self._io.run(session.aclose(), CLOSE_TIMEOUT_S + 10)
        self.session_stats[slot] = stats = {**session.feasibility(), "decisions": dict(session.decisions)}
        if stats["underruns"]:
            log.warning("vllm-omni-duplex: session %d: the server fell behind real time in %d of %d frames",
                        slot, stats["underruns"], stats["frames"])

    def session_feasibility(self, slot: int = 0) -> dict[str, Any] | None:
        """Slot `slot`'s open session, as its client saw it: each episode records its own (docs/scale.md)."""
        session = self._slots[slot]
        return None if session is None else session.feasibility()

    def _close_session(self) -> None:
        for slot in range(len(getattr(self, "_slots", []))):
            self._close_slot(slot)
