"""Benchmark rows and ``bench-results.json`` (repo root): a JSON list of
``{"name", "value", "unit", "limit", "ratio"}`` rows, merged by name across runs and modules.

``limit`` is the physical ceiling measured in the same run (same data, same machine), and
``ratio`` is ``value / limit``; both are null for rows without a ceiling. ``target`` (optional)
states the target (docs/dev/FAST-LANE.md "Performance targets") the ratio or value is judged
against.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

RESULTS_PATH = Path(__file__).resolve().parent.parent / "bench-results.json"


def best_time(fn: Callable[[], Any], *, repeat: int = 5, min_time: float = 0.0) -> float:
    """Fastest of ``repeat`` timed calls of ``fn`` (seconds), after one warm-up call.

    Runs more calls while the total stays under ``min_time`` seconds. The minimum is the
    figure least disturbed by other processes on a shared machine.
    """
    fn()
    best = float("inf")
    spent = 0.0
    runs = 0
    while runs < repeat or spent < min_time:
        start = time.perf_counter()
        fn()
        took = time.perf_counter() - start
        best = min(best, took)
        spent += took
        runs += 1
        if runs >= 1000:
            break
    return best


def best_times(fns: dict[str, Callable[[], Any]], *, repeat: int = 5) -> dict[str, float]:
    """:func:`best_time` of several functions, run round-robin: a ratio of two of them then
    compares runs that saw the same machine load."""
    for fn in fns.values():
        fn()
    best = dict.fromkeys(fns, float("inf"))
    for _ in range(repeat):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - start)
    return best


class Recorder:
    """Collects rows; :meth:`write` merges them into ``bench-results.json``."""

    def __init__(self, path: Path = RESULTS_PATH) -> None:
        self.path = path
        self.rows: list[dict[str, Any]] = []

    def record(
        self,
        name: str,
        value: float,
        unit: str,
        *,
        limit: float | None = None,
        target: str | None = None,
        note: str | None = None,
    ) -> dict[str, Any]:
        row: dict[str, Any] = {
            "name": name,
            "value": round(value, 3),
            "unit": unit,
            "limit": None if limit is None else round(limit, 3),
            "ratio": None if not limit else round(value / limit, 4),
        }
        if target:
            row["target"] = target
        if note:
            row["note"] = note
        self.rows = [r for r in self.rows if r["name"] != name]
        self.rows.append(row)
        return row

    def write(self) -> None:
        existing: list[dict[str, Any]] = []
        if self.path.exists():
            try:
                loaded = json.loads(self.path.read_text())
                if isinstance(loaded, list):
                    existing = [r for r in loaded if isinstance(r, dict) and "name" in r]
            except (OSError, ValueError):
                existing = []
        names = {r["name"] for r in self.rows}
        merged = [r for r in existing if r["name"] not in names] + self.rows
        tmp = self.path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(merged, indent=2) + "\n")
        os.replace(tmp, self.path)

    def table(self) -> str:
        lines = [f"{'name':<44} {'value':>14} {'unit':<8} {'limit':>14} {'ratio':>7}"]
        for r in self.rows:
            limit = "" if r["limit"] is None else f"{r['limit']:,.0f}"
            ratio = "" if r["ratio"] is None else f"{r['ratio']:.0%}"
            lines.append(
                f"{r['name']:<44} {r['value']:>14,.0f} {r['unit']:<8} {limit:>14} {ratio:>7}"
            )
        return "\n".join(lines)
