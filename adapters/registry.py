"""The adapter registry: lazy "module:Class" strings, so a heavy backend is imported only when chosen."""

from __future__ import annotations

from typing import Any

from adapters.protocol import DuplexAgent
from dataset_builder.errors import UsageError
from dataset_builder.registry import LazyRegistry

_REGISTRY = LazyRegistry("adapter", {
    "silent": "adapters.silent:SilentAgent",
    "oracle": "adapters.oracle:OracleAgent",
    "cascade": "adapters.cascade:CascadeAgent",
    "moshi": "adapters.moshi:MoshiAgent",
    "personaplex": "adapters.moshi:PersonaPlexAgent",
    "openai-realtime": "adapters.openai_realtime:OpenAIRealtimeAgent",
    "moshi-server": "adapters.moshi_server:MoshiServerAgent",
    "vllm-omni-duplex": "adapters.vllm_omni_duplex:VllmOmniDuplexAgent",
    "turn-based": "adapters.turn_based:TurnBasedAgent",
    "minicpm-o": "adapters.minicpm_o:MiniCPMOAgent",
    "freeze-omni": "adapters.freeze_omni:FreezeOmniAgent",
    "moshiko": "adapters.moshi:MoshikoAgent",
    "moshika": "adapters.moshi:MoshikaAgent",
    "j-moshi": "adapters.moshi:JMoshiAgent",
    "llm-jp-moshi": "adapters.moshi:LLMJpMoshiAgent",
    "flm-audio": "adapters.flm_audio:FLMAudioAgent",
    "voila": "adapters.voila:VoilaAgent",
    "fun-audio-chat": "adapters.fun_audio_chat:FunAudioChatAgent",
    "f-actor": "adapters.f_actor:FActorAgent",
}, option="--adapter", arg_option="--adapter-arg")
# What an agent must have: the protocol's attributes and its methods.
_MEMBERS = sorted({*DuplexAgent.__annotations__, *(n for n in vars(DuplexAgent) if not n.startswith("_"))})


def register_adapter(name: str, target: str) -> None:
    _REGISTRY.register(name, target)


def adapter_names() -> list[str]:
    return _REGISTRY.names()


def adapter_target(name: str) -> str:
    return _REGISTRY.target(name)


def load_adapter(name: str, **kwargs: Any) -> DuplexAgent:
    """Build an agent by registered name or by an explicit "module:Class" path."""
    agent = _REGISTRY.load(name, **kwargs)
    if not isinstance(agent, DuplexAgent):
        missing = [m for m in _MEMBERS if not hasattr(agent, m)]
        raise UsageError(f"{adapter_target(name)} (from --adapter {name}) does not implement the DuplexAgent "
                         f"protocol (adapters/protocol.py): it lacks {missing}")
    return agent
