"""User-stream plans, one module per benchmark: `plan(case, audio, protocol, sr) -> EpisodePlan`."""
