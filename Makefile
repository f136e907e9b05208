# The two commands: `make serve` (run on SQLite) and `make test` (the whole suite).
# Both create .venv and install the project into it first, so a fresh clone needs nothing else.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: install serve test lint openapi bench

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

serve: $(STAMP)
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
