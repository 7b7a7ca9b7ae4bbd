"""Run the whole comparison: every bench script on every backend.

    python bench/run.py            # quick mode: under 10 minutes on 2 cores
    python bench/run.py --full     # pyperf worker processes, warm-ups, values
    python bench/run.py --areas sync --backends trio --cases handoff
    python bench/run.py --full -p 20    # unknown options go to pyperf

Each script runs in its own process per backend and writes pyperf JSON; the
parts are merged into ``bench/results/<date>-<mode>.json`` and copied to
``bench/results/latest.json``, which ``bench/report.py`` reads.

A run without ``--cases`` has two passes.  The first is one sitting of every
case that a target divides by another case (the limits, the sync
cases, the channels' ``ready_send_receive`` and ``pingpong_cap1``, the
executor's ``spawn_one``), backend by backend: limits, sync, channels and
executor on asyncio, then on uvloop, then on Trio.  The second pass runs the
other channel and executor cases, whose targets compare rows of one case.
A machine's speed drifts over the hours a full run takes; this way every
ratio divides figures measured minutes apart, not hours.  With ``--cases``
the chosen cases run in one pass, backend by backend as in the first pass.

Quick mode runs each benchmark in the script's own process
(``--in-process``): a calibration run of three values, which also warms the
process up, then three values of at least 20 ms each (``--processes=1
--values=3 --warmups=0 --min-time=0.02``).  Its figures are rough (one
process, so no spread between processes, and the interpreter's state
carries over from one benchmark to the next); use ``--full`` for numbers to
publish.  Full mode
sets ``--processes 6 --values 5 --warmups 2 --min-time 0.1``: every
benchmark runs in 6 fresh worker processes after a calibration process
(about 2 hours on 2 cores; ``-p 3`` halves it).
"""

from __future__ import annotations

import argparse
import datetime
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
RESULTS = BENCH / "results"
AREAS = ("limits", "sync", "channels", "executor")
BACKENDS = ("asyncio", "uvloop", "trio")

#: Per area, the cases of the first pass (a regex on the benchmark name after
#: ``^``; None: the whole area): the cases of every target that divides one
#: case by another.  ``bench/report.py`` flags a target whose two sides were measured
#: far apart, which catches a target added without its cases here.
SITTING: dict[str, str | None] = {
    "limits": None,
    "sync": None,
    "channels": r"channels\.(?:ready_send_receive|pingpong_cap1)\.",
    "executor": r"executor\.spawn_one\.",
}

QUICK = [
    "--in-process",
    "--processes=1",
    "--values=3",
    "--warmups=0",
    "--min-time=0.02",
    "--quiet",
]
FULL = [
    "--processes=6",
    "--values=5",
    "--warmups=2",
    "--min-time=0.1",
    "--inherit-environ=PYTHONPATH,ANYIO_PRIMS_WAITER,ANYIO_PRIMS_BENCH_MODE",
]


def _available(backend: str) -> str | None:
    """Why ``backend`` cannot run here, or None."""
    module = {"uvloop": "uvloop", "trio": "trio"}.get(backend)
    if module is None:
        return None
    try:
        __import__(module)
    except ImportError as exc:
        return f"{module} is not importable ({exc})"
    return None


def _has_in_process() -> bool:
    import pyperf

    version = tuple(int(p) for p in pyperf.__version__.split(".")[:2] if p.isdigit())
    return version >= (2, 11)


def plan(
    areas: list[str], backends: list[str], cases: str
) -> list[tuple[str, str, str]]:
    """The script runs, in order: ``(area, backend, cases regex or "")``."""
    if cases:
        # Backend by backend, as the first pass: a ratio of two chosen cases
        # (a case and its limit) divides figures of one sitting.
        return [(area, backend, cases) for backend in backends for area in areas]
    first = [
        (area, backend, f"^(?:{SITTING[area]})" if SITTING[area] else "")
        for backend in backends
        for area in areas
    ]
    second = [
        (area, backend, f"^(?!{SITTING[area]})")
        for area in areas
        for backend in backends
        if SITTING[area]
    ]
    return first + second


