"""Fixtures shared by the end-to-end tests: the small demo corpus, the server's corpus."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from actors.models import HashingEmbedder
from reactive_rag.index import CorpusIndex

from ._corpus import DOCS
from ._server_fixtures import build_index


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CorpusIndex]:
    """The four-document corpus as collection ``demo`` (a module with its own overrides it)."""
    idx = CorpusIndex(tmp_path_factory.mktemp("demo-idx"), HashingEmbedder())
    idx.index_documents("demo", DOCS)
    yield idx
    idx.close()


@pytest.fixture(scope="module")
def server_index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CorpusIndex]:
    """The server tests' corpus: ``demo`` (both tenants) and ``secret`` (beta only)."""
    idx = build_index(tmp_path_factory.mktemp("idx"))
    yield idx
    idx.close()


@pytest.fixture(autouse=True)
def _own_run_store_home(tmp_path_factory: pytest.TempPathFactory,
                        monkeypatch: pytest.MonkeyPatch) -> None:
    """``reactive-rag ask`` keeps its runs in ``$REACTIVE_RAG_HOME/runs.db``: never the user's."""
    monkeypatch.setenv("REACTIVE_RAG_HOME", str(tmp_path_factory.mktemp("home")))


@pytest.fixture
def hashing_default(monkeypatch: pytest.MonkeyPatch) -> None:
    """The index CLI builds its own CorpusIndex; give it the fast deterministic embedder."""
    from reactive_rag.index import _index

    from ._index_helpers import CountingEmbedder

    monkeypatch.setattr(_index, "default_embedder", lambda root: CountingEmbedder())
