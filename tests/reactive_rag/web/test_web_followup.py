"""The page's follow-up box in a real headless Chromium: a conversation of two turns.

A question, then a follow-up typed in the box under the answer ("where are its
headquarters?"): the page asks it in the same session (``POST /v1/sessions/{id}/runs``),
says how the server read it, keeps the first answer above the second, and lists the
``query.rewritten`` event. Against a server without sessions (``POST /v1/sessions`` is a
404) the page runs plain questions and never shows the box.

Same browser requirements as ``test_web_page.py`` (skipped without, failed with
``REACTIVE_RAG_REQUIRE_BROWSER=1``). The screenshot is ``test-artifacts/web-followup.png``.
"""

from __future__ import annotations

import importlib.util
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from actors.search import Searcher
from reactive_rag.engine._engine import Engine

from .._web_fixtures import DropProxy, SlowProvider, demo_index, standin_app
from . import test_web_page as _page_tests
from .test_web_page import ARTIFACTS, Site, ask

# the browser, the served page and the skip-without-browser rule of the page tests
_browser_available = _page_tests._browser_available
page = _page_tests.page
site = _page_tests.site
secured = _page_tests.secured

SESSIONS_LANDED = importlib.util.find_spec("reactive_rag.server._sessions") is not None


@pytest.fixture
async def plain_site(tmp_path: Path) -> AsyncIterator[Site]:
    """The stand-in API: runs only, no sessions (as a server from before conversations)."""
    index = demo_index(tmp_path / "index")
    engine = Engine(index, web=Searcher([SlowProvider(0.05)]))
    runner = web.AppRunner(standin_app(engine))
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


@pytest.mark.skipif(not SESSIONS_LANDED, reason="the server has no sessions routes yet "
                    "(reactive_rag/server/_sessions.py)")
async def test_a_follow_up_in_the_box_is_read_from_the_first_answer(
        site: Site, page: Any) -> None:
    await ask(page, site, "What is Bayer?")
    await page.wait_for_selector("body[data-outcome]")
    assert await page.evaluate("window.__rr.sessionsSupported") is True
    session = await page.evaluate("window.__rr.sessionId")
    assert session and f"session={session}" in page.url
    first = await page.locator("#answer").inner_text()
    assert "German multinational" in first
    assert await page.locator("#read-as").is_hidden()  # a first question is read as asked

    box = page.locator("#followup")
    await box.wait_for(state="visible")
    await page.fill("#followup-q", "Where are its headquarters?")
    await page.click("#followup-ask")
    await page.wait_for_function("window.__rr.turns.length === 1 && window.__rr.finished")
    assert await page.evaluate("window.__rr.sessionId") == session
    assert await page.evaluate("document.body.dataset.outcome") == "answered"

    # two answers: the first kept above, the follow-up's in the answer box
    turns = page.locator("#turns li")
    assert await turns.count() == 1
    assert "What is Bayer?" in await turns.nth(0).inner_text()
    assert "German multinational" in await turns.nth(0).locator(".turn-answer").inner_text()
    assert "Leverkusen" in await page.locator("#answer").inner_text()
    assert "Where are its headquarters?" in await page.locator("#turn-question").inner_text()
    read_as = page.locator("#read-as")
    assert await read_as.is_visible()
    assert await read_as.inner_text() == "read as: “Where are Bayer's headquarters?”"
    rewritten = page.locator("#timeline li.ev-query-rewritten")
    assert await rewritten.count() == 1
    assert "follow-up read as “Where are Bayer's headquarters?”" in \
        await rewritten.inner_text()
    await box.wait_for(state="visible")  # ready for the next follow-up

    ARTIFACTS.mkdir(exist_ok=True)
    await page.screenshot(path=str(ARTIFACTS / "web-followup.png"), full_page=False)

    # a reload re-attaches to the follow-up's run and can go on with the conversation
    await page.reload()
    await page.wait_for_function("window.__rr.finished")
    assert await page.evaluate("window.__rr.sessionId") == session
    await box.wait_for(state="visible")
    assert await read_as.inner_text() == "read as: “Where are Bayer's headquarters?”"

    await page.click("#new-conversation")
    assert await page.evaluate("window.__rr.sessionId") is None
    assert await box.is_hidden() and await page.locator("#turns").is_hidden()
    assert await page.locator("#question").input_value() == ""


async def test_without_sessions_the_page_runs_plain_questions_and_hides_the_box(
        plain_site: Site, page: Any) -> None:
    await ask(page, plain_site, "Who founded Bayer and when?")
    await page.wait_for_selector("body[data-outcome]")
    assert await page.evaluate("document.body.dataset.outcome") == "answered"
    assert "1863" in await page.locator("#answer").inner_text()
    assert await page.evaluate("window.__rr.sessionsSupported") is False
    assert await page.evaluate("window.__rr.sessionId") is None
    assert await page.locator("#followup").is_hidden()
    assert "session=" not in page.url

    # the next question goes straight to POST /v1/runs (no second probe)
    requests: list[str] = []
    page.on("request", lambda request: requests.append(request.url))
    await page.fill("#question", "Who isolated aspirin?")
    await page.click("#start")
    await page.wait_for_function("window.__rr.finished && window.__rr.seqs.length > 0")
    assert not any("/v1/sessions" in url for url in requests)
    assert any(url.endswith("/v1/runs") for url in requests)
    assert await page.locator("#followup").is_hidden()
