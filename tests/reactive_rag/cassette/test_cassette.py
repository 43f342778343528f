"""Cassettes: a run recorded against real local servers, replayed with those servers stopped.

"The same events" is :func:`reactive_rag.cassette.event_lanes`: the events of
each tool call, of each provider's health and of the run itself, each lane in
order, every event equal in type, actor, run id, payload and cause (as the
causing event's identity); left out are ``ts``, what is derived from the clock
(``budget.tick.elapsed_s``, ``plan.requested.remaining_s``) and the
interleaving of parallel calls (``seq``), which differs between two live runs
too. The tests never depend on how many searches the planner makes: whatever
the run did is recorded, then replayed.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from reactivex.subject import Subject

from actors.models import ChatRateLimited, ChatRequest, OpenAIChatClient
from actors.providers import TenantSearchConfig
from actors.scrape import FetchConfig, Fetcher, FetchFailed, ScrapeConfig, ScraperActor, UrlGuard
from actors.search import Searcher
from reactive_rag.cassette import (
    Cassette,
    CassetteFormatError,
    CassetteHeader,
    CassetteMiss,
    CassetteSetup,
    ChatSetup,
    describe_searcher,
    event_lanes,
)
from reactive_rag.cli._main import main
from reactive_rag.engine._engine import Engine, RunResult
from reactive_rag.index import CorpusIndex
from reactive_rag.judgement import Decision, PlannerView
from reactive_rag.judgement.model import ChatPlanner, ChatWriter
from streams import (
    ErrorInfo,
    Event,
    Hit,
    PlanDecided,
    RunFinished,
    SearchCompleted,
    SearchFailed,
    SearchFilters,
    ToolCall,
)
from tests._eventually import eventually
from tests.actors._openai_fixtures import Status, fake_openai, stream_reply
from tests.actors._scrape_fixtures import local_server
from tests.actors._web_fixtures import FakeWeb, Result, fake_web

QUESTION = "Who founded the Bayer company in 1863?"
LOOPBACK = UrlGuard.allowing("127.0.0.1")


def _local_scraper() -> ScraperActor:
    """The page server listens on loopback, which the default SSRF guard refuses."""
    return ScraperActor(ScrapeConfig(fetch=FetchConfig(guard=LOOPBACK)))


def _header(web: Searcher | None = None, *, question: str = QUESTION,
            chat: ChatSetup | None = None) -> CassetteHeader:
    return CassetteHeader(
        question=question, mode="agent", run_id="run-recorded", collections=("demo",),
        budget={"max_tool_calls": 6},
        setup=CassetteSetup(web=describe_searcher(web) if web is not None else None,
                            chat=chat))


def _timeless(events: Sequence[Event]) -> list[Event]:
    """The events without the run's measured wall time (a replay takes its own)."""
    return [e.model_copy(update={"usage": e.usage.model_copy(update={"wall_s": 0.0})})
            if isinstance(e, RunFinished) and e.usage is not None else e for e in events]


def _same_events(recorded: Sequence[Event], replayed: Sequence[Event]) -> None:
    """Equal lane by lane (the first difference is reported, not two huge lists)."""
    left, right = event_lanes(_timeless(recorded)), event_lanes(_timeless(replayed))
    assert sorted(left) == sorted(right)
    for lane, events in left.items():
        for i, (a, b) in enumerate(zip(events, right[lane], strict=False)):
            assert a == b, f"{lane} event {i} differs:\nrecorded {a}\nreplayed {b}"
        assert len(events) == len(right[lane]), lane
    assert recorded[-1].type == replayed[-1].type == "run.finished"


