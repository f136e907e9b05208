# The two commands: `make serve` (run on SQLite) and `make test` (the whole suite).
# Both create .venv and install into it first, so a fresh clone needs nothing else: the locked
# dependencies (requirements*.lock, hashes checked), then this project, editable, without deps.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
RUNTIME := $(VENV)/.runtime-stamp
STAMP := $(VENV)/.dev-stamp
LOCK := $(BIN)/uv pip compile pyproject.toml --quiet --universal --python-version 3.11 \
	--generate-hashes --custom-compile-command "make lock"

.PHONY: install serve test lint docs openapi bench lock

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(RUNTIME): pyproject.toml requirements.lock $(VENV)/bin/python
	$(BIN)/pip install --quiet --require-hashes -r requirements.lock
	$(BIN)/pip install --quiet --no-deps -e .
	@$(BIN)/pip check || { echo "requirements.lock does not match pyproject.toml: run make lock"; exit 1; }
	touch $(RUNTIME)

$(STAMP): $(RUNTIME) requirements-dev.lock
	$(BIN)/pip install --quiet --require-hashes -r requirements-dev.lock
	$(BIN)/pip install --quiet --no-deps -e clients/python
	@$(BIN)/pip check || { echo "requirements-dev.lock does not match pyproject.toml: run make lock"; exit 1; }
	touch $(STAMP)

install: $(STAMP)

serve: $(RUNTIME)
	$(BIN)/ctxc migrate
	$(BIN)/ctxc serve

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports --no-cache
	$(BIN)/yamllint --strict .
	$(BIN)/hadolint Dockerfile
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

test: lint
	$(BIN)/pytest -n auto --maxprocesses 4 --dist worksteal

openapi: $(STAMP)
	$(BIN)/python -m tests.contract.test_openapi

bench: $(STAMP)
	$(BIN)/python -m bench

# Re-pin after changing dependencies in pyproject.toml: keeps the pins it can, adds the new ones
# (`make lock UPGRADE=--upgrade` moves every pin to the newest release).
lock: $(VENV)/bin/python
	$(BIN)/pip install --quiet 'uv>=0.5'
	$(LOCK) $(UPGRADE) -o requirements.lock
	$(LOCK) $(UPGRADE) --extra dev -c requirements.lock -o requirements-dev.lock
