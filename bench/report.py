"""Turn pyperf results into tables, a check of the targets, and charts.

    python bench/report.py                       # bench/results/latest.json
    python bench/report.py RESULTS.json [...]    # several files are merged
    python bench/report.py --compare OLD.json NEW.json

Writes ``report.md`` and ``ratios-<backend>.png`` next to the results (or
into ``--out``) and prints the markdown.

Per backend, one row per case and implementation:

* median time per unit of work, ± the median absolute deviation of the values;
* ``x native``: that median divided by the median of the backend's own
  primitive in the same case (asyncio's on asyncio and uvloop, Trio's on
  Trio); below 1 is faster;
* ``x limit``: divided by the limit the case is read against, measured in the
  same run (``limit_minimal_channel`` for one-task and per-message cases,
  ``limit_park_unpark`` for cases that switch tasks);
* the checkpoint semantics of the row, as the benchmark recorded them.

A blank means the implementation cannot express the case (or the reference
is missing from the results).  The targets the issues set are checked in a
table of their own; the ratios come from one run, as claims must.
"""

from __future__ import annotations

import argparse
import datetime
import math
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyperf

RESULTS = Path(__file__).resolve().parent / "results"
NATIVE_IMPL = {"asyncio": "asyncio", "uvloop": "asyncio", "trio": "trio"}
BACKEND_TITLE = {"asyncio": "asyncio", "uvloop": "asyncio + uvloop", "trio": "Trio"}
AREA_ORDER = ("limits", "sync", "channels", "executor")
BUDGETED_FLAVOURS = ("anyio_prims_mpsc", "anyio_prims_spmc", "anyio_prims_mpmc")
CHANNEL_PEERS = ("asyncio", "trio", "anyio", "aiologic")


@dataclass
class Row:
    name: str
    area: str
    case: str
    backend: str
    impl: str
    median: float
    mad: float
    values: int
    checkpoints: str = ""
    unit: str = ""
    limit: str = ""
    note: str = ""
    meta: dict[str, Any] = field(default_factory=dict)
    dates: tuple[Any, Any] | None = None


def load(paths: Iterable[Path]) -> list[Row]:
    rows: list[Row] = []
    seen: set[str] = set()
    for path in paths:
        suite = pyperf.BenchmarkSuite.load(str(path))
        for bench in suite.get_benchmarks():
            name = bench.get_name()
            parts = name.split(".")
            if len(parts) != 4 or name in seen:
                continue
            seen.add(name)
            meta = bench.get_metadata()
            rows.append(
                Row(
                    name=name,
                    area=parts[0],
                    case=parts[1],
                    backend=parts[2],
                    impl=parts[3],
                    median=bench.median(),
                    mad=bench.median_abs_dev() if bench.get_nvalue() > 1 else 0.0,
                    values=bench.get_nvalue(),
                    checkpoints=str(meta.get("bench_checkpoints", "")),
                    unit=str(meta.get("bench_unit", "")),
                    limit=str(meta.get("bench_limit", "")),
                    note=str(meta.get("bench_note", "")),
                    meta=meta,
                    dates=bench.get_dates(),
                )
            )
    return rows


def fmt_time(seconds: float | None) -> str:
    if seconds is None or math.isnan(seconds):
        return ""
    for scale, unit in ((1e-6, "ns"), (1e-3, "µs"), (1.0, "ms")):
        if seconds < scale:
            return f"{seconds / scale * 1000:.3g} {unit}"
    return f"{seconds:.3g} s"


def fmt_ratio(ratio: float | None) -> str:
    if ratio is None:
        return ""
    return f"{ratio:.2f}" if ratio < 10 else f"{ratio:.1f}"


class Index:
    """Rows by (area, case, backend, impl), in the order they were run."""

    def __init__(self, rows: list[Row]) -> None:
        self.rows = rows
        self.by_key = {(r.area, r.case, r.backend, r.impl): r for r in rows}
        self.backends = [b for b in NATIVE_IMPL if any(r.backend == b for r in rows)]

    def get(self, area: str, case: str, backend: str, impl: str) -> Row | None:
        return self.by_key.get((area, case, backend, impl))

    def limit(self, name: str, backend: str) -> Row | None:
        return self.get("limits", name, backend, "bare")

    def native(self, row: Row) -> Row | None:
        return self.get(row.area, row.case, row.backend, NATIVE_IMPL[row.backend])

    def ratio_native(self, row: Row) -> float | None:
        native = self.native(row)
        return row.median / native.median if native else None

    def ratio_limit(self, row: Row) -> float | None:
        limit = self.limit(row.limit, row.backend) if row.limit else None
        return row.median / limit.median if limit else None


