"""Checkpoints are dynamic partitions, registered by the checkpoint sensor (or the CLI)."""

import dagster as dg

CHECKPOINTS = dg.DynamicPartitionsDefinition(name="checkpoints")
