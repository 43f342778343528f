#!/usr/bin/env bash
# Install the SQLite HTML manual that bench/docsqa.py asks questions about: Debian's
# `sqlite3-doc` package (apt only; the manual is never copied into the repository).
# Runs `apt-get update` first only when apt knows no candidate for the package.
# Idempotent: with the package already installed it only prints the manual's folder.
# Usage: bash scripts/get-manual.sh   (as root, or with sudo available)
set -euo pipefail

PACKAGE=sqlite3-doc
log() { echo "get-manual: $*" >&2; }

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    SUDO="sudo"
fi

installed() { dpkg-query -W -f='${Status}' "$PACKAGE" 2>/dev/null | grep -q "install ok installed"; }

if ! installed; then
    export DEBIAN_FRONTEND=noninteractive
    if ! apt-cache policy "$PACKAGE" 2>/dev/null | grep -q "Candidate: [0-9]"; then
        log "apt knows no $PACKAGE yet: apt-get update"
        $SUDO apt-get update -qq >/dev/null
    fi
    log "installing $PACKAGE (apt)"
    $SUDO apt-get install -y -qq --no-install-recommends "$PACKAGE" >/dev/null
fi

# The folder holding the manual's index.html (the package's own file list says where).
DIR=$(dpkg -L "$PACKAGE" | grep -E '/index\.html$' | awk '{ print length, $0 }' \
      | sort -n | head -1 | cut -d' ' -f2- | xargs -r dirname)
if [ -z "$DIR" ] || [ ! -d "$DIR" ]; then
    log "$PACKAGE is installed but no index.html was found in it"
    exit 1
fi
echo "$DIR"
