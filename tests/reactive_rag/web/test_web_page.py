"""The live run page in a real headless Chromium, over loopback only.

A run is started from the page, the network is cut in the middle of it (a
proxy between browser and server aborts every connection and refuses new ones
for a moment), and the page must resume by itself with every event exactly
once, then show the verified answer and open a citation's highlighted source.

Needs Debian's ``chromium`` and the ``playwright`` package (its bundled driver;
no downloaded browser): ``scripts/install-browser.sh`` installs both. Skipped
with the reason when either is missing, or failed when
``REACTIVE_RAG_REQUIRE_BROWSER=1`` (CI sets it, so a missing install cannot hide).
The screenshot is saved as ``test-artifacts/web-page.png``.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from actors.search import Searcher
from reactive_rag.engine._engine import Engine

from .._web_fixtures import DropProxy, SlowProvider, demo_index, standin_app

CHROMIUM = os.environ.get("REACTIVE_RAG_CHROMIUM") or shutil.which("chromium") or ""
ARTIFACTS = Path(__file__).resolve().parents[3] / "test-artifacts"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]

if not CHROMIUM:
    MISSING = "Debian chromium is not installed (bash scripts/install-browser.sh installs it)"
elif importlib.util.find_spec("playwright") is None:
    MISSING = "the playwright package is not installed (bash scripts/install-browser.sh)"
else:
    MISSING = ""


@pytest.fixture(autouse=True)
def _browser_available() -> None:
    """Skip without a browser, unless CI said it must be there (then fail)."""
    if MISSING:
        if os.environ.get("REACTIVE_RAG_REQUIRE_BROWSER") == "1":
            pytest.fail(MISSING)
        pytest.skip(MISSING)


WAIT_MS = 15_000


@dataclass
class Site:
    base: str
    proxy: DropProxy
    api: str


TOKEN = "page-test-token"


def make_app(engine: Engine, tmp_path: Path, *, secured: bool) -> web.Application:
    """The real HTTP service when it is importable, else the stand-in with the same API."""
    try:
        from reactive_rag.server import ServerConfig, TenantConfig, create_app, hash_token
    except ImportError:
        if secured:
            pytest.skip("the stand-in API has no authentication")
        return standin_app(engine)
    tenants = {"web": TenantConfig(token_sha256=(hash_token(TOKEN),))} if secured else {}
    config = ServerConfig(port=0, store=str(tmp_path / "runs.db"), default_collections=("demo",),
                          tenants=tenants)
    return create_app(config, engine=engine)


@pytest.fixture
def secured() -> bool:
    return False


@pytest.fixture
async def site(tmp_path: Path, secured: bool) -> AsyncIterator[Site]:
    index = demo_index(tmp_path / "index")
    engine = Engine(index, web=Searcher([SlowProvider(0.35)]))
    runner = web.AppRunner(make_app(engine, tmp_path, secured=secured))
    await runner.setup()
    tcp = web.TCPSite(runner, "127.0.0.1", 0)
    await tcp.start()
    port = runner.addresses[0][1]
    proxy = await DropProxy(port).start()
    try:
        yield Site(base=f"http://127.0.0.1:{proxy.port}", proxy=proxy,
                   api=f"http://127.0.0.1:{port}")
    finally:
        await proxy.close()
        await runner.cleanup()
        await engine.aclose()


@pytest.fixture
async def page(tmp_path: Path) -> AsyncIterator[Any]:
    from playwright.async_api import async_playwright

    async with async_playwright() as pw:
        context = await pw.chromium.launch_persistent_context(
            str(tmp_path / "profile"), executable_path=CHROMIUM, args=CHROMIUM_ARGS,
            headless=True, viewport={"width": 1280, "height": 800})
        try:
            page = await context.new_page()
            page.set_default_timeout(WAIT_MS)
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            yield page
            assert not errors, f"the page raised: {errors}"
        finally:
            await context.close()


async def ask(page: Any, site: Site, question: str, collections: str = "demo") -> None:
    await page.goto(site.base + "/")
    await page.wait_for_selector("body[data-ready]")
    await page.fill("#question", question)
    await page.fill("#collections", collections)
    await page.click("#start")


async def test_run_survives_a_network_drop_and_shows_the_verified_answer(
        site: Site, page: Any) -> None:
    await ask(page, site, "Who founded Bayer and when?")
    await page.wait_for_function("window.__rr.seqs.length >= 4")
    assert await page.evaluate("window.__rr.finished") is None, "the run ended before the drop"

    site.proxy.drop()
    await page.wait_for_selector("body[data-conn=reconnecting]")
    # The network stays down until reconnect attempts have failed: the drop counts one
    # reconnect, each refused attempt one more.
    await page.wait_for_function("window.__rr.reconnects >= 3")
    site.proxy.restore()

    await page.wait_for_selector("body[data-outcome]")
    state = await page.evaluate(
        "({seqs: window.__rr.seqs, gaps: window.__rr.gaps, dup: window.__rr.duplicates,"
        " reconnects: window.__rr.reconnects, finished: window.__rr.finished,"
        " runId: window.__rr.runId})")
    async with aiohttp.ClientSession() as http, \
            http.get(f"{site.api}/v1/runs/{state['runId']}") as resp:
        run = await resp.json()
    seqs = state["seqs"]
    assert seqs == list(range(1, run["last_seq"] + 1)), "events lost or repeated"
    assert state["gaps"] == [] and state["reconnects"] >= 1
    assert await page.locator("#timeline li").count() == len(seqs)
    assert await page.locator("#outcome").inner_text() == "Answered"

    # The verified answer replaced the streamed draft, with numbered citations.
    answer = await page.locator("#answer").inner_text()
    assert "1863" in answer and "[1]" in answer
    assert await page.locator("#citations li").count() == len(state["finished"]["claims"])

    await page.locator("#answer button.cite[data-cite='1']").click()
    await page.wait_for_selector("#passage:not([hidden]) mark")
    claim = state["finished"]["claims"][0]
    assert await page.locator("#passage mark").inner_text() == claim["quote"]
    passage = await page.locator("#passage-text").inner_text()
    assert claim["quote"] in passage and len(passage) > len(claim["quote"])
    assert claim["source_id"] in await page.locator("#passage-meta").inner_text()

    ARTIFACTS.mkdir(exist_ok=True)
    await page.screenshot(path=str(ARTIFACTS / "web-page.png"), full_page=False)


async def test_cancel_button_stops_the_run_and_says_so(site: Site, page: Any) -> None:
    await ask(page, site, "Who isolated aspirin and where did he work?")
    await page.wait_for_function("window.__rr.seqs.length >= 2")
    await page.click("#cancel")
    await page.wait_for_selector("body[data-outcome]")
    assert await page.evaluate("document.body.dataset.outcome") == "cancelled"
    assert await page.locator("#outcome").inner_text() == "Cancelled"
    assert await page.locator("#cancel").is_disabled()


async def test_reload_reattaches_to_the_run_with_every_event_once(site: Site, page: Any) -> None:
    await ask(page, site, "Who founded Bayer and when?")
    await page.wait_for_function("window.__rr.seqs.length >= 3")
    await page.reload()  # the address keeps #run=ID
    await page.wait_for_selector("body[data-outcome]")
    seqs = await page.evaluate("window.__rr.seqs")
    assert seqs == list(range(1, len(seqs) + 1)) and seqs[0] == 1
    assert await page.evaluate("document.body.dataset.outcome") == "answered"


async def test_unknown_collection_is_reported_on_the_form(site: Site, page: Any) -> None:
    await ask(page, site, "Who founded Bayer?", collections="nope")
    error = page.locator("#form-error")
    await error.wait_for(state="visible")
    assert "nope" in await error.inner_text()
    assert await page.evaluate("window.__rr.runId") is None


@pytest.mark.parametrize("secured", [True])
async def test_a_secured_server_needs_the_token_the_page_keeps(site: Site, page: Any) -> None:
    await ask(page, site, "Who founded Bayer and when?")
    error = page.locator("#form-error")
    await error.wait_for(state="visible")
    assert "Could not start the run" in await error.inner_text()

    await page.click("details summary")
    await page.fill("#token", TOKEN)
    await page.dispatch_event("#token", "change")
    await page.click("#start")
    await page.wait_for_selector("body[data-outcome]")
    assert await page.evaluate("document.body.dataset.outcome") == "answered"
    assert await error.is_hidden()
