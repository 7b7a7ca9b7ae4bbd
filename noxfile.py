"""Sessions: tests per backend and waiter, tests against the oldest
dependencies pyproject.toml accepts (also on each interpreter,
``tests_floor_versions``) and against each AnyIO and Trio minor release
between those and the newest (``tests_anyio_releases``,
``tests_trio_releases``; these three run by hand),
AnyIO's own tests run against the
drop-ins, both on every interpreter too, lint, typecheck (mypy on the
package, examples, tests, bench and tools), pyright, docs, package, bench,
and mutation testing of one module (``mutation``, run by hand).

``nox -s lint typecheck pyright docs package tests tests_floor conformance``
is the README's test command and what CI runs; ``nox -s bench`` is its
benchmark command.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
import tarfile

import nox
from packaging.version import Version

nox.options.error_on_missing_interpreters = False
nox.options.sessions = [
    "lint",
    "typecheck",
    "pyright",
    "docs",
    "package",
    "tests",
    "tests_floor",
    "conformance",
]

BACKENDS = ["asyncio", "uvloop", "trio"]
WAITERS = ["native", "generic"]
VERSIONS = ["3.10", "3.11", "3.12", "3.13", "3.14", "3.15"]
TEST_DEPS = [
    "pytest>=8",
    "hypothesis>=6.100",
    "pytest-timeout>=2.1",
    "pytest-xdist>=3.6",
]
#: pytest as the test sessions run it.  A test that deadlocks (the failure
#: a concurrency primitive's bug produces) stops the session after two
#: minutes with every thread's stack printed, instead of holding CI until
#: its limit; the slowest test takes well under a second.  ``thread``: the
#: timer does not depend on the event loop, which a deadlock may have
#: stopped.
PYTEST = ["pytest", "--timeout=120", "--timeout-method=thread"]
#: ``PYTEST`` for this project's own suite: spread over one worker process
#: per CPU (pytest-xdist).  Each test makes its own event loop and its own
#: primitives, so the tests share nothing across processes; on two CPUs a
#: whole-suite run takes 3 minutes instead of 5.  A timed-out test ends its
#: worker, which xdist reports as a crash that fails the session.  ``-- -n
#: 0`` after a session's name runs the tests in one process again.
#: AnyIO's own tests (``conformance``) keep ``PYTEST``.
PYTEST_PARALLEL = [*PYTEST, "-n", "auto"]


def _expose_interpreter(version: str) -> None:
    """Put a working ``pythonX.Y`` first on PATH if pyenv hides it.

    pyenv's shims answer only for the selected version; an unselected one
    fails when run.  nox then sees a broken interpreter instead of a missing
    one, so put the real one first on PATH, or leave it missing (skipped).
    """
    name = f"python{version}"
    found = shutil.which(name)
    if (
        found
        and subprocess.run([found, "-c", "pass"], capture_output=True).returncode == 0
    ):
        return
    root = os.environ.get("PYENV_ROOT", os.path.expanduser("~/.pyenv"))
    for candidate in sorted(glob.glob(f"{root}/versions/{version}.*/bin/{name}")):
        if os.access(candidate, os.X_OK):
            bindir = os.path.dirname(candidate)
            os.environ["PATH"] = bindir + os.pathsep + os.environ.get("PATH", "")
            return


for _version in VERSIONS:
    _expose_interpreter(_version)


def _install(session: nox.Session) -> None:
    session.install("-e", ".[trio,uvloop]", *TEST_DEPS)


@nox.session
@nox.parametrize("waiter", WAITERS)
@nox.parametrize("backend", BACKENDS)
def tests(session: nox.Session, backend: str, waiter: str) -> None:
    """The whole suite on one backend, with the native or the generic waiter."""
    _install(session)
    env = {"ANYIO_PRIMS_BACKENDS": backend, "ANYIO_PRIMS_WAITER": waiter}
    session.run(*PYTEST_PARALLEL, *session.posargs, env=env)


@nox.session
def mutation(session: nox.Session) -> None:
    """Mutation testing of one module (tools/mutation.py, whose docstring
    says how to read the result): each small change to the code in turn,
    against the tests given.  Not in the test command: it runs the tests
    once per mutant.  ``nox -s mutation -- MODULE --out FILE -- TESTS``."""
    if not session.posargs:
        session.error("usage: nox -s mutation -- MODULE --out FILE -- TESTS")
    _install(session)
    session.run("python", "tools/mutation.py", *session.posargs)


@nox.session(python=VERSIONS)
def tests_versions(session: nox.Session) -> None:
    """The whole suite, every backend, on each interpreter that is present."""
    _install(session)
    for waiter in WAITERS:
        session.run(
            *PYTEST_PARALLEL, "-q", *session.posargs, env={"ANYIO_PRIMS_WAITER": waiter}
        )


def _floor_pins() -> list[str]:
    """``name==X`` for each ``name>=X`` that pyproject.toml's ``[project]``
    table declares (the runtime dependency and the extras): the oldest
    releases the package says it works with."""
    with open("pyproject.toml", encoding="utf-8") as f:
        text = f.read()
    project = text.split("[project]", 1)[1].split("\n[tool.", 1)[0]
    pins = re.findall(r'"([A-Za-z0-9_.-]+)>=([0-9][0-9A-Za-z.]*)', project)
    return [f"{name}=={floor}" for name, floor in pins]


def _run_pinned(session: nox.Session, pins: list[str]) -> None:
    """The whole suite, every backend, both waiters, with ``pins``."""
    session.install("-e", ".[trio,uvloop]", *TEST_DEPS, *pins)
    session.run("python", "-m", "pip", "list")
    for waiter in WAITERS:
        session.run(
            *PYTEST_PARALLEL, "-q", *session.posargs, env={"ANYIO_PRIMS_WAITER": waiter}
        )


#: Floor pins that an interpreter cannot install: package -> (the Python
#: version from which, the oldest release that installs there); one raise
#: per package.  uvloop 0.19 and 0.20 have no wheel for CPython 3.13; 0.21
#: is the first with one.  Applied only where it raises the floor.
FLOOR_RAISED: dict[str, tuple[str, str]] = {"uvloop": ("3.13", "0.21.0")}
#: The interpreters ``tests_floor_versions`` runs on.  AnyIO 4.6 and Trio
#: 0.26.1 predate CPython 3.14.
FLOOR_VERSIONS = ["3.10", "3.11", "3.12", "3.13"]


def _floor_requirements() -> list[str]:
    """The floor pins, each raised by ``FLOOR_RAISED`` on the interpreters
    that need it: an environment marker per side, which the installer
    judges for the interpreter the session runs on."""
    requirements = []
    for pin in _floor_pins():
        name, floor = pin.split("==")
        if name in FLOOR_RAISED:
            python, release = FLOOR_RAISED[name]
            if Version(release) > Version(floor):
                requirements.append(f'{pin}; python_version < "{python}"')
                pin = f'{name}=={release}; python_version >= "{python}"'
        requirements.append(pin)
    return requirements


def _floor(session: nox.Session) -> None:
    requirements = _floor_requirements()
    if not any(pin.startswith("anyio==") for pin in requirements):
        session.error(f"no anyio floor found in pyproject.toml: {requirements}")
    _run_pinned(session, requirements)


@nox.session
def tests_floor(session: nox.Session) -> None:
    """The whole suite, every backend, both waiters, against the oldest anyio,
    trio and uvloop that pyproject.toml accepts (and that nox's interpreter
    can install: ``FLOOR_RAISED``): the floors are tested, not guessed.  The
    tests that compare the drop-ins with anyio's own classes skip where that
    anyio behaves otherwise (tests/_anyio_version.py)."""
    _floor(session)


@nox.session(python=FLOOR_VERSIONS)
def tests_floor_versions(session: nox.Session) -> None:
    """``tests_floor`` on each interpreter from 3.10 to 3.13 that is present
    (by hand; CI runs ``tests_floor`` on one)."""
    _floor(session)


#: The newest AnyIO minor release (4.x); raise it with each new one.
ANYIO_NEWEST_MINOR = 16


def _minor_releases(
    package: str, major: str, newest_minor: int
) -> tuple[list[str], re.Match[str] | None]:
    """``major.N`` for each minor release of ``package`` from the floor
    pyproject.toml names to ``newest_minor``, and the floor pin's match.  A
    floor this cannot read gives the name of one session that fails saying
    so (and ``None``), not an error that stops every session."""
    floors = [pin for pin in _floor_pins() if pin.startswith(f"{package}==")]
    found = (
        re.fullmatch(rf"{package}=={major}\.(\d+)(\.\d+)?(?:\.post\d+)?", floors[0])
        if floors
        else None
    )
    if found is None:
        return [f"unreadable floor {floors}"], None
    floor_minor = int(found[1])
    releases = [
        f"{major}.{minor}"
        for minor in range(floor_minor, max(floor_minor, newest_minor) + 1)
    ]
    return releases, found


def _anyio_releases() -> list[str]:
    """The AnyIO releases ``tests_anyio_releases`` tests against: each minor
    release from the floor to the newest (its newest patch), and 4.12.0
    while the floor allows it, the one patch release that raises
    differently from the newest patch of its minor
    (``anyio_prims/_core/_backend.py``, ``_no_event_loop_error``).  CI tests
    only the floor and the newest."""
    releases, found = _minor_releases("anyio", "4", ANYIO_NEWEST_MINOR)
    if found is not None and (int(found[1]), int((found[2] or ".0")[1:])) <= (12, 0):
        releases.append("4.12.0")
    return releases


ANYIO_RELEASES = _anyio_releases()
#: AnyIO releases whose pytest plugin imports ``CallSpec2``, a name pytest
#: 9.2 deprecated: the suite makes warnings errors, so under pytest 9.2 the
#: plugin fails to load.  Their runs keep pytest before 9.2.
ANYIO_PLUGIN_NEEDS_PYTEST_BEFORE_9_2 = {"4.13", "4.14"}


@nox.session
@nox.parametrize("release", ANYIO_RELEASES)
def tests_anyio_releases(session: nox.Session, release: str) -> None:
    """The whole suite, every backend, both waiters, against one AnyIO
    release: ``4.N`` is the newest patch of that minor release, ``4.N.P``
    exactly that one (``nox -s tests_anyio_releases`` runs them all, 2-3
    minutes each; ``-- -k NAME`` as for ``tests``).  The tests that compare
    the drop-ins with AnyIO's own classes skip where that AnyIO behaves
    otherwise, as in ``tests_floor``."""
    if not re.fullmatch(r"4\.\d+(\.\d+)?", release):
        session.error(
            f"noxfile.py: {release} in pyproject.toml: update _anyio_releases()"
        )
    pins = [f"anyio=={release}" if release.count(".") == 2 else f"anyio~={release}.0"]
    if release in ANYIO_PLUGIN_NEEDS_PYTEST_BEFORE_9_2:
        pins.append("pytest<9.2")
    _run_pinned(session, pins)


#: The newest Trio minor release (0.x); raise it with each new one.
TRIO_NEWEST_MINOR = 35


def _trio_releases() -> list[str]:
    """The Trio releases ``tests_trio_releases`` tests against: each minor
    release from the floor to the newest (``_minor_releases``)."""
    return _minor_releases("trio", "0", TRIO_NEWEST_MINOR)[0]


@nox.session
@nox.parametrize("release", _trio_releases())
def tests_trio_releases(session: nox.Session, release: str) -> None:
    """The whole suite, every backend, both waiters, with the newest patch
    of one Trio minor release (by hand; CI tests only the floor and the
    newest).  The package's ``trio`` extra asks for ``anyio[trio]``, so the
    installer picks the newest AnyIO that accepts that Trio: AnyIO 4.11
    needs Trio 0.31 and AnyIO 4.12 needs 0.32, so Trio 0.26 to 0.30 run
    with AnyIO 4.10 and 0.31 with 4.11."""
    if not re.fullmatch(r"0\.\d+", release):
        session.error(
            f"noxfile.py: {release} in pyproject.toml: update _trio_releases()"
        )
    _run_pinned(session, [f"trio~={release}.0"])


#: The AnyIO release whose own tests ``conformance`` runs against the
#: drop-ins: the one they follow (docs/migrate-anyio.md).  A fixed release,
#: so that the session's result does not change with the day it runs;
#: raise it with the release the drop-ins follow.
CONFORMANCE_ANYIO = "4.16.0"
#: AnyIO's test files for the classes the drop-ins replace, then the other
#: ones whose tests use those classes (as tools: an ``Event`` to hand a
#: task over, a ``CapacityLimiter`` for threads, a memory stream under a
#: buffered, text or TLS stream).
CONFORMANCE_FILES = [
    "tests/test_synchronization.py",
    "tests/streams/test_memory.py",
    "tests/test_taskgroups.py",
    "tests/test_from_thread.py",
    "tests/test_to_thread.py",
    "tests/test_concurrency_utils.py",
    "tests/test_functools.py",
    "tests/test_debugging.py",
    "tests/streams/test_buffered.py",
    "tests/streams/test_text.py",
    "tests/streams/test_tls.py",
]


def _extract_tests(archive: str, into: str) -> str:
    """Extract the ``tests/`` directory of an sdist into ``into``; return the
    directory that holds it (the sdist's top directory)."""
    with tarfile.open(archive) as sdist:
        top = sdist.getnames()[0].split("/", 1)[0]
        members = [
            m
            for m in sdist.getmembers()
            if m.name.startswith(f"{top}/tests/")
            and (m.isfile() or m.isdir())
            and ".." not in m.name.split("/")
        ]
        if hasattr(tarfile, "data_filter"):
            sdist.extractall(into, members=members, filter="data")
        else:  # Python without extraction filters: members checked above
            sdist.extractall(into, members=members)
    return os.path.join(into, top)


@nox.session
def conformance(session: nox.Session) -> None:
    """AnyIO's own tests of ``Lock``, ``Semaphore``, ``CapacityLimiter``,
    ``Event``, ``Condition`` and the memory object streams, and its other
    tests that use them (:data:`CONFORMANCE_FILES`), run against the
    drop-ins, on every backend AnyIO's tests choose (asyncio, uvloop, eager
    tasks on 3.12+, Trio), with the native and the generic waiter.

    The tests come from the sdist of :data:`CONFORMANCE_ANYIO`, fetched
    from the package index; nothing of AnyIO's is kept in this repository.
    ``tests/anyio_suite/anyio_prims_as_anyio.py`` (a pytest plugin) puts
    the drop-ins under AnyIO's names before the test modules import them,
    checks that they did, and skips the one test that does not apply.
    """
    _conformance(session)


@nox.session(python=VERSIONS)
def conformance_versions(session: nox.Session) -> None:
    """``conformance`` on each interpreter that is present (AnyIO's tests
    add eager tasks from 3.12 on, which CI's default interpreter lacks)."""
    _conformance(session)


def _conformance(session: nox.Session) -> None:
    session.install(
        "-e",
        ".[trio,uvloop]",
        *TEST_DEPS,
        # AnyIO's tests/conftest.py imports trustme; two of the files,
        # pytest_mock
        "trustme",
        "pytest-mock",
        f"anyio=={CONFORMANCE_ANYIO}",
    )
    tmp = os.path.abspath(session.create_tmp())
    download = os.path.join(tmp, "anyio-sdist")
    shutil.rmtree(download, ignore_errors=True)
    session.run(
        "python",
        "-m",
        "pip",
        "download",
        "--quiet",
        "--no-deps",
        "--no-binary",
        ":all:",
        "--dest",
        download,
        f"anyio=={CONFORMANCE_ANYIO}",
    )
    archives = glob.glob(os.path.join(download, "anyio-*.tar.gz"))
    if len(archives) != 1:
        session.error(f"expected one anyio sdist in {download}, found {archives}")
    source = os.path.join(tmp, "anyio-source")
    shutil.rmtree(source, ignore_errors=True)
    root = _extract_tests(archives[0], source)
    suite = os.path.abspath(os.path.join("tests", "anyio_suite"))
    config = os.path.join(suite, "pytest.ini")
    with session.chdir(root):
        for waiter in WAITERS:
            session.run(
                *PYTEST,
                "-c",
                config,
                "--rootdir",
                root,
                "-q",
                *CONFORMANCE_FILES,
                *session.posargs,
                env={"PYTHONPATH": suite, "ANYIO_PRIMS_WAITER": waiter},
            )


@nox.session
def lint(session: nox.Session) -> None:
    """ruff lint and format check."""
    session.install("ruff>=0.6")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")


# What the typecheck session installs besides the package (with trio and
# uvloop, which tests/ and bench/ import) and the test dependencies: bench/'s
# imports that ship types.  aiologic for the peers, matplotlib for report.py.
# pyperf ships none (pyproject.toml has mypy take it as Any), so installing it
# would change nothing; aiometer is imported only by name at run time.
TYPECHECK_BENCH_DEPS = ["aiologic", "matplotlib"]


@nox.session
def typecheck(session: nox.Session) -> None:
    """mypy --strict on the package, the examples, the tests, bench/ and
    tools/."""
    session.install(
        "-e", ".[trio,uvloop]", "mypy>=1.10", *TEST_DEPS, *TYPECHECK_BENCH_DEPS
    )
    # One invocation.  bench/ has no __init__.py and its scripts import each
    # other as top-level modules (``from harness import ...``): Python runs
    # ``python bench/bench_sync.py`` with bench/ first on sys.path.  mypy maps
    # them the same way: a file outside any package is the top-level module
    # named after it, and the directory of each file named on the command
    # line is on mypy's import search path, so ``harness`` and ``peers``
    # resolve with no mypy_path or MYPYPATH.  examples/ is mapped alike, so
    # a file name must not be in both (mypy stops with "Duplicate module
    # named").
    session.run(
        "mypy", "--strict", "anyio_prims", "examples", "tests", "bench", "tools"
    )


@nox.session
def bench(session: nox.Session) -> None:
    """The pyperf comparison against each backend's own primitives, then the
    report (bench/results/report.md and charts).  Quick by default (under 10
    minutes on 2 cores); ``nox -s bench -- --full`` for rigorous runs.
    """
    session.install(
        ".[trio,uvloop]", "pyperf>=2.11", "aiologic", "aiometer", "matplotlib"
    )
    session.run("python", "bench/run.py", *session.posargs)
    # The report reads the results run.py just wrote: bench/results/, or
    # the directory given with --out (as "--out DIR" or "--out=DIR").
    report_args: list[str] = []
    args = list(session.posargs)
    for i, arg in enumerate(args):
        out = None
        if arg == "--out" and i + 1 < len(args):
            out = args[i + 1]
        elif arg.startswith("--out="):
            out = arg.split("=", 1)[1]
        if out is not None:
            report_args = [os.path.join(out, "latest.json")]
    session.run("python", "bench/report.py", *report_args)


DOCS_DEPS = ["mkdocs>=1.6", "mkdocs-material>=9.5", "mkdocstrings[python]>=0.26"]


@nox.session
def docs(session: nox.Session) -> None:
    """The documentation site (mkdocs.yml), built with --strict: a broken
    link, a missing page or an unresolved API reference fails.  The site
    goes to build/site."""
    session.install("-e", ".", *DOCS_DEPS)
    session.run("mkdocs", "build", "--strict", env={"NO_MKDOCS_2_WARNING": "1"})


@nox.session
def pyright(session: nox.Session) -> None:
    """pyright on the package, the examples and the typing test.

    Run through basedpyright, which ships pyright's checker in its wheel and
    Node.js as a wheel dependency: the session installs everything from the
    Python package index and fetches nothing on first use (the ``pyright``
    wrapper downloads Node.js and pyright itself).  pyproject.toml sets it
    to pyright's own default rules (``typeCheckingMode = "standard"``).
    """
    session.install("-e", ".[trio]", "basedpyright>=1.20", *TEST_DEPS)
    session.run("basedpyright", "anyio_prims", "examples", "tests/test_typing.py")


_CHECK_WHEEL = """
import sys, zipfile
wheel = zipfile.ZipFile(sys.argv[1])
names = wheel.namelist()
assert "anyio_prims/py.typed" in names, "py.typed is missing from the wheel"
metadata = next(n for n in names if n.endswith(".dist-info/METADATA"))
text = wheel.read(metadata).decode()
for framework in ("AnyIO", "AsyncIO", "Trio"):
    assert f"Classifier: Framework :: {framework}" in text, framework
print("wheel ok:", len(names), "files")
"""

_CHECK_CLEAN_INSTALL = """
import importlib.util, sys
import anyio_prims
from anyio_prims import mpmc, mpsc, oneshot, spmc, streams
assert importlib.util.find_spec("trio") is None, "trio should not be installed"
assert "trio" not in sys.modules
print("import anyio_prims ok, without trio:", ", ".join(anyio_prims.__all__))
"""


@nox.session
def package(session: nox.Session) -> None:
    """Build the sdist and the wheel (the wheel from the sdist), check the
    wheel holds py.typed and the Framework classifiers, then install it into
    a fresh virtual environment with only its dependencies (anyio, no trio)
    and import the package there."""
    session.install("build>=1.2")
    tmp = os.path.abspath(session.create_tmp())
    dist = os.path.join(tmp, "dist")
    shutil.rmtree(dist, ignore_errors=True)
    session.run("python", "-m", "build", "--outdir", dist)
    wheels = glob.glob(os.path.join(dist, "*.whl"))
    sdists = glob.glob(os.path.join(dist, "*.tar.gz"))
    if len(wheels) != 1 or len(sdists) != 1:
        session.error(f"expected one wheel and one sdist in {dist}")
    session.run("python", "-c", _CHECK_WHEEL, wheels[0])
    clean = os.path.join(tmp, "clean-venv")
    session.run("python", "-m", "venv", "--clear", clean)
    python = os.path.join(clean, "bin", "python")
    session.run(python, "-m", "pip", "install", "--quiet", wheels[0], external=True)
    # Run from the temporary directory, so the checkout is not importable.
    with session.chdir(tmp):
        session.run(python, "-c", _CHECK_CLEAN_INSTALL, external=True)
