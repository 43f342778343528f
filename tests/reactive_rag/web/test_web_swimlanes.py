"""The page's swimlanes and its finish, in a real headless Chromium against the real server.

A run with a web provider that is down: the swimlane panel shows a lane per
actor and per provider, a bar per call, the failing provider's bars red, and
the same lanes and bars as the Python model (``reactive_rag.cli._timeline``) draws
from the same events. Then the polish: mode and collections come back when the
page re-attaches, the server's collections are offered, the passage view
closes, the evidence list scrolls visibly, no empty pill, a favicon, and an
outcome's reason said once.

Same browser requirements as ``test_web_page.py`` (skipped without, failed with
``REACTIVE_RAG_REQUIRE_BROWSER=1``). Screenshots go to
``$REACTIVE_RAG_TEST_ARTIFACTS`` (else ``test-artifacts/``): ``web-swimlanes.png``.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from actors.providers import ProviderUnavailable
from actors.search import Searcher
from reactive_rag.cli._timeline import build_timeline
from reactive_rag.engine._engine import Engine
from reactive_rag.index import Document
from streams import Hit, decode_json

from .._corpus import DOCS
from .._web_fixtures import DropProxy, SlowProvider, demo_index, standin_app
from ..cli.test_timeline import SCENARIOS
from . import test_web_page as _page_tests
from .test_web_page import ARTIFACTS, Site, ask

_browser_available = _page_tests._browser_available
page = _page_tests.page


class DownProvider:
    """A web provider whose service is down: every search fails at once."""

    name = "down-web"

    async def search(self, query: str, k: int, deadline: float) -> Sequence[Hit]:
        raise ProviderUnavailable("connection refused", provider=self.name)


def _artifacts() -> Path:
    where = Path(os.environ.get("REACTIVE_RAG_TEST_ARTIFACTS") or ARTIFACTS)
    where.mkdir(parents=True, exist_ok=True)
    return where


async def _serve(app: web.Application, engine: Engine) -> AsyncIterator[Site]:
    runner = web.AppRunner(app)
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
async def site(tmp_path: Path) -> AsyncIterator[Site]:
    """The real server over the demo corpus, a slow web provider and one that is down."""
    engine = Engine(demo_index(tmp_path / "index"),
                    web=Searcher([SlowProvider(0.2), DownProvider()]))
    async for served in _serve(_page_tests.make_app(engine, tmp_path, secured=False), engine):
        yield served


_MORE_BAYER = [Document(id=f"bayer-{i}", title=f"Bayer history, part {i}", text=(
    f"Part {i} of the Bayer company history. Bayer was founded in 1863 by Friedrich Bayer and "
    f"Johann Friedrich Weskott in Barmen; chapter {i} follows the founders and their dye works "
    "through the years that followed, with names, places and dates of the time."))
    for i in range(8)]


@pytest.fixture
async def long_site(tmp_path: Path) -> AsyncIterator[Site]:
    """The real server over a corpus with many passages about one question."""
    index = demo_index(tmp_path / "index")
    index.index_documents("demo", [*DOCS, *_MORE_BAYER])
    engine = Engine(index, web=Searcher([SlowProvider(0.05)]))
    async for served in _serve(_page_tests.make_app(engine, tmp_path, secured=False), engine):
        yield served


@pytest.fixture
async def slow_site(tmp_path: Path) -> AsyncIterator[Site]:
    """The real server with a web provider that takes 1.5 s a search."""
    engine = Engine(demo_index(tmp_path / "index"), web=Searcher([SlowProvider(1.5)]))
    async for served in _serve(_page_tests.make_app(engine, tmp_path, secured=False), engine):
        yield served


@pytest.fixture
async def plain_site(tmp_path: Path) -> AsyncIterator[Site]:
    """The stand-in API: no ``GET /v1/collections`` (as a server from before the list)."""
    engine = Engine(demo_index(tmp_path / "index"), web=Searcher([SlowProvider(0.05)]))
    async for served in _serve(standin_app(engine), engine):
        yield served


async def _finished(page: Any) -> None:
    await page.wait_for_selector("body[data-outcome]")


async def test_swimlanes_show_a_lane_per_actor_a_bar_per_call_and_the_failing_provider(
        site: Site, page: Any) -> None:
    await ask(page, site, "Who founded Bayer and when?")
    await page.wait_for_selector("#swimlanes .lane[data-lane=searcher] .bar")  # live, mid-run
    await _finished(page)
    await page.wait_for_function("document.querySelectorAll('#swimlanes .bar').length"
                                 " === window.__rr.timeline.bars.length")
    events = await page.evaluate("window.__rr.events")
    lanes = await page.eval_on_selector_all("#swimlanes .lane", "ls => ls.map(l => l.dataset.lane)")
    for actor in ("planner", "searcher", "search:local", "search:slow-web", "search:down-web",
                  "reranker", "writer", "verifier"):
        assert actor in lanes, f"no {actor} lane: {lanes}"

    tool_calls = sum(e["type"] in ("search.requested", "read.requested", "scrape.requested")
                     for e in events)
    assert tool_calls >= 1
    assert await page.locator("#swimlanes .bar").count() >= tool_calls
    searches = sum(e["type"] == "search.requested" for e in events)
    down = page.locator('#swimlanes .lane[data-lane="search:down-web"] .bar')
    assert await down.count() == searches
    assert await page.locator('#swimlanes .lane[data-lane="search:down-web"] .bar-failed'
                              ).count() == searches
    assert await page.locator('#swimlanes .lane[data-lane="search:local"] .bar-failed'
                              ).count() == 0
    color = await down.first.evaluate("b => getComputedStyle(b).backgroundColor")
    assert color == "rgb(179, 38, 30)", "a failed bar is not red"
    assert "ProviderUnavailable" in (await down.first.get_attribute("title") or "")
    gauges = await page.eval_on_selector_all("#swimlanes .sl-gauge",
                                             "gs => gs.map(g => g.dataset.gauge)")
    assert {"model steps", "tool calls", "time", "pages"} <= set(gauges)

    # the page's port draws what the Python model draws from the same events
    model = build_timeline([decode_json(json.dumps(e)) for e in events])
    drawn = await page.evaluate("window.__rr.timeline")
    assert [lane["name"] for lane in drawn["lanes"]] == [lane.name for lane in model.lanes]
    assert sorted((b["lane"], b["request_seq"], b["status"], b["row"]) for b in drawn["bars"]) == \
        sorted((b.lane, b.request_seq, b.status, b.row) for b in model.bars)

    shot = _artifacts() / "web-swimlanes.png"
    panel = page.locator("section.swimlanes-card")
    await panel.scroll_into_view_if_needed()
    await panel.screenshot(path=str(shot))
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


async def test_a_call_waiting_for_its_reply_is_an_open_bar_that_grows_then_closes(
        slow_site: Site, page: Any) -> None:
    await ask(page, slow_site, "Who founded Bayer and when?")
    waiting = page.locator('#swimlanes .lane[data-lane=searcher] .bar-open').first
    await waiting.wait_for()
    seq = await waiting.get_attribute("data-seq")
    width = await waiting.evaluate("b => b.getBoundingClientRect().width")
    await page.wait_for_function(
        "([seq, w]) => { const b = document.querySelector(`#swimlanes .bar[data-seq='${seq}']`);"
        " return b && b.dataset.status === 'open' && b.getBoundingClientRect().width > w + 2; }",
        arg=[seq, width])
    await _finished(page)
    done = page.locator(f"#swimlanes .lane[data-lane=searcher] .bar[data-seq='{seq}']")
    assert await done.get_attribute("data-status") == "ok"


async def test_the_pages_port_reads_built_runs_as_the_python_model_does(
        plain_site: Site, page: Any) -> None:
    await page.goto(plain_site.base + "/")
    await page.wait_for_selector("body[data-ready]")
    for scenario, build in sorted(SCENARIOS.items()):
        events = build().events
        drawn = await page.evaluate(
            "async (evs) => (await import('/web/timeline.js')).buildTimeline(evs)",
            [e.model_dump(mode="json") for e in events])
        model = build_timeline(events)
        assert [(lane["name"], lane["rows"]) for lane in drawn["lanes"]] == \
            [(lane.name, lane.rows) for lane in model.lanes], scenario
        assert [(b["lane"], b["request_seq"], b["status"], b["row"], b["attempt"],
                 b["end"] is None, b["detail"]) for b in drawn["bars"]] == \
            [(b.lane, b.request_seq, b.status, b.row, b.attempt, b.end is None, b.detail)
             for b in model.bars], scenario
        assert [(g["name"], g["used"], g["limit"]) for g in drawn["gauges"]] == \
            [(g.name, g.used, g.limit) for g in model.gauges], scenario
        assert drawn["outcome"] == model.outcome, scenario


async def test_the_swimlane_panel_can_be_hidden_and_stays_hidden_after_a_reload(
        site: Site, page: Any) -> None:
    await ask(page, site, "Who founded Bayer and when?")
    await _finished(page)
    await page.click("#swimlanes-toggle")
    assert await page.locator("#swimlanes-body").is_hidden()
    assert await page.get_attribute("#swimlanes-toggle", "aria-expanded") == "false"
    await page.reload()
    await _finished(page)
    assert await page.locator("#swimlanes-body").is_hidden()
    await page.click("#swimlanes-toggle")
    await page.wait_for_selector("#swimlanes .lane[data-lane=planner] .bar")


async def test_re_attaching_brings_back_the_runs_mode_and_collections(
        site: Site, page: Any) -> None:
    await page.goto(site.base + "/")
    await page.wait_for_selector("body[data-ready]")
    await page.fill("#question", "Who founded Bayer and when?")
    await page.fill("#collections", "demo")
    await page.select_option("#mode", "rag")
    await page.click("#start")
    await _finished(page)
    run_id = await page.evaluate("window.__rr.runId")

    await page.goto(site.base + "/")  # a new visit: the last choices are kept in this browser
    await page.wait_for_selector("body[data-ready]")
    assert await page.input_value("#mode") == "rag"
    assert await page.input_value("#collections") == "demo"

    await page.evaluate("localStorage.clear()")
    await page.goto("about:blank")
    await page.goto(f"{site.base}/#run={run_id}")  # another browser's view: from the run itself
    await _finished(page)
    assert await page.input_value("#mode") == "rag"
    assert await page.input_value("#collections") == "demo"


async def test_the_servers_collections_are_offered_and_picking_one_fills_the_field(
        site: Site, page: Any) -> None:
    async with aiohttp.ClientSession() as http, http.get(f"{site.api}/v1/collections") as resp:
        if resp.status == 404:
            pytest.skip("this server has no GET /v1/collections yet")
        names = [c["name"] for c in (await resp.json())["collections"]]
    assert "demo" in names
    await page.goto(site.base + "/")
    await page.wait_for_selector("body[data-ready]")
    demo = page.locator("#collections-pick button[data-collection=demo]")
    await demo.wait_for(state="visible")
    assert await page.locator("#collections-pick button").count() == len(names)
    await page.fill("#collections", "")
    await page.dispatch_event("#collections", "input")
    assert await demo.get_attribute("aria-pressed") == "false"
    await demo.click()
    assert await page.input_value("#collections") == "demo"
    assert await demo.get_attribute("aria-pressed") == "true"
    await page.fill("#question", "Who founded Bayer and when?")
    await page.click("#start")
    await _finished(page)
    assert await page.evaluate("document.body.dataset.outcome") == "answered"
    await demo.click()  # and off again
    assert await page.input_value("#collections") == ""


async def test_without_a_collections_list_the_page_keeps_the_plain_field(
        plain_site: Site, page: Any) -> None:
    await ask(page, plain_site, "Who founded Bayer and when?")
    await _finished(page)
    assert await page.locator("#collections-pick").is_hidden()
    assert await page.evaluate("window.__rr.collectionsOffered") is None
    assert await page.inner_text("#collections-help") == "Comma separated collection names."
    assert await page.evaluate("document.body.dataset.outcome") == "answered"


async def test_the_passage_view_closes_by_its_button_and_by_escape(site: Site, page: Any) -> None:
    await ask(page, site, "Who founded Bayer and when?")
    await _finished(page)
    cite = page.locator("#answer button.cite[data-cite='1']")
    await cite.click()
    await page.wait_for_selector("#passage:not([hidden]) mark")
    await page.click("#passage-close")
    assert await page.locator("#passage").is_hidden()
    assert await cite.get_attribute("aria-pressed") == "false"
    assert await page.evaluate("document.activeElement.dataset.cite") == "1"  # focus goes back
    await cite.click()
    await page.wait_for_selector("#passage:not([hidden])")
    await page.keyboard.press("Escape")
    assert await page.locator("#passage").is_hidden()


_SCROLL_AT_REST = """() => new Promise(done => {
    const list = document.getElementById('evidence'), before = list.scrollTop;
    setTimeout(() => done(list.scrollTop === before), 100);
})"""


async def test_a_long_evidence_list_says_it_scrolls_and_scrolls(long_site: Site, page: Any) -> None:
    await ask(page, long_site, "Who founded Bayer and when?")
    await _finished(page)
    box = await page.eval_on_selector("#evidence", "e => ({items: e.children.length,"
                                      " scroll: e.scrollHeight, client: e.clientHeight,"
                                      " overflow: getComputedStyle(e).overflowY})")
    assert box["items"] >= 3 and box["scroll"] > box["client"], "precondition: it overflows"
    assert box["overflow"] == "auto"
    more = page.locator("#evidence-more")
    assert await more.is_visible(), "an overflowing evidence list does not say there is more"
    assert "below" in await more.inner_text()
    for _ in range(box["items"]):  # the button scrolls on, until nothing is left below
        if await more.is_hidden():
            break
        await more.click()
        # the list scrolls smoothly: let it come to rest before looking at the button again
        await page.wait_for_function(_SCROLL_AT_REST)
    await page.wait_for_function("(() => { const e = document.getElementById('evidence');"
                                 " return e.scrollTop + e.clientHeight >= e.scrollHeight - 2; })()")
    assert await more.is_hidden()
    await page.eval_on_selector("#evidence", "e => e.scrollTo({top: 0})")
    await more.wait_for(state="visible")


async def test_no_empty_pill_and_a_favicon(site: Site, page: Any) -> None:
    await page.goto(site.base + "/")
    await page.wait_for_selector("body[data-ready]")
    pills = await page.eval_on_selector_all(
        ".badge", "bs => bs.filter(b => b.getClientRects().length > 0).map(b => b.textContent)")
    assert pills and all(text.strip() for text in pills), f"an empty pill is shown: {pills}"
    assert await page.locator("#outcome").is_hidden()
    size = await page.evaluate("""() => new Promise((ok, bad) => {
        const img = new Image();
        img.onload = () => ok([img.naturalWidth, img.naturalHeight]);
        img.onerror = () => bad(new Error('the favicon does not load'));
        img.src = document.querySelector("link[rel=icon]").href;
    })""")
    assert size[0] > 0 and size[1] > 0


async def test_the_outcome_reason_is_said_once(site: Site, page: Any) -> None:
    await ask(page, site, "What is the airspeed of an unladen swallow?")
    await _finished(page)
    finished = await page.evaluate("window.__rr.finished")
    assert finished["outcome"] == "no_evidence" and finished["reason"]
    card = await page.inner_text("section[aria-labelledby=answer-h]")
    assert card.count(finished["reason"]) == 1, card
    assert await page.locator("#reason").is_visible()
