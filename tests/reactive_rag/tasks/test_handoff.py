"""Whole-document questions hand off to the background summary task; others do not."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path

import pytest

from actors.models import HashingEmbedder
from reactive_rag.engine import Engine
from reactive_rag.index import ChunkingConfig, CorpusIndex, Document
from reactive_rag.judgement import DocumentRef, JudgeError, WholeDocumentRequest
from reactive_rag.store import SqliteRunStore, TaskStatus
from reactive_rag.tasks import TaskManager, summary_starter
from streams import HandoffDecided, RunFinished, TaskLink
from tests.actors._openai_fixtures import fake_openai, stream_reply

TOPICS = ["containers", "volumes", "networks", "secrets", "health checks", "rollbacks"]
GUIDE = " ".join(
    f"Step {i} of the deployment explains how {TOPICS[i % len(TOPICS)]} are configured "
    f"before the service starts. Operators check {TOPICS[(i + 2) % len(TOPICS)]} after "
    f"release number {i}." for i in range(30))
TEA = "Green tea is made from the leaves of Camellia sinensis. It is steeped in hot water."


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CorpusIndex]:
    idx = CorpusIndex(tmp_path_factory.mktemp("handoff-idx"), HashingEmbedder(),
                      chunking=ChunkingConfig(target_words=60, overlap_ratio=0.0, max_words=80))
    idx.index_documents("docs", [
        Document(id="guides/deployment.md", title="Deployment guide", text=GUIDE),
        Document(id="tea.md", title="Green tea", text=TEA),
    ])
    yield idx
    idx.close()


@pytest.fixture
async def manager(tmp_path: Path, index: CorpusIndex) -> AsyncIterator[TaskManager]:
    async with SqliteRunStore(tmp_path / "runs.db") as store:
        tasks = TaskManager(store, index, sentences=3)
        yield tasks
        await tasks.aclose()


def engine_for(index: CorpusIndex, manager: TaskManager, **options: object) -> Engine:
    return Engine(index, embedder=HashingEmbedder(), tasks=summary_starter(manager),
                  **options)  # type: ignore[arg-type]


async def test_summarise_a_document_of_the_collection_starts_its_task_and_ends_handed_off(
        index: CorpusIndex, manager: TaskManager) -> None:
    engine = engine_for(index, manager)
    result = await engine.ask("Summarise the deployment guide", collections=["docs"])

    assert result.outcome == "handed_off"
    assert result.task is not None
    assert result.task.doc_id == "guides/deployment.md" and result.task.collection == "docs"
    assert result.task.link == f"/v1/tasks/{result.task.task_id}"
    assert result.task.task_id in result.answer and result.task.link in result.answer
    finished = result.events[-1]
    assert isinstance(finished, RunFinished) and finished.task == result.task
    assert result.count("plan.requested") == 0 and result.count("search.requested") == 0
    decided = next(e for e in result.events if isinstance(e, HandoffDecided))
    assert decided.by == "offline" and decided.title == "Deployment guide"

    task = await manager.wait(result.task.task_id)  # the task goes on and is stored
    assert task.status is TaskStatus.DONE and task.run_id == result.run_id
    assert isinstance(task.result, dict) and task.result["doc_id"] == "guides/deployment.md"
    assert task.result["text"]
    for sentence in task.result["sentences"]:  # type: ignore[union-attr]
        assert isinstance(sentence, dict)
        assert sentence["text"] in index.chunk(str(sentence["chunk_id"]), collection="docs").text


async def test_a_factual_question_is_answered_not_handed_off(
        index: CorpusIndex, manager: TaskManager) -> None:
    result = await engine_for(index, manager).ask(
        "What is green tea made from?", collections=["docs"])

    assert result.outcome != "handed_off" and result.task is None
    assert result.count("handoff.requested") == 1
    decided = next(e for e in result.events if isinstance(e, HandoffDecided))
    assert decided.task is None
    assert result.count("search.requested") >= 1
    assert await manager.store.list_unfinished_tasks() == []


async def test_summarising_a_document_not_in_the_collections_searches_as_before(
        index: CorpusIndex, manager: TaskManager) -> None:
    result = await engine_for(index, manager).ask(
        "Summarise the security handbook", collections=["docs"])

    assert result.outcome != "handed_off" and result.task is None
    assert result.outcome in ("answered", "partial", "no_evidence", "degraded")
    assert result.count("search.requested") >= 1


async def test_the_rules_switched_off_never_hand_off(
        index: CorpusIndex, manager: TaskManager) -> None:
    result = await engine_for(index, manager, judgement_off={"whole_document"}).ask(
        "Summarise the deployment guide", collections=["docs"])

    assert result.outcome != "handed_off"
    assert result.count("handoff.requested") == 0


async def test_an_engine_without_tasks_never_asks(index: CorpusIndex) -> None:
    result = await Engine(index, embedder=HashingEmbedder()).ask(
        "Summarise the deployment guide", collections=["docs"])

    assert result.outcome != "handed_off"
    assert result.count("handoff.requested") == 0


class _Judge:
    """A stand-in chat model: picks a document by id, or fails like a model outage."""

    name = "test-judge"

    def __init__(self, pick: str | None, fail: bool = False) -> None:
        self.pick, self.fail = pick, fail
        self.hints: list[WholeDocumentRequest | None] = []

    async def judge(self, question: str, documents: Sequence[DocumentRef],
                    hint: WholeDocumentRequest | None) -> WholeDocumentRequest | None:
        self.hints.append(hint)
        if self.fail:
            raise JudgeError("model unavailable", status=503, model=self.name)
        doc = next((d for d in documents if d.doc_id == self.pick), None)
        return None if doc is None else WholeDocumentRequest(doc, "asked whole", by="model")


async def test_a_model_judge_decides_over_the_rules(
        index: CorpusIndex, manager: TaskManager) -> None:
    judge = _Judge("tea.md")  # a paraphrase the rules do not read
    result = await engine_for(index, manager, whole_document=judge).ask(
        "Walk me through everything the tea note says", collections=["docs"])

    assert result.outcome == "handed_off"
    assert result.task is not None and result.task.doc_id == "tea.md"
    decided = next(e for e in result.events if isinstance(e, HandoffDecided))
    assert decided.by == "model" and decided.model == "test-judge"
    assert judge.hints == [None]  # the rules saw no whole-document request: the hint says so


async def test_a_failing_model_judge_is_stood_in_for_by_the_rules_said_so(
        index: CorpusIndex, manager: TaskManager) -> None:
    result = await engine_for(index, manager, whole_document=_Judge(None, fail=True)).ask(
        "Summarise the deployment guide", collections=["docs"])

    assert result.outcome == "handed_off"
    decided = next(e for e in result.events if isinstance(e, HandoffDecided))
    assert decided.by == "offline" and decided.fallback is not None
    assert decided.fallback.status == 503


async def test_a_document_gone_before_its_task_starts_is_not_handed_off(
        index: CorpusIndex) -> None:
    async def gone(collection: str, doc_id: str, run_id: str) -> TaskLink:
        raise LookupError(f"no document {doc_id!r}")

    result = await Engine(index, embedder=HashingEmbedder(), tasks=gone).ask(
        "Summarise the deployment guide", collections=["docs"])

    assert result.outcome != "handed_off"
    decided = next(e for e in result.events if isinstance(e, HandoffDecided))
    assert decided.task is None and "could not start" in decided.reason
    assert result.count("search.requested") >= 1


async def test_the_handoff_chat_role_lets_a_configured_model_decide(
        tmp_path: Path, manager: TaskManager) -> None:
    own = CorpusIndex(tmp_path / "index", HashingEmbedder())  # aclose closes it
    own.index_documents("docs", [Document(id="guides/deployment.md", title="Deployment guide",
                                          text=GUIDE), Document(id="tea.md", title="Green tea",
                                                                text=TEA)])
    tasks = TaskManager(manager.store, own, sentences=2)
    async with fake_openai() as model:
        model.script(stream_reply(json.dumps(
            {"whole_document": True, "document": "tea.md", "reason": "the whole note"})))
        engine = Engine.from_config(
            {"chat": {"url": model.base_url, "model": "m", "roles": ["handoff"]}},
            index=own, env={}, embedder=HashingEmbedder())
        engine.hand_off_to(summary_starter(tasks))
        try:
            result = await engine.ask("Walk me through everything the tea note says",
                                      collections=["docs"])
            assert result.task is not None
            assert (await tasks.wait(result.task.task_id)).status is TaskStatus.DONE
        finally:
            await tasks.aclose()
            await engine.aclose()
        asked = str(model.requests[0]["messages"][1]["content"])

    assert result.outcome == "handed_off" and result.task is not None
    assert result.task.doc_id == "tea.md"
    decided = next(e for e in result.events if isinstance(e, HandoffDecided))
    assert decided.by == "model" and decided.model == "m" and decided.reason == "the whole note"
    assert "id=guides/deployment.md" in asked and "id=tea.md" in asked
