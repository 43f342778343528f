#!/usr/bin/env bash
# Install (if missing) and start the servers the tests of server-grade stores need,
# on 127.0.0.1 with throwaway data dirs. Prints the env vars to export, e.g.:
#   eval "$(bash scripts/start-test-services.sh)"
# Idempotent: a server this script already started (and that still answers) is reused.
# Stop with: bash scripts/start-test-services.sh --stop
set -euo pipefail

STATE_DIR="${REACTIVE_RAG_TEST_SERVICES_DIR:-/tmp/reactive-rag-test-services}"
REDIS_PORT="${REACTIVE_RAG_TEST_REDIS_PORT:-16379}"
REDIS_DIR="$STATE_DIR/redis"
REDIS_PIDFILE="$REDIS_DIR/redis.pid"

log() { echo "start-test-services: $*" >&2; }

if [[ "${1:-}" == "--stop" ]]; then
    if [[ -f "$REDIS_PIDFILE" ]]; then
        kill "$(cat "$REDIS_PIDFILE")" 2>/dev/null || true
    fi
    rm -rf "$STATE_DIR"
    exit 0
fi

if ! command -v redis-server >/dev/null 2>&1; then
    log "installing redis-server (apt)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    apt-get install -y -qq --no-install-recommends redis-server >/dev/null
fi

redis_up() { redis-cli -h 127.0.0.1 -p "$REDIS_PORT" ping 2>/dev/null | grep -q PONG; }

if ! redis_up; then
    rm -rf "$REDIS_DIR"
    mkdir -p "$REDIS_DIR"
    # AOF on (fsync every second) like a durable deployment; no RDB snapshots;
    # loopback only; no persistence of this throwaway dir beyond the run.
    redis-server --bind 127.0.0.1 --port "$REDIS_PORT" --dir "$REDIS_DIR" \
        --daemonize yes --pidfile "$REDIS_PIDFILE" --logfile "$REDIS_DIR/redis.log" \
        --save "" --appendonly yes --appendfsync everysec --protected-mode yes \
        >/dev/null
    for _ in $(seq 1 100); do
        redis_up && break
        sleep 0.05
    done
    redis_up || { log "redis-server did not start:"; cat "$REDIS_DIR/redis.log" >&2; exit 1; }
fi

echo "export REACTIVE_RAG_TEST_REDIS_URL=redis://127.0.0.1:${REDIS_PORT}/0"
