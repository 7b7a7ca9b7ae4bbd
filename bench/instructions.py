"""Count the instructions one unit of a benchmark costs, under callgrind.

    python bench/instructions.py sync.semaphore_contended.uvloop.anyio_prims
    python bench/instructions.py NAME [NAME ...] [--loops 20 40]

Each NAME is a benchmark as the report names it
(``<area>.<case>.<backend>.<impl>``).  The tool runs that benchmark's body
once (``bench_<area>.py --once LOOPS``) under ``valgrind --tool=callgrind``
at two loop counts, and prints the difference in instructions executed
divided by the difference in units of work: the interpreter's start-up, the
imports and the event loop's setup cancel out.

Wall time on a shared or virtual machine moves by several per cent between
sittings; an instruction count, with the hash seed fixed (the tool sets
``PYTHONHASHSEED=0``), moves by about 0.1% between runs of the same code
(``semaphore_contended``, ``pingpong_cap1``, the one-task cases).  Not in
the cases that poll until a task has parked, in every loop
(``lock_handoff``, ``wake_*``, ``cancel_pending_*``): how often they poll
depends on timing, so their counts vary by several times; read those
cases' pyperf times instead.  On Trio a count also moves with where
objects land in memory: one unused class and instance added to a module
moved ``pingpong_cap1`` on Trio by 2%, so read a Trio difference under 2%
as layout unless asyncio and uvloop agree.  It is the way to judge a
change of a few per cent (an A/B: run the tool in two checkouts,
``PYTHONPATH=CHECKOUT python CHECKOUT/bench/instructions.py ...``).
The one-task cases of a budgeted flavour (``ready_send_receive``,
``*_uncontended``, ``batch_acquire_n``, ``create_send_receive``) take a
checkpoint every 64 calls: at the default loop counts the difference spans
part of a budget, and the count is off by a share of one checkpoint (6.7k
against 6.0k per send+receive for ``ready_send_receive`` on Trio).  Give
them ``--loops 64 128``, a difference of whole budgets.  Each run starts
with a warm-up of at least 128 units (``--once`` in ``harness.py``), so
one-time costs, such as the marking of the library's code for Ctrl-C at
its first checkpoint on Trio, fall in both runs and cancel out.
It is not a time: a cache miss or a system call counts as the
instructions it executes, so the pyperf figures stay the measure of
speed, and the targets are read from them only.

Needs ``valgrind`` on PATH (not a Python package, so not installed by nox).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

BENCH = Path(__file__).resolve().parent
AREAS = ("limits", "sync", "channels", "executor")
BACKENDS = ("asyncio", "uvloop", "trio")

_COLLECTED = re.compile(r"Collected : (\d+)")
_ONCE = re.compile(r"^once (\S+) loops=(\d+) inner_loops=(\d+)$", re.MULTILINE)


def _split(name: str) -> tuple[str, str]:
    """The area and backend of a benchmark name, or a clear error."""
    parts = name.split(".")
    if len(parts) != 4 or parts[0] not in AREAS or parts[2] not in BACKENDS:
        raise SystemExit(
            f"{name!r} is not a benchmark name: <area>.<case>.<backend>.<impl>, "
            f"area one of {', '.join(AREAS)}, backend one of {', '.join(BACKENDS)}"
        )
    return parts[0], parts[2]


def count(name: str, loops: int) -> tuple[int, int]:
    """Instructions of one run of ``name``'s body, and its inner loops."""
    area, backend = _split(name)
    script = BENCH / f"bench_{area}.py"
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [
            "valgrind",
            "--tool=callgrind",
            f"--callgrind-out-file={os.path.join(tmp, 'callgrind.out')}",
            sys.executable,
            str(script),
            "--backend",
            backend,
            "--cases",
            f"^{re.escape(name)}$",
            "--once",
            str(loops),
        ]
        # A fixed hash seed: string hashing otherwise changes dict and set
        # layouts, and with them the count, from one process to the next.
        env = {**os.environ, "PYTHONHASHSEED": "0"}
        done = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env)
    collected = _COLLECTED.search(done.stderr)
    once = _ONCE.search(done.stdout)
    if done.returncode or collected is None or once is None:
        raise SystemExit(
            f"{name}: the run failed (exit {done.returncode})\n"
            f"{done.stdout[-2000:]}{done.stderr[-2000:]}"
        )
    return int(collected.group(1)), int(once.group(3))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("names", nargs="+", metavar="NAME", help="benchmark names")
    parser.add_argument(
        "--loops",
        nargs=2,
        type=int,
        default=(20, 40),
        metavar=("N1", "N2"),
        help="the two loop counts (default 20 40)",
    )
    args = parser.parse_args()
    n1, n2 = args.loops
    if not 1 <= n1 < n2:
        parser.error("--loops needs 1 <= N1 < N2")
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not on PATH")
    for name in args.names:
        low, inner = count(name, n1)
        high, _ = count(name, n2)
        units = (n2 - n1) * inner
        print(f"{name}: {(high - low) / units:,.0f} instructions per unit", flush=True)


if __name__ == "__main__":
    main()
