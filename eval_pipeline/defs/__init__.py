"""Dagster wiring: definitions, the rubric factory, assets by stage, checks, resources, partitions, sensors,
the in-process runner. Nothing outside this package imports Dagster, but the entry points (cli, demo)."""

import warnings

import dagster as dg

# partitioned asset checks are a preview feature in Dagster 1.13; we rely on them knowingly
warnings.filterwarnings("ignore", category=dg.PreviewWarning)
