# The two set-up commands of the README: `make demo` and `make test`. Everything they need is
# installed from here into a local virtualenv; nothing is expected to be installed by hand.
VENV   ?= .venv
PYTHON ?= python3
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-$(shell cksum pyproject.toml | cut -d' ' -f1)
PYTEST_ARGS ?=

.PHONY: all demo test lint bench install tools snapshot-update clean

all: test

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q --disable-pip-version-check --upgrade pip
	$(BIN)/python -m pip install -q --disable-pip-version-check -e '.[test]'
	rm -f $(VENV)/.installed-*
	touch $@

install: $(STAMP)

# System tools the tests drive for real (tmux for the end-to-end console test; a PostgreSQL 15
# server, started by the metrics tests themselves next to the GreptimeDB-dialect server, whose
# engine, DataFusion, comes from PyPI with the test extras).
tools:
	@command -v tmux >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq tmux >/dev/null; \
	  else echo "tmux is required for the end-to-end tests: sudo apt-get install tmux" >&2; exit 1; fi; }
	@test -x /usr/lib/postgresql/15/bin/initdb || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq postgresql-15 >/dev/null; \
	  else echo "PostgreSQL 15 is required for the metrics tests: sudo apt-get install postgresql-15" >&2; exit 1; fi; }

demo: install
	$(BIN)/tftui --demo

lint: install
	$(BIN)/ruff check tftui tests bench
	$(BIN)/ruff format --check tftui tests bench
	$(BIN)/mypy

test: lint tools
	$(BIN)/pytest -n 2 -q $(PYTEST_ARGS)

bench: install tools
	$(BIN)/python bench/run.py

snapshot-update: install
	$(BIN)/pytest tests/snapshots --snapshot-update -q

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache snapshot_report.html