def _merge(parts: list[Path], out: Path) -> int:
    import pyperf

    suite = None
    for part in parts:
        loaded = pyperf.BenchmarkSuite.load(str(part))
        if suite is None:
            suite = loaded
        else:
            for bench in loaded.get_benchmarks():
                suite.add_benchmark(bench)
    if suite is None:
        return 0
    suite.dump(str(out), replace=True)
    return len(suite)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        epilog="Options not listed here are passed to every pyperf script.",
    )
    parser.add_argument("--full", action="store_true", help="rigorous pyperf runs")
    parser.add_argument(
        "--areas",
        default=",".join(AREAS),
        help="comma-separated subset of " + ",".join(AREAS),
    )
    parser.add_argument(
        "--backends",
        default=",".join(BACKENDS),
        help="comma-separated subset of " + ",".join(BACKENDS),
    )
    parser.add_argument("--cases", default="", help="regex on benchmark names")
    parser.add_argument("--out", default=str(RESULTS), help="results directory")
    args, pyperf_args = parser.parse_known_args()

    areas = list(dict.fromkeys(a for a in args.areas.split(",") if a))
    backends = list(dict.fromkeys(b for b in args.backends.split(",") if b))
    for name, chosen, allowed in (
        ("area", areas, AREAS),
        ("backend", backends, BACKENDS),
    ):
        unknown = set(chosen) - set(allowed)
        if unknown:
            parser.error(f"unknown {name}: {', '.join(sorted(unknown))}")
    if "limits" not in areas:
        print(
            "note: the limits are not measured in this run; the report's "
            "'x limit' column will be empty"
        )

    mode = "full" if args.full else "quick"
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    parts_dir = Path(tempfile.mkdtemp(prefix=f"bench-{stamp}-"))

    env = dict(os.environ)
    # Measure this checkout, installed or not.
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p
    )
    env["ANYIO_PRIMS_BENCH_MODE"] = mode
    options = (FULL if args.full else QUICK) + pyperf_args
    if not args.full and not _has_in_process():
        # pyperf < 2.11: one worker process per benchmark instead (slower).
        options = [o for o in options if o != "--in-process"]
        print(
            "note: this pyperf has no --in-process (2.11+); quick mode uses one "
            "worker process per benchmark and takes longer"
        )
    areas.sort(key=AREAS.index)
    available = []
    for backend in sorted(backends, key=BACKENDS.index):
        why = _available(backend)
        if why:
            print(f"skipping backend {backend}: {why}")
        else:
            available.append(backend)
    runs = plan(areas, available, args.cases)

    print(f"{mode} mode: {len(runs)} script runs; pyperf options: {' '.join(options)}")
    print(f"python {sys.version.split()[0]} ({sys.executable})", flush=True)
    started = time.monotonic()
    parts: list[Path] = []
    failed: list[str] = []
    for i, (area, backend, cases) in enumerate(runs, 1):
        part = parts_dir / f"{i:02d}.{area}.{backend}.json"
        elapsed = time.monotonic() - started
        which = f", cases {cases}" if cases else ""
        print(
            f"\n[{i}/{len(runs)}] {area} on {backend}{which}"
            f"  (elapsed {elapsed:.0f} s)",
            flush=True,
        )
        cmd = [
            sys.executable,
            str(BENCH / f"bench_{area}.py"),
            "--backend",
            backend,
            "--output",
            str(part),
            *options,
        ]
        if cases:
            cmd += ["--cases", cases]
        result = subprocess.run(cmd, env=env, cwd=str(ROOT))
        if part.exists():
            parts.append(part)
        if result.returncode:
            failed.append(f"{area} on {backend} (exit {result.returncode})")
            print(
                f"FAILED: {area} on {backend}: exit status {result.returncode}",
                flush=True,
            )

    out = out_dir / f"{stamp}-{mode}.json"
    count = _merge(parts, out)
    shutil.rmtree(parts_dir, ignore_errors=True)
    total = time.monotonic() - started
    if count:
        shutil.copyfile(out, out_dir / "latest.json")
        print(f"\n{count} benchmarks in {total:.0f} s -> {out} (and latest.json)")
    else:
        print(f"\nno results after {total:.0f} s")
    if failed:
        print("\nFAILED (results above are incomplete):")
        for what in failed:
            print(f"  {what}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
