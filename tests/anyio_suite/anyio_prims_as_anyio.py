"""A pytest plugin: AnyIO's own tests of the classes the drop-ins replace,
run against the drop-ins.

``nox -s conformance`` fetches the sdist of an anyio release and runs its
``tests/test_synchronization.py`` and ``tests/streams/test_memory.py``, and
the other test modules that use these classes (task groups, threads,
``anyio.functools``, stream wrappers...), with this plugin loaded first (``-p
anyio_prims_as_anyio``).  The plugin binds anyio_prims' ``Lock``,
``Semaphore``, ``CapacityLimiter``, ``Event``, ``Condition`` and
``create_memory_object_stream`` in the ``anyio`` namespace, where the test
modules import them from.  anyio's own modules import these names from
their defining modules, not from ``anyio``, so anyio itself keeps its
classes: only the tests see the drop-ins, as a user's code does after
changing one import.

Only the ``anyio`` namespace: ``anyio.streams.memory`` stays as it is.
Its endpoint classes make their clones by the module's global names, so
binding the drop-in endpoints there would change anyio's own streams;
``test_memory.py`` imports those classes for annotations only, and the
drop-in endpoints are registered as their virtual subclasses
(``isinstance`` holds).

Nothing of anyio's is copied into this repository: the tests come from the
release being tested, at run time.  A test run in which a test module
still holds anyio's class under one of these names fails (the swap did not
take, and the run would be testing anyio against itself).

The one test left out is named in :data:`NOT_APPLICABLE`, with the reason.
"""

from __future__ import annotations

import sys
from types import ModuleType

import anyio
import pytest

import anyio_prims

#: name -> the drop-in, in the ``anyio`` namespace
IN_ANYIO: dict[str, object] = {
    "CapacityLimiter": anyio_prims.CapacityLimiter,
    "Condition": anyio_prims.Condition,
    "Event": anyio_prims.Event,
    "Lock": anyio_prims.Lock,
    "Semaphore": anyio_prims.Semaphore,
    "create_memory_object_stream": anyio_prims.create_memory_object_stream,
}
#: test function name -> why it does not apply to the drop-ins
NOT_APPLICABLE = {
    "test_current_default_thread_limiter": (
        "checks that anyio.to_thread.current_default_thread_limiter() returns"
        " an instance of anyio's CapacityLimiter: that limiter is anyio's own,"
        " which the drop-in does not replace"
    ),
}

_ORIGINALS = {name: getattr(anyio, name) for name in IN_ANYIO}

for _name, _value in IN_ANYIO.items():
    setattr(anyio, _name, _value)


#: test module name -> the drop-ins it holds (for the summary)
_SEEN: dict[str, list[str]] = {}


def _check_module(module: ModuleType) -> None:
    """Fail unless every replaced name ``module`` holds is the drop-in."""
    held = []
    for name, value in vars(module).items():
        if name in IN_ANYIO:
            if value is not IN_ANYIO[name]:
                raise pytest.UsageError(
                    f"{module.__name__}.{name} is {value!r}, not anyio_prims'"
                    " drop-in: the swap did not take"
                )
            held.append(name)
    _SEEN[module.__name__] = sorted(held)


def pytest_collection_modifyitems(
    config: pytest.Config, items: list[pytest.Item]
) -> None:
    """Check that the swap took in every test module; skip what does not
    apply (:data:`NOT_APPLICABLE`)."""
    for item in items:
        module = getattr(item, "module", None)
        if isinstance(module, ModuleType):
            _check_module(module)
        reason = NOT_APPLICABLE.get(getattr(item, "originalname", item.name))
        if reason is not None:
            item.add_marker(pytest.mark.skip(reason=reason))
    # The drop-ins are not anyio's classes (else nothing here is tested).
    for name, original in _ORIGINALS.items():
        if IN_ANYIO[name] is original:
            raise pytest.UsageError(f"anyio_prims.{name} is anyio's own")


def pytest_report_header(config: pytest.Config) -> str:
    return (
        f"anyio_prims' drop-ins under anyio's names, anyio {_anyio_version()},"
        f" Python {sys.version.split()[0]}"
    )


def _anyio_version() -> str:
    from importlib.metadata import version

    return version("anyio")


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Name, per test module, the drop-ins its tests used."""
    terminalreporter.write_sep("-", "anyio_prims' drop-ins, by test module")
    for module, names in sorted(_SEEN.items()):
        terminalreporter.write_line(f"{module}: {', '.join(names) or '(none)'}")
