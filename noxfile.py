"""Sessions: tests per backend and waiter, tests on every interpreter, lint,
typecheck, bench.  ``nox -s lint typecheck tests`` is the README's test
command and what CI runs; ``nox -s bench`` is its benchmark command.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess

import nox

nox.options.error_on_missing_interpreters = False
nox.options.sessions = ["lint", "typecheck", "tests"]

BACKENDS = ["asyncio", "uvloop", "trio"]
WAITERS = ["native", "generic"]
VERSIONS = ["3.10", "3.11", "3.12", "3.13"]
TEST_DEPS = ["pytest>=8", "hypothesis>=6.100"]


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
    session.run("pytest", *session.posargs, env=env)


@nox.session(python=VERSIONS)
def tests_versions(session: nox.Session) -> None:
    """The whole suite, every backend, on each interpreter that is present."""
    _install(session)
    for waiter in WAITERS:
        session.run(
            "pytest", "-q", *session.posargs, env={"ANYIO_PRIMS_WAITER": waiter}
        )


@nox.session
def lint(session: nox.Session) -> None:
    """ruff lint and format check."""
    session.install("ruff>=0.6")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")


@nox.session
def typecheck(session: nox.Session) -> None:
    """mypy --strict on the package."""
    session.install("-e", ".[trio]", "mypy>=1.10")
    session.run("mypy", "--strict", "anyio_prims")


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
    session.run("python", "bench/report.py")
