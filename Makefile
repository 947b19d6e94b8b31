# Two entry points do all the set-up on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# Test processes (pytest-xdist); the suite keeps no state across tests that a worker shares.
WORKERS ?= 2
# The only variable that lets a notebook call a real model: never set under `make test`.
REAL_MODEL_VARIABLE := CONTEXT_GOVERNANCE_NOTEBOOK_REAL_MODEL

.PHONY: install demo test lint format typecheck unit notebooks fuzz bench bfcl-wheel scale scale-ci clean

$(BIN)/activate: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[test,agents,plot,notebooks]"
	touch $(BIN)/activate

install: $(BIN)/activate

demo: install
	$(BIN)/context-governance demo

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: install
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

typecheck: install
	$(BIN)/mypy

unit: install
	$(BIN)/pytest -q -n $(WORKERS)

notebooks: install
	env -u $(REAL_MODEL_VARIABLE) $(BIN)/pytest -q -n $(WORKERS) --nbmake notebooks

test: lint typecheck unit notebooks

fuzz: install
	HYPOTHESIS_PROFILE=fuzz $(BIN)/pytest -q -n $(WORKERS) -m fuzz tests

# The tool-heavy replay reads the bfcl-eval wheel (data and tool backends) as a zip at run
# time; it is downloaded once to a cache outside the repository, never installed or copied.
BFCL_CACHE ?= $(HOME)/.cache/langchain-context-governance/bfcl

bfcl-wheel: install
	@ls $(BFCL_CACHE)/bfcl_eval-*.whl >/dev/null 2>&1 || \
		$(BIN)/python -m pip download --quiet --no-deps bfcl-eval -d $(BFCL_CACHE) || \
		echo "bfcl-eval could not be downloaded: the tool-heavy replay will be skipped"

bench: install bfcl-wheel
	$(BIN)/python benchmarks/run.py

# A LangGraph agent on a throwaway PostgreSQL cluster (installed from Debian's packages when
# missing): 50 concurrent threads x 40 tool iterations, a restart, a resumed second turn;
# then 4 worker processes serving 16 threads x 6 turns, each turn on the next worker.
scale: install
	$(BIN)/python benchmarks/scale.py

# The short version CI runs: 10 threads x 10 iterations, 4 workers on 4 threads x 3 turns,
# the same checks, timing only printed.
scale-ci: install
	$(BIN)/python benchmarks/scale.py --ci

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache
