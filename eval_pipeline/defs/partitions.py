"""Checkpoints are dynamic partitions, registered by the checkpoint sensor (or the CLI)."""

import dagster as dg

CHECKPOINTS_PARTITION = "checkpoints"
CHECKPOINTS = dg.DynamicPartitionsDefinition(name=CHECKPOINTS_PARTITION)
