"""Orchestration: the virtual-clock episode runner, schedulers, run sharding and the CLI."""
