"""Scoring: per-sample scores and derived scores, summaries, comparison against the parent, gates."""