class _PagePlanner:
    """Searches the question, opens the web pages it found, then answers."""

    name = "pages"

    def __init__(self) -> None:
        self.turn = 0

    async def decide(self, view: PlannerView) -> Decision:
        self.turn += 1
        if self.turn == 1:
            return Decision(action="search", calls=(
                ToolCall(id="s1", tool="search", args={"query": view.question}),))
        urls = sorted({c.url for c in view.evidence if c.url.startswith("http://127.0.0.1")})
        if self.turn == 2 and urls:
            return Decision(action="scrape", calls=tuple(
                ToolCall(id=f"p{i}", tool="scrape", args={"url": u})
                for i, u in enumerate(urls[:2])))
        return Decision(action="answer")


def _bayer_results(pages: str) -> list[Result]:
    return [
        Result(url=f"{pages}/article/1", title="Bayer company history",
               snippet="Friedrich Bayer founded the dye company Bayer in Barmen in 1863 "
                       "together with Johann Friedrich Weskott."),
        Result(url=f"{pages}/article/2", title="Barmen dye works",
               snippet="The dye works in Barmen grew into a chemical company."),
    ]


async def _record_web_run(index: CorpusIndex, path: Path, web_api: FakeWeb, *,
                          planner: Callable[[], Any] | None = None) -> RunResult:
    live = Searcher.from_config(TenantSearchConfig(
        providers={"searxng": web_api.settings("searxng", backoff_s=0.01)}))
    cassette = Cassette.record(path, _header(live))
    try:
        engine = Engine(index, web=cassette.searcher(live),
                        scraper=cassette.scraper(_local_scraper), planner=planner)
        return await engine.ask(**cassette.start_options())
    finally:
        cassette.close()
        await live.aclose()


async def _replay_web_run(index: CorpusIndex, path: Path, *,
                          planner: Callable[[], Any] | None = None,
                          **changes: Any) -> tuple[RunResult, Cassette]:
    cassette = Cassette.load(path)
    engine = Engine(index, web=cassette.searcher(), scraper=cassette.scraper(), planner=planner)
    options = cassette.start_options() | changes
    return await asyncio.wait_for(engine.ask(**options), 30), cassette


# --- whole runs --------------------------------------------------------------------------------


@pytest.mark.parametrize("planner", [None, _PagePlanner], ids=["offline-planner", "opens-pages"])
async def test_a_web_run_replays_with_the_servers_stopped_and_the_same_events(
        index: CorpusIndex, tmp_path: Path, planner: Callable[[], Any] | None) -> None:
    path = tmp_path / "run.jsonl"
    async with local_server() as (pages, page_state), fake_web() as web_api:
        web_api.results["searxng"] = _bayer_results(str(pages.make_url("")).rstrip("/"))
        recorded = await _record_web_run(index, path, web_api, planner=planner)
    assert web_api.requests["searxng"] >= 1
    kinds = {json.loads(line).get("kind") for line in path.read_text().splitlines()[1:]}
    assert "search" in kinds
    if planner is not None:
        assert "page" in kinds and page_state.requests
        assert recorded.count("page.scraped") >= 1
    # both servers are closed now: a replay that touched the network would fail
    replayed, cassette = await _replay_web_run(index, path, planner=planner)
    assert replayed.run_id == recorded.run_id == "run-recorded"
    _same_events(recorded.events, replayed.events)
    assert replayed.outcome == recorded.outcome and replayed.answer == recorded.answer
    assert cassette.unused() == []


async def test_a_recorded_rate_limit_is_replayed_as_the_same_failure(
        index: CorpusIndex, tmp_path: Path) -> None:
    path = tmp_path / "limited.jsonl"
    async with fake_web() as web_api:
        web_api.mode["searxng"] = "rate_limit"
        recorded = await _record_web_run(index, path, web_api)
    errors = [err for e in recorded.events for err in getattr(e, "errors", ())]
    assert errors and {err.kind for err in errors} <= {"ProviderRateLimited", "CircuitOpen"}
    replayed, _ = await _replay_web_run(index, path)
    _same_events(recorded.events, replayed.events)
    assert [err for e in replayed.events for err in getattr(e, "errors", ())] == errors


