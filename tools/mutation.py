"""Mutation testing: does some test fail when the code is wrong?

For one module of the package, make each small change below in turn (a
*mutant*), run the tests given after ``--`` against it, and record whether
some test failed (*killed*) or none did (*survived*):

``del``   a statement replaced by ``pass``
``cmp``   a comparison flipped: ``<`` and ``<=``, ``>`` and ``>=``, ``==``
          and ``!=``, ``is`` and ``is not``, ``in`` and ``not in``
``bool``  ``and`` and ``or`` swapped
``not``   a ``not`` dropped

Only code inside functions is changed.  The work happens in a copy of the
repository, never in the checkout itself, and the copy's package is the one
the tests import (checked before the first run).  The module is rewritten
with ``ast.unparse``, so the unchanged rewrite must pass first; then one
pytest run per mutant, stopping at the first failure (``-x``).  A test that
runs longer than the test limit (60 s unless given) fails: a mutant may
deadlock a primitive.

A survivor is a change no test notices.  Some are *equivalent*: they change
only speed (a fast path skipped, a waiter not recycled) or code that cannot
run, and no test can catch them.  The rest are missing tests.  Results go to
a JSON-lines file, one line per mutant; a second run with the same file
skips the mutants recorded there, so an interrupted run resumes.

Usage (``nox -s mutation -- ARGS`` runs it with the test dependencies)::

    python tools/mutation.py anyio_prims/sync/_lock.py --out lock.jsonl \\
        -- tests/test_lock.py tests/test_semaphore.py

Options: ``--ops del,cmp`` (default: all four), ``--lines 100-200`` (only
mutants starting on those lines), ``--test-limit 15`` (seconds a test may
take, default 60: lower it where many mutants hang).  Set
``ANYIO_PRIMS_BACKENDS`` or ``ANYIO_PRIMS_WAITER`` to narrow the tests'
backends or force a waiter.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
KINDS = ("del", "cmp", "bool", "not")
#: Seconds one test may take before pytest-timeout ends the run and the
#: mutant counts as killed: a mutant can deadlock a primitive, and a test
#: that hangs fails.  A test of this suite takes seconds at most
#: (``--test-limit`` sets it lower where many mutants hang).
TEST_LIMIT = 60
#: Seconds one whole pytest run may take, the same way.
RUN_LIMIT = 900

_FLIPS: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
}


@dataclass(frozen=True)
class Site:
    """One mutant: its kind, where it starts, and which operator (cmp)."""

    kind: str
    line: int
    col: int
    index: int
    text: str

    def key(self) -> list[object]:
        return [self.kind, self.line, self.col, self.index]


def _bodies(node: ast.AST) -> list[list[ast.stmt]]:
    return [
        body
        for field in ("body", "orelse", "finalbody")
        if isinstance(body := getattr(node, field, None), list)
    ]


def _is_docstring(body: list[ast.stmt], i: int) -> bool:
    st = body[i]
    return (
        i == 0
        and isinstance(st, ast.Expr)
        and isinstance(st.value, ast.Constant)
        and isinstance(st.value.value, str)
    )


def find_sites(tree: ast.Module) -> list[Site]:
    """Every mutant of the code inside the module's functions, in order."""
    found: dict[tuple[object, ...], Site] = {}
    for fn in ast.walk(tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in ast.walk(fn):
            for body in _bodies(node):
                for i, st in enumerate(body):
                    if isinstance(st, ast.Pass) or _is_docstring(body, i):
                        continue
                    text = ast.unparse(st).splitlines()[0]
                    site = Site("del", st.lineno, st.col_offset, 0, text)
                    found.setdefault(tuple(site.key()), site)
            if isinstance(node, ast.Compare):
                for k, op in enumerate(node.ops):
                    if type(op) in _FLIPS:
                        text = ast.unparse(node)
                        site = Site("cmp", node.lineno, node.col_offset, k, text)
                        found.setdefault(tuple(site.key()), site)
            elif isinstance(node, ast.BoolOp) or (
                isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not)
            ):
                kind = "bool" if isinstance(node, ast.BoolOp) else "not"
                site = Site(kind, node.lineno, node.col_offset, 0, ast.unparse(node))
                found.setdefault(tuple(site.key()), site)
    return sorted(found.values(), key=lambda s: (s.line, s.col, s.kind, s.index))


