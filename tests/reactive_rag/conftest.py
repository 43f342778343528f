"""Fixtures shared by the HTTP service tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from reactive_rag.index import CorpusIndex

from ._server_fixtures import build_index


@pytest.fixture(scope="module")
def server_index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CorpusIndex]:
    """The server tests' corpus: ``demo`` (both tenants) and ``secret`` (beta only)."""
    idx = build_index(tmp_path_factory.mktemp("idx"))
    yield idx
    idx.close()
