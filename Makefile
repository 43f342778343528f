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
	$(BIN)/python -c "import streams, actors, reactive_rag"
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/reactive-rag demo

test: $(STAMP)
	$(BIN)/python -m pytest -m "not llm"
	$(MAKE) --no-print-directory lint

test-fast: $(STAMP)
	$(BIN)/python -m pytest -m "not slow" -x -q

# Real chat-model tests: builds llama-cpp-python once per machine (~20 min on 2 cores, wheel
# cached), starts llama_cpp.server with the packaged Gemma 3 270M GGUF on 127.0.0.1, runs the
# `llm` tests, stops the server. Not part of `make test`.
test-llm: $(STAMP)
	PYTHON=$(BIN)/python bash scripts/llm-server.sh --install
	@eval "$$(PYTHON=$(BIN)/python bash scripts/llm-server.sh)" && \
	  $(BIN)/python -m pytest -m llm -q -rs tests/reactive_rag/test_chat_llm_real.py; \
	  rc=$$?; PYTHON=$(BIN)/python bash scripts/llm-server.sh --stop; exit $$rc

lint: $(STAMP)
	$(BIN)/mypy
	$(BIN)/ruff check streams actors reactive_rag tests bench

bench: $(STAMP)
	$(BIN)/python bench/bus.py

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache
