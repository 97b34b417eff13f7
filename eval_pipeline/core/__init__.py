"""Shared base: the rubric config, the warehouse, identifiers, text helpers, resampling. No Dagster here."""
