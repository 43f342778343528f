"""The chat-model tests' local OpenAI-shaped server and a client of it (no retries)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from actors.models import OpenAIChatClient
from tests.actors._openai_fixtures import FakeOpenAI, fake_openai


@pytest.fixture
async def server() -> AsyncIterator[FakeOpenAI]:
    async with fake_openai() as fake:
        yield fake


@pytest.fixture
async def client(server: FakeOpenAI) -> AsyncIterator[OpenAIChatClient]:
    async with OpenAIChatClient(server.base_url, model="m", max_retries=0) as chat:
        yield chat