def environment(rows: list[Row]) -> list[str]:
    if not rows:
        return []
    meta = rows[0].meta
    keys = [
        ("python", "python_implementation_full"),
        ("cpu", "cpu_model_name"),
        ("cpus", "cpu_count"),
        ("platform", "platform"),
        ("mode", "bench_mode"),
        ("waiter", "anyio_prims_waiter"),
    ]
    lines = [f"- {label}: {meta[key]}" for label, key in keys if key in meta]
    packages = [
        f"{key[4:].replace('_', '-')} {value}"
        for key, value in sorted(meta.items())
        if key.startswith("pkg_")
    ]
    if packages:
        lines.append("- packages: " + ", ".join(packages))
    dates = [d for r in rows if r.dates for d in r.dates]
    if dates:
        first, last = min(dates), max(dates)
        lines.append(f"- run: {first:%Y-%m-%d %H:%M} to {last:%Y-%m-%d %H:%M}")
    return lines


def backend_table(index: Index, backend: str) -> list[str]:
    lines = [
        f"### {BACKEND_TITLE[backend]}",
        "",
        "| case | implementation | median | ± | x native | x limit | checkpoints |",
        "|---|---|---:|---:|---:|---:|---|",
    ]
    rows = [r for r in index.rows if r.backend == backend]
    rows.sort(key=lambda r: AREA_ORDER.index(r.area) if r.area in AREA_ORDER else 99)
    last_case = None
    for row in rows:
        case = f"{row.area}.{row.case}"
        shown = f"`{case}`" if case != last_case else ""
        last_case = case
        impl = row.impl + (f" ({row.note})" if row.note else "")
        if row.impl == NATIVE_IMPL[backend]:
            impl = f"**{impl}**"
        native = fmt_ratio(index.ratio_native(row))
        limit = fmt_ratio(index.ratio_limit(row))
        lines.append(
            f"| {shown} | {impl} | {fmt_time(row.median)} | {fmt_time(row.mad)} | "
            f"{native} | {limit} | {row.checkpoints} |"
        )
    lines.append("")
    return lines


# --------------------------------------------------------------------------
# summary: one line per headline case


SUMMARY = (
    # (area, case, budgeted anyio-prims row, row with anyio's checkpoint rule)
    ("sync", "lock_uncontended", "anyio_prims_fast", "anyio_prims"),
    ("sync", "semaphore_uncontended", "anyio_prims_batch", "anyio_prims"),
    ("sync", "rwlock_read_uncontended", "anyio_prims", "anyio_prims_strict"),
    ("sync", "lock_handoff", "anyio_prims_fast", "anyio_prims"),
    ("sync", "semaphore_contended", "anyio_prims_batch", "anyio_prims"),
    ("channels", "ready_send_receive", "anyio_prims_mpsc", "anyio_prims"),
    ("channels", "wake_receiver_cap64", "anyio_prims_mpsc", "anyio_prims"),
    ("channels", "cancel_pending_receive", "anyio_prims_mpsc", "anyio_prims"),
    ("channels", "pingpong_cap1", "anyio_prims_mpsc", "anyio_prims"),
    ("channels", "spmc_batch_4c_cap64", "anyio_prims_spmc", "anyio_prims"),
    ("channels", "mpsc_4p1c_cap64", "anyio_prims_mpsc", "anyio_prims"),
    ("channels", "mpmc_4p4c_cap64", "anyio_prims_mpmc", "anyio_prims"),
    ("executor", "spawn_one", "anyio_prims", ""),
    ("executor", "spawn_many", "anyio_prims", ""),
    ("executor", "web_server", "anyio_prims", ""),
    ("executor", "web_server_open", "anyio_prims", ""),
)


