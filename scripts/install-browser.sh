#!/usr/bin/env bash
# Install what the web-page browser test needs, from the package registries only:
# Debian's `chromium` (apt) and the `playwright` Python package (its wheel ships the
# driver). Never runs `playwright install` (that downloads a browser build; the test
# drives /usr/bin/chromium instead). Idempotent: does nothing when both are present.
# Usage: bash scripts/install-browser.sh [PYTHON]   (default: .venv/bin/python)
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${1:-${PYTHON:-.venv/bin/python}}"

log() { echo "install-browser: $*" >&2; }

if ! command -v chromium >/dev/null 2>&1; then
    log "installing chromium (apt)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    apt-get install -y -qq chromium >/dev/null
fi

if ! "$PYTHON" -c "import playwright.async_api" >/dev/null 2>&1; then
    log "installing the playwright package (pip)"
    "$PYTHON" -m pip install --quiet --disable-pip-version-check "playwright>=1.40"
fi

# Check that the driver can start Debian's chromium (fails loudly rather than skipping later).
"$PYTHON" - <<'PY'
import asyncio, shutil, tempfile

from playwright.async_api import async_playwright

async def main() -> None:
    async with async_playwright() as pw:
        with tempfile.TemporaryDirectory() as profile:
            context = await pw.chromium.launch_persistent_context(
                profile, executable_path=shutil.which("chromium"), headless=True,
                args=["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"])
            page = await context.new_page()
            await page.set_content("<p id=ok>ok</p>")
            assert await page.inner_text("#ok") == "ok"
            await context.close()

asyncio.run(main())
PY
log "chromium $(chromium --version 2>/dev/null | awk '{print $2}') and playwright are ready"