async def test_a_chat_run_replays_without_the_model_server(
        index: CorpusIndex, tmp_path: Path) -> None:
    """The writer streams its answer: the replay streams the same ``answer.delta`` events."""
    path = tmp_path / "chat.jsonl"
    claims = json.dumps({"claims": [{
        "statement": "Bayer was founded in 1863.", "source_id": "bayer#0",
        "quote": "Bayer was founded in Barmen in 1863"}]})
    async with fake_openai() as server:
        server.script(*(stream_reply(claims) for _ in range(4)))
        client = OpenAIChatClient(server.base_url, model="fake", max_retries=0)
        cassette = Cassette.record(path, _header(chat=ChatSetup(model="fake")))
        model = cassette.chat(client)
        try:
            engine = Engine(index, writer=lambda: ChatWriter(model))
            recorded = await engine.ask(**cassette.start_options())
        finally:
            cassette.close()
            await client.aclose()
    assert server.requests and recorded.count("answer.delta") >= 1
    replay = Cassette.load(path)
    model = replay.chat()
    engine = Engine(index, writer=lambda: ChatWriter(model))
    replayed = await asyncio.wait_for(engine.ask(**replay.start_options()), 30)
    _same_events(recorded.events, replayed.events)
    assert replayed.answer == recorded.answer and replay.unused() == []