def summary_table(index: Index, backend: str) -> list[str]:
    """One line per headline case, each ratio like for like.

    The budgeted row is divided by AnyIO's ``fast_acquire`` row where AnyIO
    has one (its own mode without a schedule point on every call), else by
    AnyIO's plain row; the row with AnyIO's rule by AnyIO's plain row.
    """
    native_name = NATIVE_IMPL[backend]
    lines = [
        f"#### {BACKEND_TITLE[backend]}",
        "",
        f"| case | {native_name} | anyio | anyio fast_acquire | aiologic |"
        " anyio-prims budgeted | anyio-prims, anyio's rule | budgeted / native |"
        " budgeted / anyio (fast_acquire where it has one) |"
        " anyio's rule / anyio |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for area, case, fast, strict in SUMMARY:
        native = index.get(area, case, backend, native_name)
        anyio_row = index.get(area, case, backend, "anyio")
        anyio_fast = index.get(area, case, backend, "anyio_fast")
        aiologic = index.get(area, case, backend, "aiologic")
        ours = index.get(area, case, backend, fast)
        ours_strict = index.get(area, case, backend, strict) if strict else None
        if ours is None and native is None:
            continue

        def t(row: Row | None) -> str:
            return fmt_time(row.median) if row else ""

        def r(row: Row | None, ref: Row | None) -> str:
            return fmt_ratio(row.median / ref.median) if row and ref else ""

        name = f"`{case}`" + (f" ({fast})" if ours else "")
        lines.append(
            f"| {name} | {t(native)} | {t(anyio_row)} | {t(anyio_fast)} | "
            f"{t(aiologic)} | {t(ours)} | {t(ours_strict)} | {r(ours, native)} | "
            f"{r(ours, anyio_fast or anyio_row)} | {r(ours_strict, anyio_row)} |"
        )
    lines.append("")
    return lines


# --------------------------------------------------------------------------
# targets from the issues


@dataclass
class Target:
    """``worst(numerators) / best(denominators) <= threshold`` on each backend.

    Numerators and denominators are ``(area, case, impl)``: the worst
    numerator present is divided by the best denominator present.
    """

    text: str
    numerators: list[tuple[str, str, str]]
    denominators: list[tuple[str, str, str]]
    threshold: float
    backends: tuple[str, ...] = ("asyncio", "uvloop", "trio")


def _targets(index: Index) -> list[Target]:
    sync_fast = [
        ("sync", "semaphore_uncontended", "anyio_prims_batch"),
        ("sync", "rwlock_read_uncontended", "anyio_prims"),
        ("sync", "rwlock_write_uncontended", "anyio_prims"),
        ("sync", "lock_uncontended", "anyio_prims_fast"),
        ("sync", "semaphore_uncontended", "anyio_prims_fast"),
    ]
    targets = [
        Target(
            f"sync: `{case}` `{impl}` no slower than asyncio.Semaphore uncontended",
            [("sync", case, impl)],
            [("sync", "semaphore_uncontended", "asyncio")],
            1.0,
            ("asyncio", "uvloop"),
        )
        for _, case, impl in sync_fast
    ] + [
        Target(
            f"sync: `{case}` `{impl}` at least 5x faster than trio.Semaphore",
            [("sync", case, impl)],
            [("sync", "semaphore_uncontended", "trio")],
            0.2,
            ("trio",),
        )
        for _, case, impl in sync_fast
    ]
    for impl in ("anyio_prims_fast", "anyio_prims_batch"):
        targets.append(
            Target(
                f"sync: `lock_handoff` `{impl}` within 1.2x of park/unpark",
                [("sync", "lock_handoff", impl)],
                [("limits", "limit_park_unpark", "bare")],
                1.2,
            )
        )
    for case in (
        "lock_uncontended",
        "semaphore_uncontended",
        "lock_handoff",
        "semaphore_contended",
    ):
        targets.append(
            Target(
                f"sync: `{case}` drop-in (anyio's checkpoints) faster than anyio's",
                [("sync", case, "anyio_prims")],
                [("sync", case, "anyio")],
                1.0,
            )
        )
    targets += [
        Target(
            "channels: `ready_send_receive` within 1.5x of the minimal channel",
            [("channels", "ready_send_receive", f) for f in BUDGETED_FLAVOURS],
            [("limits", "limit_minimal_channel", "bare")],
            1.5,
        ),
        Target(
            "channels: `ready_send_receive` faster than asyncio.Queue",
            [("channels", "ready_send_receive", f) for f in BUDGETED_FLAVOURS],
            [("channels", "ready_send_receive", "asyncio")],
            1.0,
            ("asyncio", "uvloop"),
        ),
        Target(
            "channels: `pingpong_cap1` within 1.15x of park/unpark",
            [("channels", "pingpong_cap1", f) for f in BUDGETED_FLAVOURS],
            [("limits", "limit_park_unpark", "bare")],
            1.15,
        ),
    ]
    one_task = {"ready_send_receive", "create_send_receive"}
    cases = sorted(
        {r.case for r in index.rows if r.area == "channels"},
        key=lambda c: [r.case for r in index.rows].index(c),
    )
    for case in cases:
        bound = 0.2 if case in one_task else 0.25
        targets.append(
            Target(
                f"channels: `{case}` budgeted flavours {round(1 / bound)}x faster"
                " than anyio streams (worst flavour)",
                [("channels", case, f) for f in BUDGETED_FLAVOURS],
                [("channels", case, "anyio")],
                bound,
            )
        )
    for case in cases:
        if case.startswith("spmc_batch") or case == "mpsc_4p1c_cap64":
            flavour = (
                "anyio_prims_spmc" if case.startswith("spmc") else "anyio_prims_mpsc"
            )
            targets.append(
                Target(
                    f"channels: `{case}` `{flavour}` faster than every peer",
                    [("channels", case, flavour)],
                    [("channels", case, p) for p in CHANNEL_PEERS],
                    1.0,
                )
            )
    for case in cases:
        targets.append(
            Target(
                f"channels: `{case}` drop-in stream faster than anyio's",
                [("channels", case, "anyio_prims")],
                [("channels", case, "anyio")],
                1.0,
            )
        )
    targets += [
        Target(
            "executor: `spawn_many` 10x faster than anyio TaskGroup",
            [("executor", "spawn_many", "anyio_prims")],
            [("executor", "spawn_many", "anyio")],
            0.1,
        ),
        Target(
            "executor: `spawn_many` 3x faster than the native spawn",
            [("executor", "spawn_many", "anyio_prims")],
            [("executor", "spawn_many", "asyncio"), ("executor", "spawn_many", "trio")],
            1 / 3,
        ),
        Target(
            "executor: `spawn_one` within 1.2x of an mpsc capacity-1 ping-pong",
            [("executor", "spawn_one", "anyio_prims")],
            [("channels", "pingpong_cap1", "anyio_prims_mpsc")],
            1.2,
        ),
    ]
    return targets


#: Two rows measured further apart than this are flagged where a target
#: divides one by the other: the machine's speed may have drifted between them.
APART = datetime.timedelta(minutes=20)


def apart(a: Row, b: Row) -> datetime.timedelta | None:
    """The time between the end of one row's measurement and the other's start."""
    if not a.dates or not b.dates or None in (*a.dates, *b.dates):
        return None
    gap: datetime.timedelta = max(a.dates[0], b.dates[0]) - min(a.dates[1], b.dates[1])
    return gap


def worst_over_best(
    index: Index,
    backend: str,
    numerators: list[tuple[str, str, str]],
    denominators: list[tuple[str, str, str]],
) -> tuple[float, Row, Row] | None:
    """The worst numerator present over the best denominator present, and
    the two rows; ``None`` if either side has no row on ``backend``."""
    nums = [r for a, c, i in numerators if (r := index.get(a, c, backend, i))]
    dens = [r for a, c, i in denominators if (r := index.get(a, c, backend, i))]
    if not nums or not dens:
        return None
    worst = max(nums, key=lambda r: r.median)
    best = min(dens, key=lambda r: r.median)
    return worst.median / best.median, worst, best


def target_table(index: Index) -> list[str]:
    backends = index.backends
    widest: datetime.timedelta | None = None
    lines = [
        "| target | " + " | ".join(BACKEND_TITLE[b] for b in backends) + " |",
        "|---|" + "---:|" * len(backends),
    ]
    for target in _targets(index):
        cells = []
        for backend in backends:
            if backend not in target.backends:
                cells.append("")
                continue
            found = worst_over_best(
                index, backend, target.numerators, target.denominators
            )
            if found is None:
                cells.append("n/a")
                continue
            ratio, worst, best = found
            mark = "✓" if ratio <= target.threshold else "✗"
            gap = apart(worst, best)
            if gap is not None and gap > APART:
                mark += " †"
                widest = gap if widest is None else max(widest, gap)
            cells.append(f"{fmt_ratio(ratio)} {mark}")
        if any(c not in ("", "n/a") for c in cells):
            lines.append(
                f"| {target.text} (≤ {target.threshold:.3g}) | "
                + " | ".join(cells)
                + " |"
            )
    lines.append("")
    if widest is not None:
        minutes = round(widest.total_seconds() / 60)
        lines += [
            f"† The two sides of a ratio so marked were measured more than"
            f" {APART.total_seconds() / 60:.0f} minutes apart (up to {minutes}"
            " min), so it includes any drift of the machine between them."
            " `bench/run.py` measures the cases such ratios divide in one"
            " sitting when it runs every case.",
            "",
        ]
    return lines


def reference_table(index: Index) -> list[str]:
    """The targets that a reference row bounds, read against that row.

    Two kinds of reference, each measured in the same run as the targets:
    peers with no checkpoint put under anyio-prims' budget (the minimal
    channel, asyncio.Queue), and the minimal parking channel and lock, whose
    awaitable methods do nothing but park and wake.
    """
    minimal = ("limits", "limit_minimal_channel", "bare")
    budgeted_minimal = ("limits", "limit_budgeted_channel", "bare")
    switch = ("limits", "limit_park_unpark", "bare")
    flavours = [("channels", "ready_send_receive", f) for f in BUDGETED_FLAVOURS]
    # (text, numerators, denominators)
    pairs = [
        (
            "`ready_send_receive`: the minimal channel under the policy,"
            " x the minimal channel",
            [budgeted_minimal],
            [minimal],
        ),
        (
            "`ready_send_receive`: budgeted flavours (worst), x the minimal"
            " channel under the policy",
            flavours,
            [budgeted_minimal],
        ),
        (
            "`pingpong_cap1`: the minimal parking channel x park/unpark",
            [("limits", "limit_minimal_pingpong", "bare")],
            [switch],
        ),
        (
            "`pingpong_cap1`: budgeted flavours (worst), x the minimal parking channel",
            [("channels", "pingpong_cap1", f) for f in BUDGETED_FLAVOURS],
            [("limits", "limit_minimal_pingpong", "bare")],
        ),
        (
            "`lock_handoff`: the minimal lock x park/unpark",
            [("limits", "limit_minimal_lock_handoff", "bare")],
            [switch],
        ),
        (
            "`lock_handoff`: `anyio_prims_fast` and `anyio_prims_batch` (worst),"
            " x the minimal lock",
            [
                ("sync", "lock_handoff", "anyio_prims_fast"),
                ("sync", "lock_handoff", "anyio_prims_batch"),
            ],
            [("limits", "limit_minimal_lock_handoff", "bare")],
        ),
    ]
    for case in sorted({r.case for r in index.rows if r.impl == "asyncio_budgeted"}):
        flavour = f"anyio_prims_{case[:4]}"  # spmc_batch_..., mpsc_..., mpmc_...
        queue = ("channels", case, "asyncio")
        budgeted_queue = ("channels", case, "asyncio_budgeted")
        ours = ("channels", case, flavour)
        pairs += [
            (
                f"`{case}`: asyncio.Queue under the policy, x asyncio.Queue",
                [budgeted_queue],
                [queue],
            ),
            (f"`{case}`: `{flavour}` x asyncio.Queue", [ours], [queue]),
            (
                f"`{case}`: `{flavour}` x asyncio.Queue under the policy",
                [ours],
                [budgeted_queue],
            ),
        ]
    backends = index.backends
    lines = [
        "| ratio | " + " | ".join(BACKEND_TITLE[b] for b in backends) + " |",
        "|---|" + "---:|" * len(backends),
    ]
    for text, numerators, denominators in pairs:
        cells = []
        for backend in backends:
            found = worst_over_best(index, backend, numerators, denominators)
            cells.append("" if found is None else fmt_ratio(found[0]))
        if any(cells):
            lines.append(f"| {text} | " + " | ".join(cells) + " |")
    if len(lines) == 2:
        return []
    return [
        "### What the reference rows bound",
        "",
        "Not targets: each first ratio of a group is a floor under the target"
        " of that case, measured in the same run.  'Under the policy' is a"
        " peer with no checkpoint of its own put under anyio-prims' budget"
        " (a checkpoint at least every 64 calls, the library's own counter"
        " and checkpoint): what the checkpoint policy costs by itself.  The"
        " minimal parking channel and lock only park and wake: what any"
        " awaitable `send`/`receive` or `acquire` costs before it does"
        " anything of its own.",
        "",
        *lines,
        "",
    ]


# --------------------------------------------------------------------------
# charts


LEGEND = (
    ("#7f7f7f", "the backend's own primitive"),
    ("#fd8d3c", "anyio"),
    ("#fdd0a2", "anyio fast_acquire"),
    ("#8c6bb1", "aiologic"),
    ("#74c476", "aiometer"),
    ("#2171b5", "anyio-prims, budgeted"),
    ("#9ecae1", "anyio-prims, a checkpoint on every call"),
)


def _colour(row: Row) -> str:
    if row.impl in ("asyncio", "trio"):
        return LEGEND[0][0]
    if row.impl.startswith("anyio_prims"):
        every_call = (
            "every call" in row.checkpoints and "budgeted" not in row.checkpoints
        )
        return LEGEND[6][0] if every_call else LEGEND[5][0]
    return {
        "anyio": LEGEND[1][0],
        "anyio_fast": LEGEND[2][0],
        "aiologic": LEGEND[3][0],
        "aiometer": LEGEND[4][0],
    }.get(row.impl, "#bdbdbd")


def chart(index: Index, backend: str, out: Path) -> Path | None:
    """Bars of time / native, from 1 outwards, on a log axis, case by case."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    # Limits and reference rows (a peer under anyio-prims' budget) are not
    # implementations a user picks: the tables show them, the chart does not.
    rows = [
        r
        for r in index.rows
        if r.backend == backend
        and r.area != "limits"
        and not r.checkpoints.startswith("reference:")
    ]
    bars = [(r, ratio) for r in rows if (ratio := index.ratio_native(r)) is not None]
    if not bars:
        return None
    fig, ax = plt.subplots(figsize=(10, max(4.0, 0.15 * len(bars) + 2.0)))
    ys = list(range(len(bars)))[::-1]
    ratios = [ratio for _, ratio in bars]
    ax.barh(
        ys,
        [ratio - 1 for ratio in ratios],
        left=1,
        color=[_colour(r) for r, _ in bars],
        height=0.8,
    )
    ax.set_yticks(ys)
    ax.set_yticklabels([f"{r.area}.{r.case} · {r.impl}" for r, _ in bars], fontsize=6)
    for i in range(1, len(bars)):
        if bars[i][0].case != bars[i - 1][0].case:
            ax.axhline(ys[i] + 0.5, color="#dddddd", linewidth=0.5)
    ax.set_xscale("log")
    low, high = min(ratios), max(ratios)
    ax.set_xlim(min(0.5, low / 1.3), max(2.0, high * 1.3))
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.set_ylim(-1, len(bars))
    ax.set_xlabel(
        f"time / {NATIVE_IMPL[backend]}'s own primitive in the same case"
        " (log scale; left of 1 is faster)"
    )
    ax.set_title(f"anyio-prims benchmarks on {BACKEND_TITLE[backend]}")
    ax.legend(
        handles=[Patch(color=c, label=text) for c, text in LEGEND],
        loc="lower right",
        fontsize=7,
    )
    fig.tight_layout()
    path = out / f"ratios-{backend}.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


# --------------------------------------------------------------------------
# before/after


def compare(old_path: Path, new_path: Path) -> list[str]:
    old = {r.name: r for r in load([old_path])}
    new = {r.name: r for r in load([new_path])}
    common = [name for name in new if name in old]
    lines = [
        f"## Comparison: `{old_path.name}` -> `{new_path.name}`",
        "",
        "Ratios are new / old median: below 1 is faster.  'changed' means the "
        "medians differ by more than 5% and by more than both spreads together.",
        "",
        "| benchmark | old | new | new / old | |",
        "|---|---:|---:|---:|---|",
    ]
    logs: dict[tuple[str, str], list[float]] = {}
    for name in common:
        o, n = old[name], new[name]
        ratio = n.median / o.median
        changed = abs(n.median - o.median) > max(0.05 * o.median, o.mad + n.mad)
        mark = ("faster" if ratio < 1 else "slower") if changed else ""
        lines.append(
            f"| `{name}` | {fmt_time(o.median)} | {fmt_time(n.median)} | "
            f"{fmt_ratio(ratio)} | {mark} |"
        )
        logs.setdefault((n.area, n.impl), []).append(math.log(ratio))
    lines += [
        "",
        "Geometric mean of new / old per area and implementation:",
        "",
        "| area | implementation | benchmarks | new / old |",
        "|---|---|---:|---:|",
    ]
    for (area, impl), values in sorted(logs.items()):
        lines.append(
            f"| {area} | {impl} | {len(values)} | "
            f"{fmt_ratio(math.exp(sum(values) / len(values)))} |"
        )
    only_old = sorted(set(old) - set(new))
    only_new = sorted(set(new) - set(old))
    if only_old:
        lines += ["", f"Only in the old results: {len(only_old)} benchmarks."]
    if only_new:
        lines += ["", f"Only in the new results: {len(only_new)} benchmarks."]
    lines.append("")
    return lines


def report(paths: list[Path], out: Path) -> list[str]:
    rows = load(paths)
    if not rows:
        raise SystemExit(f"no benchmarks in {', '.join(map(str, paths))}")
    index = Index(rows)
    lines = ["## Results", "", *environment(rows), ""]
    lines += [
        "Median time per unit of work ± median absolute deviation; `x native` ="
        " time / the backend's own primitive in the same case (below 1 is"
        " faster); `x limit` = time / the limit measured in the same run"
        " (minimal channel for one-task and per-message cases, park/unpark for"
        " cases that switch tasks).  A blank: the implementation cannot express"
        " the case, or the reference is missing.",
        "",
        "### Summary",
        "",
        "Median per unit of work; the full tables follow.  The budgeted row is"
        " named beside each case; 'anyio's rule' is the drop-in class (or the"
        " strict mode) with a checkpoint on every call.  Each ratio to AnyIO is"
        " like for like: the budgeted row to AnyIO's `fast_acquire` row where"
        " AnyIO has one (a cancellation check on every call, a schedule point"
        " only when it blocks), else to AnyIO's plain row; the row with AnyIO's"
        " rule to AnyIO's plain row.",
        "",
    ]
    for backend in index.backends:
        lines += summary_table(index, backend)
    lines += ["### Targets", "", *target_table(index)]
    lines += reference_table(index)
    charts = []
    for backend in index.backends:
        lines += backend_table(index, backend)
        path = chart(index, backend, out)
        if path is not None:
            charts.append(path)
    if charts:
        lines += ["Charts: " + ", ".join(f"`{p.name}`" for p in charts), ""]
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "results",
        nargs="*",
        type=Path,
        help="pyperf JSON files (default: bench/results/latest.json)",
    )
    parser.add_argument(
        "--compare",
        nargs=2,
        type=Path,
        metavar=("OLD", "NEW"),
        help="compare two result files",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="where report.md and the charts go (default: beside the results)",
    )
    args = parser.parse_args()
    if args.compare:
        lines = compare(*args.compare)
        out = args.out or args.compare[1].parent
        name = "compare.md"
    else:
        paths = args.results or [RESULTS / "latest.json"]
        missing = [p for p in paths if not p.exists()]
        if missing:
            print(
                f"no such results file: {', '.join(map(str, missing))}; "
                "run bench/run.py first",
                file=sys.stderr,
            )
            return 2
        out = args.out or paths[0].parent
        out.mkdir(parents=True, exist_ok=True)
        lines = report(paths, out)
        name = "report.md"
    text = "\n".join(lines)
    print(text)
    out.mkdir(parents=True, exist_ok=True)
    (out / name).write_text(text + "\n", encoding="utf-8")
    print(f"\nwritten: {out / name}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
