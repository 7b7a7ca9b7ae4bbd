"""Every ```python block in docs/*.md that ends in ``anyio.run(main)`` runs,
unchanged but for that last line, on every backend of the suite."""

from __future__ import annotations

import pathlib
import re
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

DOCS = pathlib.Path(__file__).resolve().parent.parent / "docs"
_BLOCK = re.compile(r"```python\n(.*?)```", re.DOTALL)
_RUN = re.compile(r"^anyio\.run\(main(?:, backend=\"\w+\")?\)\s*$", re.MULTILINE)


def _examples() -> list[Any]:
    found = []
    for page in sorted(DOCS.glob("*.md")):
        for number, block in enumerate(_BLOCK.findall(page.read_text()), 1):
            if _RUN.search(block):
                found.append(pytest.param(block, id=f"{page.stem}-{number}"))
    return found


EXAMPLES = _examples()


def test_docs_have_runnable_examples() -> None:
    assert EXAMPLES, "no runnable example found in docs/"


@pytest.mark.anyio
@pytest.mark.parametrize("source", EXAMPLES)
async def test_docs_example_runs(source: str) -> None:
    namespace: dict[str, Any] = {"__name__": "docs_example"}
    exec(compile(_RUN.sub("", source), "<docs example>", "exec"), namespace)
    main: Callable[[], Awaitable[None]] = namespace["main"]
    await main()
