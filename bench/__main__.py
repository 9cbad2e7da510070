"""``python -m bench [module ...]``: run every ``bench/*.py`` that defines ``run(recorder)``.

To add a benchmark, create ``bench/<name>.py`` with ``def run(recorder: Recorder) -> None``
recording rows via ``recorder.record(name, value, unit, limit=..., target=...)``; it is picked
up automatically (unless it sets ``RUN_BY_NAME_ONLY = True``: then only when named). Rows are
merged by name into ``bench-results.json`` at the repo root.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
import time

import bench
from bench.results import Recorder

_NOT_BENCHMARKS = {"__main__", "results"}


def main(argv: list[str]) -> int:
    wanted = set(argv)
    names = sorted(
        m.name for m in pkgutil.iter_modules(bench.__path__) if m.name not in _NOT_BENCHMARKS
    )
    unknown = wanted - set(names)
    if unknown:
        print(f"unknown benchmark module(s): {', '.join(sorted(unknown))}; have: {names}")
        return 2
    recorder = Recorder()
    for name in names:
        if wanted and name not in wanted:
            continue
        module = importlib.import_module(f"bench.{name}")
        run = getattr(module, "run", None)
        if run is None or (not wanted and getattr(module, "RUN_BY_NAME_ONLY", False)):
            continue
        print(f"== bench.{name}", flush=True)
        start = time.perf_counter()
        run(recorder)
        print(f"   ({time.perf_counter() - start:.1f} s)", flush=True)
    print()
    print(recorder.table())
    recorder.write()
    print(f"\nwritten: {recorder.path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
