# The two commands: `make serve` (run on SQLite) and `make test` (the whole suite).
# Both create .venv and install the project into it first, so a fresh clone needs nothing else.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
RUNTIME := $(VENV)/.runtime-stamp
STAMP := $(VENV)/.dev-stamp

.PHONY: install serve test lint openapi bench

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(RUNTIME): pyproject.toml $(VENV)/bin/python
	$(BIN)/pip install --quiet -e .
	touch $(RUNTIME)

$(STAMP): $(RUNTIME)
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

serve: $(RUNTIME)
	$(BIN)/ctxc migrate
	$(BIN)/ctxc serve

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

test: lint
	$(BIN)/pytest

openapi: $(STAMP)
	$(BIN)/python -m tests.contract.test_openapi

bench: $(STAMP)
	$(BIN)/python -m bench
