# Two entry points: `make demo` and `make test`. Each creates .venv if missing and installs
# what it needs; a second run reuses what is installed unless pyproject.toml changed.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-dev

.PHONY: demo test lint typecheck imports unit e2e agents bench clean

# Some environments set PYTHONDONTWRITEBYTECODE: every one of the suite's thousands of `assay`
# processes would then compile assay's sources again. Let the first one write the bytecode.
unexport PYTHONDONTWRITEBYTECODE

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

$(STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install -q -e '.[dev,temporal]'
	touch $(STAMP)

demo: $(STAMP)
	$(PY) examples/demo.py

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

typecheck: $(STAMP)
	$(VENV)/bin/mypy

imports: $(STAMP)
	$(VENV)/bin/lint-imports

# The real agent programs the interop tests drive, at pinned versions, cached in .cache/; a
# program that cannot be installed is reported in .cache/agents/status.json and its tests skip.
agents:
	@AGENTS_PYTHON="$(PYTHON)" tools/install-agents.sh

# Two tiers: tests/unit runs in-process (no assay or server process; tests/unit/conftest.py
# refuses them), tests/e2e what only a real process proves. The unit tier runs three workers
# on two cores: much of a test is spent waiting on git or the sandbox, and a third worker
# fills that wait (132 s with two, 112 s with three). The e2e tier keeps two: a third gave
# 207 s for 270 s, but its kills and timeouts race the machine's load (an orphaned claude's
# last call was answered after recovery read its output, once in three runs).
unit: $(STAMP)
	$(VENV)/bin/pytest -n 3 -q --durations=10 tests/unit

e2e: $(STAMP) agents
	$(VENV)/bin/pytest -n 2 -q --durations=15 tests/e2e

# The agent programs install in the background while the checks and the unit tier run (they
# need none of them); the e2e tier's `agents` then waits on that install's lock and finds
# them installed. A background install that failed is tried again there, in the open.
test: $(STAMP)
	@mkdir -p .cache/agents
	@AGENTS_PYTHON="$(PYTHON)" tools/install-agents.sh >.cache/agents/background.log 2>&1 &
	$(MAKE) --no-print-directory lint typecheck imports unit
	$(MAKE) --no-print-directory e2e

bench: $(STAMP)
	$(PY) bench/cli.py --no-fail

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
