"""Every program in examples/ runs, and checks its own result, on every
backend of the suite, so the examples never rot."""

from __future__ import annotations

import importlib.util
import pathlib
import sys
from types import ModuleType

import pytest

pytestmark = pytest.mark.anyio

EXAMPLES = pathlib.Path(__file__).resolve().parent.parent / "examples"


def _load(name: str) -> ModuleType:
    path = EXAMPLES / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"examples_{name}", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_every_example_is_tested() -> None:
    tested = {"pipeline", "crawler", "cache", "request_response"}
    assert {p.stem for p in EXAMPLES.glob("*.py")} == tested


async def test_pipeline_squares_every_item_with_a_bounded_buffer() -> None:
    pipeline = _load("pipeline")
    results = await pipeline.main()
    assert results == {n: n * n for n in range(pipeline.ITEMS)}


async def test_crawler_visits_every_page_once() -> None:
    crawler = _load("crawler")
    pages = await crawler.main(max_per_second=1000.0)
    assert pages == crawler.SITE


async def test_cache_readers_always_see_a_whole_table() -> None:
    cache = _load("cache")
    seen = await cache.main()
    assert len(seen) == 80
    assert {version for version, _ in seen} <= {0, 1, 2}


async def test_request_response_answers_or_ends_the_stream() -> None:
    request_response = _load("request_response")
    answers = await request_response.main()
    assert answers.count(None) == 1
    assert len(answers) == 5
