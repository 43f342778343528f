#!/usr/bin/env bash
# A real OpenAI-compatible chat server for the `llm` tests and for trying
# `reactive-rag ask --model-url` offline: llama.cpp's server from the xllamacpp wheel,
# with a GGUF shipped inside a PyPI package (`make install` installs both). Loopback
# only, no network at run time. The work is done by scripts/llm_server.py.
#
#   eval "$(bash scripts/llm-server.sh)"      # start (or reuse) the server; prints
#                                             # REACTIVE_RAG_LLM_URL/_MODEL/_QUIRKS exports
#   bash scripts/llm-server.sh --stop
#
# Env: PYTHON (default .venv/bin/python), LLM_MODEL (smollm2 | gemma3-270m),
# REACTIVE_RAG_LLM_PORT (18080; 0 picks a free port), REACTIVE_RAG_LLM_DIR (state: pid,
# log, the assembled Gemma file), LLM_THREADS (2).
set -euo pipefail
exec "${PYTHON:-.venv/bin/python}" "$(dirname "$0")/llm_server.py" "$@"
