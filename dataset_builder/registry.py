"""Lazy name registries: "module:Class" strings, imported only when chosen (TTS, ASR, judges, adapters)."""

from __future__ import annotations

import importlib
from typing import Any


class LazyRegistry:
    def __init__(self, kind: str, entries: dict[str, str]) -> None:
        self.kind = kind
        self._entries = dict(entries)

    def register(self, name: str, target: str) -> None:
        if ":" not in target:
            raise ValueError(f"{self.kind} target must be 'module:Class', got {target!r}")
        self._entries[name] = target

    def names(self) -> list[str]:
        return sorted(self._entries)

    def target(self, name: str) -> str:
        """The "module:Class" of a registered name; an explicit "module:Class" is its own target."""
        if ":" in name:
            return name
        if name not in self._entries:
            raise KeyError(f"unknown {self.kind} {name!r}; known: {self.names()} (or pass 'module:Class')")
        return self._entries[name]

    def load(self, name: str, **kwargs: Any) -> Any:
        module, _, cls = self.target(name).partition(":")
        return getattr(importlib.import_module(module), cls)(**kwargs)
