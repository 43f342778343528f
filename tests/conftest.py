"""Fixtures every test package shares."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from .actors._ray_fixtures import local_ray


@pytest.fixture(scope="module")
def ray() -> Iterator[Any]:
    """A local Ray cluster for the requesting module (skips without Ray, see local_ray)."""
    yield from local_ray()
