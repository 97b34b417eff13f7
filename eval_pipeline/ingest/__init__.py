"""Ingest: checkpoint folders, JSONL reading, validation into samples and quarantine, human ratings."""
