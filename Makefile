# The two set-up commands of the README: `make demo` and `make test`. Everything they need is
# installed from here into a local virtualenv; nothing is expected to be installed by hand.
VENV   ?= .venv
PYTHON ?= python3
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-$(shell cksum pyproject.toml | cut -d' ' -f1)
PYTEST_ARGS ?=

.PHONY: all demo test check lint bench install tools snapshot-update clean

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

# Bytecode is written even where the environment says not to (PYTHONDONTWRITEBYTECODE, set on some
# CI images): the suite starts hundreds of `python -m tftui` processes and each would compile the
# package from source again (≈ 0.3 CPU-s a start), and pytest would re-rewrite every test module in
# every worker. __pycache__ is git-ignored.
RUN := env -u PYTHONDONTWRITEBYTECODE

test: lint tools
	$(RUN) $(BIN)/pytest -n 2 -q --durations=20 $(PYTEST_ARGS)

# `make check`: lint, then the unit tests that start nothing — no server (marker `integration`, set
# by tests/conftest.py on tests using a server fixture), no tmux (`e2e`), no console app (`asyncio`:
# every async test is a Textual pilot test), no Hypothesis run (`property`, also set by conftest), no
# `tftui` subprocess (names with `cli_`), and none of the modules below, which simulate days, render
# Helm charts, run subprocesses or start servers inline. `make test` runs everything.
CHECK_IGNORE := tests/snapshots tests/test_runtime.py tests/test_state_incremental.py \
	tests/test_whatif.py tests/test_whatif_incremental.py tests/test_whatif_ui.py tests/test_sim.py \
	tests/test_sim_consistency.py tests/test_sim_usage.py \
	tests/test_sim_acting.py tests/test_sim_step1.py tests/test_report.py tests/test_roundtrip.py \
	tests/test_deploy.py tests/test_deploy_rbac.py tests/test_deploy_image.py tests/test_cli.py \
	tests/test_cli_hostile.py tests/test_trace.py \
	tests/test_ui_crash.py tests/test_ui_exit.py tests/test_daemon.py tests/test_daemon_failover.py \
	tests/test_daemon_metrics_store.py tests/test_daemon_cli.py tests/test_doctor.py \
	tests/test_kube.py tests/test_kube_actions.py tests/test_kube_server.py tests/test_leader.py \
	tests/test_live_console.py tests/test_external_scaler.py \
	tests/test_autoscale_runtime.py tests/test_autoscale_history.py tests/test_greptime.py \
	tests/test_greptime_alerts.py tests/test_greptime_errors.py tests/test_greptime_simulator.py \
	tests/test_greptime_dialect.py tests/test_e2e_tmux.py tests/test_e2e_hostile.py \
	tests/test_fault_campaign.py tests/test_fencing.py tests/test_external_scaler_safety.py \
	tests/test_no_traceback.py tests/test_secrets.py
CHECK_MARKERS := not integration and not e2e and not asyncio and not property

check: lint
	$(RUN) $(BIN)/pytest -q -p no:cacheprovider -m "$(CHECK_MARKERS)" -k "not cli_" \
	  $(addprefix --ignore=,$(CHECK_IGNORE)) $(PYTEST_ARGS)

bench: install tools
	$(BIN)/python bench/run.py

snapshot-update: install
	$(BIN)/pytest tests/snapshots --snapshot-update -q

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache snapshot_report.html