class _Mutate(ast.NodeTransformer):
    def __init__(self, site: Site) -> None:
        self.site = site
        self.done = False

    def _at(self, node: ast.AST) -> bool:
        return (
            not self.done
            and getattr(node, "lineno", None) == self.site.line
            and getattr(node, "col_offset", None) == self.site.col
        )

    def generic_visit(self, node: ast.AST) -> ast.AST:
        if self.site.kind == "del":
            for body in _bodies(node):
                for i, st in enumerate(body):
                    if self._at(st) and not _is_docstring(body, i):
                        body[i] = ast.copy_location(ast.Pass(), st)
                        self.done = True
        return super().generic_visit(node)

    def visit_Compare(self, node: ast.Compare) -> ast.AST:
        self.generic_visit(node)
        if self.site.kind == "cmp" and self._at(node):
            op = node.ops[self.site.index]
            node.ops[self.site.index] = _FLIPS[type(op)]()
            self.done = True
        return node

    def visit_BoolOp(self, node: ast.BoolOp) -> ast.AST:
        self.generic_visit(node)
        if self.site.kind == "bool" and self._at(node):
            node.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
            self.done = True
        return node

    def visit_UnaryOp(self, node: ast.UnaryOp) -> ast.AST:
        self.generic_visit(node)
        if self.site.kind == "not" and self._at(node) and isinstance(node.op, ast.Not):
            self.done = True
            return node.operand
        return node


def mutant_source(source: str, site: Site | None) -> str:
    """The module rewritten by ``ast.unparse``, with ``site`` applied."""
    tree = ast.parse(source)
    if site is not None:
        mutate = _Mutate(site)
        tree = mutate.visit(tree)
        if not mutate.done:
            raise LookupError(f"no mutant at {site}")
        ast.fix_missing_locations(tree)
    return ast.unparse(tree) + "\n"


def _copy_repository(into: Path) -> Path:
    copy = into / "repo"
    shutil.copytree(
        REPO,
        copy,
        ignore=shutil.ignore_patterns(
            ".git", ".nox", "__pycache__", "*.egg-info", "build", "dist", ".*_cache"
        ),
    )
    return copy


def _run(
    copy: Path, pytest_args: list[str], test_limit: float = TEST_LIMIT
) -> tuple[str, float, str]:
    cmd = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider"]
    cmd += [f"--timeout={test_limit}", "--timeout-method=thread"]
    started = time.perf_counter()
    try:
        done = subprocess.run(
            [*cmd, *pytest_args],
            cwd=copy,
            capture_output=True,
            text=True,
            timeout=RUN_LIMIT,
        )
    except subprocess.TimeoutExpired:
        return "killed", time.perf_counter() - started, "timed out"
    outcome = "survived" if done.returncode == 0 else "killed"
    last = (done.stdout.strip().splitlines() or [""])[-1]
    return outcome, time.perf_counter() - started, last


def _in_copy(arg: str) -> str:
    """A pytest argument naming a file of the repository, as the copy's.

    The tests run in the copy (``cwd``), so a path relative to the
    repository root already names the copy's file there.  A path that
    exists from where the tool was started (an absolute path, or one
    relative to a scratch directory) would make pytest put the checkout's
    root on ``sys.path`` and test the checkout instead of the mutant:
    it is rewritten relative to the root.  A path outside the repository
    is refused for the same reason.
    """
    if arg.startswith("-"):
        return arg
    path, sep, rest = arg.partition("::")
    given = Path(path)
    if not (given.is_absolute() or given.exists()):
        return arg  # relative to the root: the copy's own
    resolved = given.resolve()
    if not resolved.is_relative_to(REPO):
        sys.exit(f"{arg}: the tests must be files of the repository {REPO}")
    return resolved.relative_to(REPO).as_posix() + sep + rest


