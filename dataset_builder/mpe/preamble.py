"""The spoken duty preamble played before every Duplex-MPE scene (our own wording)."""

from __future__ import annotations

from dataset_builder.schema import ASSISTANT_NAME


def duty_preamble(name: str = ASSISTANT_NAME) -> str:
    """Who the assistant is and when it should answer, stay silent and stop (docs/benchmarks/mpe.md), in four
    sentences."""
    return (
        f"You are {name}, a voice assistant in a room where several people are talking. "
        "When someone asks you for something, answer them briefly. "
        "When people talk to each other, to another device, or to themselves, stay quiet. "
        "If someone else answers a question meant for you, or says you need not answer, "
        "stop speaking at once."
    )
