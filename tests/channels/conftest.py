"""Fixtures shared by the channel tests."""

from __future__ import annotations

import pytest

from ._support import CHANNELS


@pytest.fixture(params=list(CHANNELS))
def flavour(request: pytest.FixtureRequest) -> str:
    """Each of mpsc, spmc and mpmc in turn."""
    name: str = request.param
    return name
