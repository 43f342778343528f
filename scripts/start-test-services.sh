#!/usr/bin/env bash
# Install (if missing) and start the servers the tests of server-grade stores need
# (Redis, PostgreSQL), on 127.0.0.1 with throwaway data dirs. Prints the env vars to export, e.g.:
#   eval "$(bash scripts/start-test-services.sh)"
# Idempotent: a server this script already started (and that still answers) is reused.
# Stop with: bash scripts/start-test-services.sh --stop
set -euo pipefail

STATE_DIR="${REACTIVE_RAG_TEST_SERVICES_DIR:-/tmp/reactive-rag-test-services}"
REDIS_PORT="${REACTIVE_RAG_TEST_REDIS_PORT:-16379}"
REDIS_DIR="$STATE_DIR/redis"
REDIS_PIDFILE="$REDIS_DIR/redis.pid"

log() { echo "start-test-services: $*" >&2; }

# PostgreSQL: a throwaway cluster (Debian's binaries), loopback only, trust auth, fsync on.
PG_PORT="${REACTIVE_RAG_TEST_PG_PORT:-15432}"
PG_DIR="$STATE_DIR/postgres"
PG_DB="reactive_rag_test"
pg_bin() {  # the newest installed server's bin dir (Debian keeps them out of PATH)
    local dir
    dir="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)"
    if [[ -n "$dir" && -x "$dir/initdb" ]]; then echo "$dir"; return; fi
    command -v initdb >/dev/null 2>&1 && dirname "$(command -v initdb)"
}
as_pg() {  # postgres refuses to run as root: run its tools as the package's user then
    if [[ "$(id -u)" == 0 ]]; then runuser -u postgres -- "$@"; else "$@"; fi
}
pg_stop() {
    local bin
    bin="$(pg_bin || true)"
    if [[ -n "$bin" && -f "$PG_DIR/data/postmaster.pid" ]]; then
        as_pg "$bin/pg_ctl" -D "$PG_DIR/data" -m fast -w stop >/dev/null 2>&1 || true
    fi
}

if [[ "${1:-}" == "--stop" ]]; then
    if [[ -f "$REDIS_PIDFILE" ]]; then
        kill "$(cat "$REDIS_PIDFILE")" 2>/dev/null || true
    fi
    pg_stop
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

if [[ -z "$(pg_bin || true)" ]]; then
    log "installing postgresql (apt)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    apt-get install -y -qq --no-install-recommends postgresql >/dev/null
fi
PG_BIN="$(pg_bin)"

pg_up() { "$PG_BIN/pg_isready" -q -h 127.0.0.1 -p "$PG_PORT" -d postgres -U postgres; }

if ! pg_up; then
    pg_stop
    rm -rf "$PG_DIR"
    mkdir -p "$PG_DIR"
    if [[ "$(id -u)" == 0 ]]; then  # the server's user must reach its data dir
        chmod a+x "$STATE_DIR"
        chown postgres: "$PG_DIR"
    fi
    # --no-sync: only initdb's own files (throwaway); the server runs with fsync on.
    as_pg "$PG_BIN/initdb" -D "$PG_DIR/data" -U postgres --auth=trust -E UTF8 --locale=C \
        --no-sync --no-instructions >"$PG_DIR/initdb.log" 2>&1 \
        || { log "initdb failed:"; cat "$PG_DIR/initdb.log" >&2; exit 1; }
    as_pg "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -l "$PG_DIR/postgres.log" -w -t 30 \
        -o "-c listen_addresses=127.0.0.1 -p $PG_PORT -k $PG_DIR -c fsync=on" start >/dev/null \
        || { log "postgres did not start:"; cat "$PG_DIR/postgres.log" >&2; exit 1; }
fi
if [[ -z "$("$PG_BIN/psql" -h 127.0.0.1 -p "$PG_PORT" -U postgres -d postgres -tAq \
        -c "SELECT 1 FROM pg_database WHERE datname = '$PG_DB'")" ]]; then
    "$PG_BIN/createdb" -h 127.0.0.1 -p "$PG_PORT" -U postgres "$PG_DB"
fi

echo "export REACTIVE_RAG_TEST_POSTGRES_URL=postgresql://postgres@127.0.0.1:${PG_PORT}/${PG_DB}"
