"""Lazy name registry: "module:Class" strings, so a heavy backend is imported only when it is chosen."""

from __future__ import annotations

import importlib
from typing import Any

from adapters.protocol import DuplexAgent

_REGISTRY: dict[str, str] = {
    "silent": "adapters.silent:SilentAgent",
    "oracle": "adapters.oracle:OracleAgent",
    "cascade": "adapters.cascade:CascadeAgent",
}


def register_adapter(name: str, target: str) -> None:
    _REGISTRY[name] = target


def adapter_names() -> list[str]:
    return sorted(_REGISTRY)


def adapter_target(name: str) -> str:
    if name not in _REGISTRY:
        raise KeyError(f"unknown adapter {name!r}; known: {adapter_names()} (or pass 'module:Class')")
    return _REGISTRY[name]


def load_adapter(name: str, **kwargs: Any) -> DuplexAgent:
    """Build an agent by registered name or by an explicit "module:Class" path."""
    target = name if ":" in name else adapter_target(name)
    module, _, cls = target.partition(":")
    agent = getattr(importlib.import_module(module), cls)(**kwargs)
    if not isinstance(agent, DuplexAgent):
        raise TypeError(f"{target} does not implement the DuplexAgent protocol")
    return agent
