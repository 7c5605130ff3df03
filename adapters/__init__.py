"""Streaming agents: the frame-stepped protocol, the lazy registry and the built-in reference agents."""

from adapters.protocol import DuplexAgent, Frame
from adapters.registry import adapter_names, load_adapter

__all__ = ["DuplexAgent", "Frame", "adapter_names", "load_adapter"]
