"""Which anyio release is installed, for the tests that compare with it.

The drop-in classes keep the behaviour of the anyio release named in
``docs/migrate-anyio.md``.  The tests that run one scenario against anyio's
own classes and against ours need an anyio that behaves so; under an older
one (``nox -s tests_floor`` installs the oldest anyio pyproject.toml
accepts) they skip, and every other test runs.
"""

from __future__ import annotations

import re
from importlib.metadata import version

import pytest

#: The installed anyio's version string ("4.12.0").
ANYIO_RELEASE: str = version("anyio")
_major, _minor = (int(part) for part in re.findall(r"\d+", ANYIO_RELEASE)[:2])
#: (major, minor) of the installed anyio.
ANYIO_VERSION: tuple[int, int] = (_major, _minor)


def requires_anyio(major: int, minor: int, changed: str) -> pytest.MarkDecorator:
    """Skip unless anyio >= major.minor, the release in which ``changed``."""
    return pytest.mark.skipif(
        (major, minor) > ANYIO_VERSION,
        reason=f"compares with anyio's own classes: needs anyio >= "
        f"{major}.{minor}, in which {changed}",
    )
