# The README's two commands: `make demo` and `make test`. Each installs what it needs.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: demo test bench lint typecheck imports pytest system-deps clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

venv: $(STAMP)

# `make demo` installs infertop and its runtime dependencies only (no test tools), as a
# regular (non-editable) install in a venv of its own, rebuilt when a source changes
RUN_VENV := .venv-run
RUN_STAMP := $(RUN_VENV)/.installed-stamp
PACKAGE_FILES := $(shell find infertop collectors layouts monitor tui -type f -not -path '*/__pycache__/*' 2>/dev/null)

$(RUN_STAMP): pyproject.toml $(PACKAGE_FILES)
	$(PYTHON) -m venv $(RUN_VENV)
	$(RUN_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(RUN_VENV)/bin/python -m pip install --quiet .
	touch $(RUN_STAMP)

demo: $(RUN_STAMP)
	$(RUN_VENV)/bin/infertop demo

# Debian packages the integration tests use (sshd, tmux, prometheus, iproute2).
system-deps:
	bash scripts/install-system-deps.sh

lint: $(STAMP)
	$(BIN)/ruff check .

typecheck: $(STAMP)
	$(BIN)/mypy

# the rooms' import direction (contracts in pyproject.toml, docs/architecture.md)
imports: $(STAMP)
	$(BIN)/lint-imports

pytest: $(STAMP)
	$(BIN)/pytest -q --durations=15

test: $(STAMP) system-deps lint typecheck imports pytest

bench: $(STAMP) system-deps
	$(BIN)/python -m benchmarks.run_all

clean:
	rm -rf $(VENV) $(RUN_VENV) build *.egg-info .mypy_cache .ruff_cache .pytest_cache