async def test_a_changed_question_fails_with_a_cassette_miss_not_a_hang(
        index: CorpusIndex, tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    async with fake_web() as web_api:
        recorded = await _record_web_run(index, path, web_api)
    assert recorded.count("search.completed") >= 1
    replayed, cassette = await _replay_web_run(index, path,
                                               question="Where is Bayer headquartered?")
    assert replayed.events[-1].type == "run.finished"
    misses = [err for e in replayed.events
              for err in (*getattr(e, "errors", ()), getattr(e, "error", None)) if err]
    assert misses and all(err.kind == "CassetteMiss" for err in misses)
    assert "search request not in the cassette" in misses[0].message
    assert any("headquartered" in err.message for err in misses)  # names the request
    assert cassette.unused()  # the recorded searches were never asked for


async def test_a_chat_request_not_in_the_cassette_fails_the_run_clearly(
        index: CorpusIndex, tmp_path: Path) -> None:
    path = tmp_path / "empty.jsonl"
    Cassette.record(path, _header(chat=ChatSetup(model="fake"))).close()
    model = Cassette.load(path).chat()
    engine = Engine(index, planner=lambda: ChatPlanner(model), writer=lambda: ChatWriter(model))
    result = await asyncio.wait_for(engine.ask(QUESTION, collections=["demo"]), 30)
    failed = [e for e in result.events if e.type == "actor.failed"]
    assert failed and failed[0].error.kind == "CassetteMiss"  # type: ignore[attr-defined]
    assert "chat request not in the cassette" in failed[0].error.message  # type: ignore[attr-defined]


# --- the wrappers -------------------------------------------------------------------------------


async def _search(searcher: Searcher, name: str, query: str) -> Sequence[Hit]:
    return await searcher.providers[name].search(query, 3, None)


async def test_the_same_request_twice_gets_the_two_recorded_answers_in_order(
        tmp_path: Path) -> None:
    path = tmp_path / "fifo.jsonl"
    async with fake_web() as web_api:
        live = Searcher.from_config(TenantSearchConfig(
            providers={"searxng": web_api.settings("searxng", retries=0)}))
        with Cassette.record(path, _header(live)) as cassette:
            recording = cassette.searcher(live)
            web_api.results["searxng"] = [Result(url="https://a.example/1", title="first",
                                                 snippet="one")]
            first = await _search(recording, "searxng", "tea")
            web_api.results["searxng"] = [Result(url="https://a.example/2", title="second",
                                                 snippet="two")]
            second = await _search(recording, "searxng", "tea")
        await live.aclose()
    replay = Cassette.load(path).searcher()
    assert await _search(replay, "searxng", "tea") == first
    assert await _search(replay, "searxng", "tea") == second
    with pytest.raises(CassetteMiss, match=r"recorded 2 time\(s\), all used") as info:
        await _search(replay, "searxng", "tea")
    assert info.value.kind == "search" and info.value.key["query"] == "tea"
    with pytest.raises(CassetteMiss, match="coffee"):
        await _search(replay, "searxng", "coffee")


async def test_concurrent_calls_complete_in_the_recorded_order(tmp_path: Path) -> None:
    path = tmp_path / "order.jsonl"
    async with fake_web() as web_api:
        web_api.latency["searxng"] = 0.3  # asked first, answers last
        live = Searcher.from_config(TenantSearchConfig(providers={
            "searxng": web_api.settings("searxng"), "brave": web_api.settings("brave")}))
        with Cassette.record(path, _header(live)) as cassette:
            recording = cassette.searcher(live)
            await asyncio.gather(_search(recording, "searxng", "tea"),
                                 _search(recording, "brave", "tea"))
        await live.aclose()
    # order_wait_s: only a bound on waiting for an answer that is never asked for
    cassette = Cassette.load(path, order_wait_s=60)
    replay = cassette.searcher()
    finished: list[str] = []

    async def ask(name: str) -> None:
        await _search(replay, name, "tea")
        finished.append(name)

    first = asyncio.create_task(ask("searxng"))
    # searxng is asked before brave, as when recorded: its answer is taken, and held
    await eventually(lambda: [i.key["provider"] for i in cassette.unused()] == ["brave"],
                     "searxng to be asked")
    assert not first.done()  # held until brave's answer, recorded before it, is served
    await asyncio.gather(first, ask("brave"))
    assert finished == ["brave", "searxng"]


async def test_an_answer_never_waits_long_for_one_the_run_does_not_ask_for(
        tmp_path: Path) -> None:
    path = tmp_path / "skip.jsonl"
    async with fake_web() as web_api:
        live = Searcher.from_config(TenantSearchConfig(
            providers={"searxng": web_api.settings("searxng")}))
        with Cassette.record(path, _header(live)) as cassette:
            recording = cassette.searcher(live)
            await _search(recording, "searxng", "never asked again")
            await _search(recording, "searxng", "tea")
        await live.aclose()
    replay = Cassette.load(path, order_wait_s=0.2)
    # served once the short order wait is over (the guard only stops a hang, it times nothing)
    assert await asyncio.wait_for(_search(replay.searcher(), "searxng", "tea"), 60)
    assert [i.key["query"] for i in replay.unused()] == ["never asked again"]


async def test_a_page_error_replays_as_the_same_typed_error(tmp_path: Path) -> None:
    path = tmp_path / "pages.jsonl"
    async with local_server() as (server, _):
        url, article = str(server.make_url("/status/503")), str(server.make_url("/article"))
        with Cassette.record(path, _header()) as cassette:
            fetcher = cassette.fetcher(Fetcher(FetchConfig(guard=LOOPBACK)))
            async with fetcher:
                with pytest.raises(FetchFailed) as live:
                    await fetcher.fetch(url)
                page = await fetcher.fetch(article)
    replay = Cassette.load(path).fetcher(Fetcher())
    with pytest.raises(FetchFailed) as again:
        await replay.fetch(url)
    assert (str(again.value), again.value.status, again.value.retryable, again.value.url) == (
        str(live.value), 503, True, url)
    replayed = await replay.fetch(article)
    assert (replayed.final_url, replayed.content_type, replayed.text) == (
        page.final_url, page.content_type, page.text)


async def test_a_chat_error_replays_typed_with_its_retry_advice(tmp_path: Path) -> None:
    path = tmp_path / "chat-error.jsonl"
    async with fake_openai() as server:
        server.script(Status(429, '{"error": {"message": "slow down"}}',
                             headers={"Retry-After": "7"}))
        async with OpenAIChatClient(server.base_url, model="fake", max_retries=0) as client:
            with (Cassette.record(path, _header(chat=ChatSetup(model="fake"))) as cassette,
                  pytest.raises(ChatRateLimited) as live):
                await cassette.chat(client).complete(
                    ChatRequest([{"role": "user", "content": "hi, 12 s"}]))
    model = Cassette.load(path).chat()
    with pytest.raises(ChatRateLimited) as again:  # seconds left are masked in the key
        await model.complete(ChatRequest([{"role": "user", "content": "hi, 3 s"}]))
    assert (str(again.value), again.value.retry_after, again.value.status) == (
        str(live.value), 7.0, 429)
    assert again.value.retryable == live.value.retryable


async def test_a_cut_call_replays_as_a_timeout(tmp_path: Path) -> None:
    path = tmp_path / "cut.jsonl"
    async with fake_web() as web_api:
        web_api.latency["searxng"] = 5.0
        live = Searcher.from_config(TenantSearchConfig(
            providers={"searxng": web_api.settings("searxng", retries=0)}))
        with Cassette.record(path, _header(live)) as cassette:
            recording = cassette.searcher(live)
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(0.2):
                    await _search(recording, "searxng", "tea")
        await live.aclose()
    assert '"cancelled":true' in path.read_text()
    with pytest.raises(TimeoutError):
        await _search(Cassette.load(path).searcher(), "searxng", "tea")


# --- bad files ------------------------------------------------------------------------------------


def _valid_header() -> str:
    return _header().model_dump_json()


@pytest.mark.parametrize(("content", "message"), [
    (None, "cannot read cassette"),
    ("", "is empty"),
    ("{not json\n", ":1: not JSON"),
    ('{"question": "q"}\n', "not a reactive-rag cassette header"),
    ('{"format": "reactive-rag-cassette", "version": 99}\n', "version 99"),
    ('{"format": "reactive-rag-cassette", "version": 1, "question": "q"}\n',
     ":1: bad header: run_id"),
    (lambda: _valid_header() + '\n{"order": 0, "kind": "search"}\n', ":2: bad interaction"),
    (lambda: _valid_header() + '\n{"order": 0, "kind": "search", "key": {}}\n',
     "exactly one of response, error, cancelled"),
    (lambda: _valid_header() + '\n{"order": 0, "kind": "page", "key": {}, "cancelled": true}'
     '\n{"order": 0, "kind": "page", "key": {}, "cancelled": true}\n', ":3: order 0 appears twice"),
    (lambda: _valid_header() + "\n" + "}{" + "\n", ":2: bad interaction"),
])
def test_a_missing_or_corrupt_cassette_is_a_clear_error(
        tmp_path: Path, content: str | Callable[[], str] | None, message: str) -> None:
    path = tmp_path / "bad.jsonl"
    if content is not None:
        path.write_text(content() if callable(content) else content)
    with pytest.raises(CassetteFormatError, match=message.replace("(", r"\(")):
        Cassette.load(path)


def test_a_recording_that_never_started_leaves_an_earlier_file_alone(tmp_path: Path) -> None:
    path = tmp_path / "keep.jsonl"
    path.write_text("earlier recording\n")
    Cassette.record(path, _header()).discard()
    assert path.read_text() == "earlier recording\n"
    assert list(tmp_path.iterdir()) == [path]


# --- the command line -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def notes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("notes")
    (folder / "raft.md").write_text(
        "# Raft\n\nRaft is a consensus algorithm designed to be easy to understand. "
        "A Raft cluster elects a leader, and the leader replicates the log to followers. "
        "Raft was designed by Diego Ongaro and John Ousterhout at Stanford.\n")
    root = tmp_path_factory.mktemp("root")
    assert main(["index", str(folder), "--collection", "notes", "--root", str(root)]) == 0
    return root


def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("REACTIVE_RAG_SEARCH_CONFIG", "REACTIVE_RAG_SEARXNG_URL", "REACTIVE_RAG_CHAT_URL",
                 "REACTIVE_RAG_CHAT_MODEL", "REACTIVE_RAG_CHAT_API_KEY",
                 "REACTIVE_RAG_ENTAILMENT_URL", "REACTIVE_RAG_CHAT_QUIRKS"):
        monkeypatch.delenv(name, raising=False)


async def _cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """The CLI runs its own event loop, so it runs in a thread next to the test's servers."""
    code = await asyncio.to_thread(main, argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


async def test_cli_record_then_replay_without_servers_config_or_keys(
        notes: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    _clean_env(monkeypatch)
    path = tmp_path / "cli.jsonl"
    claims = json.dumps({"claims": [{"statement": "Raft was designed by Diego Ongaro.",
                                     "source_id": "raft#0",
                                     "quote": "Raft was designed by Diego Ongaro"}]})
    capsys.readouterr()
    async with fake_web() as web_api, fake_openai() as chat:
        web_api.results["searxng"] = [Result(
            url="http://127.0.0.1:9/raft", title="Raft (algorithm)",
            snippet="Raft was designed by Diego Ongaro and John Ousterhout in 2014.")]
        verdict = json.dumps({"verdict": "answerable", "answer_type": "who",
                              "covered": ["Raft"], "missing": [], "searches": [],
                              "reason": "a passage names the designers", "conflicts": []})
        chat.script(stream_reply(tool_calls=[("c1", "search", '{"query": "Raft designers"}')]),
                    stream_reply(tool_calls=[("c2", "answer", "{}")]),
                    stream_reply(verdict), stream_reply(claims), stream_reply(claims))
        monkeypatch.setenv("REACTIVE_RAG_SEARXNG_URL", web_api.url("searxng"))
        code, out, err = await _cli(
            ["ask", "Who designed Raft?", "--collection", "notes", "--root", str(notes),
             "--web", "--model-url", chat.base_url, "--model", "fake", "--json", "--quiet",
             "--budget", "max_tool_calls=4", "--record", str(path)], capsys)
        assert code in (0, 1), err
        assert web_api.requests["searxng"] >= 1 and chat.requests
    recorded = json.loads(out.strip().splitlines()[-1])
    header = json.loads(path.read_text().splitlines()[0])
    assert header["question"] == "Who designed Raft?" and header["run_id"] == recorded["run_id"]
    assert header["setup"]["web"]["primary"] == ["searxng"]
    assert header["budget"]["max_tool_calls"] == 4
    assert json.loads(path.read_text().splitlines()[-1])["schedule"][0] == ["run.started", ""]
    # no servers, no search config, no model URL: everything comes from the cassette
    monkeypatch.delenv("REACTIVE_RAG_SEARXNG_URL")
    code, out, err = await _cli(["ask", "--replay", str(path), "--root", str(notes), "--json",
                                 "--quiet"], capsys)
    replayed = json.loads(out.strip().splitlines()[-1])
    for result in (recorded, replayed):  # each run's own time
        result.pop("elapsed_s")
        result["usage"].pop("wall_s")
    assert replayed == recorded, err


async def test_cli_replay_refuses_bad_files_and_options_with_exit_2(
        notes: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    _clean_env(monkeypatch)
    good = tmp_path / "good.jsonl"
    Cassette.record(good, _header().model_copy(update={"collections": ("notes",)})).close()
    corrupt = tmp_path / "corrupt.jsonl"
    corrupt.write_text("{broken")
    base = ["ask", "--root", str(notes), "--quiet"]
    for argv, message in [
        ([*base, "--replay", str(tmp_path / "missing.jsonl")], "--replay: cannot read cassette"),
        ([*base, "--replay", str(corrupt)], "not JSON"),
        ([*base, "--replay", str(good), "--budget", "max_steps=2"], "drop --budget"),
        ([*base, "--replay", str(good), "--collection", "notes"], "drop --collection"),
        (base, "needs a question"),
    ]:
        code, _, err = await _cli(argv, capsys)
        assert code == 2 and message in err, (argv, err)
    with pytest.raises(SystemExit) as exc:
        main([*base, "q", "--record", str(tmp_path / "a"), "--replay", str(good)])
    assert exc.value.code == 2 and "not allowed with argument" in capsys.readouterr().err
    code, _, err = await _cli([*base, "Who designed Raft?", "--collection", "missing",
                               "--record", str(tmp_path / "never.jsonl")], capsys)
    assert code == 2 and not (tmp_path / "never.jsonl").exists()
    assert not (tmp_path / "never.jsonl.partial").exists()


async def test_filters_reach_the_provider_and_what_it_could_not_apply_is_replayed(
        tmp_path: Path) -> None:
    path = tmp_path / "filters.jsonl"
    filters = SearchFilters(language="xx", sites=("brave.test",), date_from="2024-01-01")
    async with fake_web() as web_api:
        live = Searcher.from_config(TenantSearchConfig(
            providers={"brave": web_api.settings("brave")}))
        with Cassette.record(path, _header(live)) as cassette:
            recorded = await cassette.searcher(live).search("tea", k=3, filters=filters)
        await live.aclose()
    assert "freshness" in web_api.last_request["brave"]["params"]  # the filter reached the API
    assert recorded.unapplied and recorded.providers == ("brave",)
    replay = Cassette.load(path).searcher()
    assert replay.providers["brave"].supported_filters == frozenset(  # type: ignore[attr-defined]
        {"date", "language"})
    again = await replay.search("tea", k=3, filters=filters)
    assert (again.hits, again.unapplied, again.providers) == (
        recorded.hits, recorded.unapplied, recorded.providers)
    with pytest.raises(CassetteMiss, match="filters"):  # other filters: another request
        await replay.providers["brave"].search(  # type: ignore[call-arg]
            "tea", 6, None, filters=SearchFilters(language="de"))


async def test_the_controller_takes_its_inputs_in_the_recorded_order(tmp_path: Path) -> None:
    """Parallel calls finish in thread-timing order; a replay decides in the recorded one."""
    path = tmp_path / "schedule.jsonl"
    path.write_text(_valid_header() + "\n" + json.dumps({"schedule": [
        ["search.completed", "a"], ["search.completed", "b"], ["plan.decided", ""]]}) + "\n")
    gate = Cassette.load(path, order_wait_s=0.2).edges()["controller"][0]
    source: Subject[Event] = Subject()
    got: list[str] = []
    gate(source).subscribe(lambda e: got.append(f"{e.type}:{getattr(e, 'call_id', '')}"))
    source.on_next(SearchCompleted(call_id="b", query="q"))
    source.on_next(SearchFailed(call_id="z", query="q", error=ErrorInfo(kind="X", message="")))
    assert got == ["search.failed:z"]  # never recorded: passes at once; b waits for a
    source.on_next(SearchCompleted(call_id="a", query="q"))
    assert got == ["search.failed:z", "search.completed:a", "search.completed:b"]
    source.on_next(PlanDecided(action="answer"))
    source.on_next(PlanDecided(action="answer"))  # a second one was never recorded
    assert len(got) == 5
    late = Cassette.load(path, order_wait_s=0.2).edges()["controller"][0]
    waited: list[str] = []
    second: Subject[Event] = Subject()
    late(second).subscribe(lambda e: waited.append(getattr(e, "call_id", "")))
    second.on_next(SearchCompleted(call_id="b", query="q"))  # a never comes
    assert waited == []
    await eventually(lambda: waited == ["b"], "b let through once the order wait is over")