def main() -> None:
    argv = sys.argv[1:]
    split = argv.index("--") if "--" in argv else len(argv)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("module", help="the file to mutate, from the repository root")
    parser.add_argument("--out", required=True, help="JSON-lines results (resumed)")
    parser.add_argument("--ops", default=",".join(KINDS), help="kinds, comma-separated")
    parser.add_argument("--lines", help="only mutants starting on lines A-B")
    parser.add_argument(
        "--test-limit",
        type=float,
        default=TEST_LIMIT,
        help=f"seconds one test may take (default {TEST_LIMIT})",
    )
    args = parser.parse_args(argv[:split])
    pytest_args = [_in_copy(arg) for arg in argv[split + 1 :]]
    if not pytest_args:
        parser.error("give the tests to run after --")
    kinds = set(args.ops.split(","))
    if not kinds <= set(KINDS):
        parser.error(f"--ops: unknown kinds {sorted(kinds - set(KINDS))}")
    first, last = (int(n) for n in args.lines.split("-")) if args.lines else (0, 10**9)

    module = Path(args.module)
    source = (REPO / module).read_text(encoding="utf-8")
    sites = [
        s
        for s in find_sites(ast.parse(source))
        if s.kind in kinds and first <= s.line <= last
    ]
    out = Path(args.out)
    done = set()
    if out.exists():
        for line in out.read_text(encoding="utf-8").splitlines():
            done.add(json.dumps(json.loads(line)["site"]))
    todo = [s for s in sites if json.dumps(s.key()) not in done]
    print(f"{module}: {len(sites)} mutants, {len(sites) - len(todo)} already recorded")

    with tempfile.TemporaryDirectory() as tmp:
        copy = _copy_repository(Path(tmp))
        target = copy / module
        found = subprocess.run(
            [sys.executable, "-c", "import anyio_prims; print(anyio_prims.__file__)"],
            cwd=copy,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        if not Path(found).resolve().is_relative_to(copy.resolve()):
            sys.exit(f"the tests would import {found}, not the copy in {copy}")
        target.write_text(mutant_source(source, None), encoding="utf-8")
        outcome, seconds, last_line = _run(copy, pytest_args)
        if outcome != "survived":
            sys.exit(f"the unchanged rewrite fails its tests: {last_line}")
        print(f"baseline passes in {seconds:.0f} s")
        # And the tests must notice this module at all: one that cannot be
        # imported fails them, or every mutant would survive.
        target.write_text('raise ImportError("mutation.py: is this tested?")\n')
        if _run(copy, pytest_args, args.test_limit)[0] == "survived":
            sys.exit(f"the tests pass without {module}: they do not test it")
        for site in todo:
            target.write_text(mutant_source(source, site), encoding="utf-8")
            outcome, seconds, last_line = _run(copy, pytest_args, args.test_limit)
            record = {
                "site": site.key(),
                "text": site.text[:100],
                "outcome": outcome,
                "seconds": round(seconds, 1),
                "last": last_line,
            }
            with out.open("a", encoding="utf-8") as f:
                f.write(json.dumps(record) + "\n")
            print(f"{outcome:8} {site.kind:4} {module}:{site.line} {site.text[:70]}")
            sys.stdout.flush()
    # The summary covers this run's mutants, each once: the file may also
    # hold other --lines ranges, or a site recorded twice by two runs.
    wanted = {json.dumps(s.key()) for s in sites}
    latest: dict[str, Any] = {}
    for line in out.read_text(encoding="utf-8").splitlines():
        result = json.loads(line)
        key = json.dumps(result["site"])
        if key in wanted:
            latest[key] = result
    survivors = [r for r in latest.values() if r["outcome"] == "survived"]
    print(f"{len(latest)} of {len(sites)} recorded, {len(survivors)} survived:")
    for r in survivors:
        print(f"  {r['site'][0]:4} {module}:{r['site'][1]} {r['text'][:70]}")


if __name__ == "__main__":
    os.environ.setdefault("PYTHONDONTWRITEBYTECODE", "1")
    main()
