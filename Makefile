# Two commands on a fresh machine: `make demo` and `make test`.
# Each (re)creates .venv from this repo's own files when pyproject.toml changes.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: install demo test test-fast lint bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev]'
	$(BIN)/python -c "import streams, actors, reactive_rag"
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/reactive-rag demo

test: $(STAMP)
	$(BIN)/python -m pytest
	$(MAKE) --no-print-directory lint

test-fast: $(STAMP)
	$(BIN)/python -m pytest -m "not slow" -x -q

lint: $(STAMP)
	$(BIN)/mypy
	$(BIN)/ruff check streams actors reactive_rag tests bench

bench: $(STAMP)
	$(BIN)/python bench/bus.py

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache
