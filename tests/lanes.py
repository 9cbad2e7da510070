"""``make test``'s runner: the suite as two pytest runs side by side.

The tests marked ``own_spark`` run Spark in processes of their own (a driver subprocess, the
``spark-pipelines`` CLI, a venv from the wheels) and spend most of their time waiting on them;
the rest of the suite waits on sockets, ZooKeeper and its one in-process Spark. Run one after
the other, they leave the cores idle much of the time. Here each half is a plain pytest run of
its own (its own ZooKeeper, brokers and Spark session, free ports, numbered temporary
directories): ``-m "(<split>) and (<select>)"`` beside ``-m "not (<split>) and (<select>)"``.

The second run is shown as it goes, the first once it ends. The exit status is the first
failed run's; "no tests collected" (pytest's 5) is no failure. Stopped (Ctrl-C, SIGTERM), it
stops both.

    python tests/lanes.py --split own_spark --select "not faults" -- -q tests
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import tempfile
import time
from typing import IO

NO_TESTS = 5  # pytest's exit status when nothing was collected
STOP_WAIT_S = 30.0


def pytest_command(expression: str, args: list[str]) -> list[str]:
    return [sys.executable, "-m", "pytest", "-m", expression, *args]


def expressions(split: str, select: str) -> tuple[str, str]:
    """The marker expressions of the run beside (``split``) and of the one shown as it goes."""
    keep = f" and ({select})" if select else ""
    return f"({split}){keep}", f"not ({split}){keep}"


def stop(process: subprocess.Popen[str]) -> None:
    """Terminate ``process``; kill it if it has not ended after STOP_WAIT_S."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(STOP_WAIT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def run(split: str, select: str, args: list[str], out: IO[str]) -> int:
    beside_expr, shown_expr = expressions(split, select)
    started = time.monotonic()
    with tempfile.TemporaryFile("w+") as beside_out:
        # no cache plugin beside: one run writes .pytest_cache, not two at once
        beside = subprocess.Popen(
            pytest_command(beside_expr, ["-p", "no:cacheprovider", *args]),
            stdout=beside_out, stderr=subprocess.STDOUT, text=True,
        )
        try:
            shown_rc = subprocess.call(pytest_command(shown_expr, args))
            shown_s = time.monotonic() - started
            beside_rc = beside.wait()
        finally:
            stop(beside)
        beside_s = time.monotonic() - started
        out.flush()
        out.write(f"\n==== beside it: pytest -m {beside_expr!r} ====\n")
        beside_out.seek(0)
        out.write(beside_out.read())
    out.write(
        f"\n==== -m {shown_expr!r}: exit {shown_rc} after {shown_s:.0f} s; "
        f"-m {beside_expr!r}: exit {beside_rc} after {beside_s:.0f} s ====\n"
    )
    out.flush()
    failed = [rc for rc in (shown_rc, beside_rc) if rc not in (0, NO_TESTS)]
    return failed[0] if failed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", required=True, help="the marker of the run beside")
    parser.add_argument("--select", default="", help="a marker expression both runs keep")
    parser.add_argument("pytest_args", nargs=argparse.REMAINDER, help="-- then pytest's")
    ns = parser.parse_args(argv)
    args: list[str] = ns.pytest_args
    if args[:1] == ["--"]:
        args = args[1:]
    if "-m" in args:
        parser.error("give the marker expression as --select, not -m")
    # SIGTERM unwinds like Ctrl-C, through run()'s finally: the run beside is stopped too
    signal.signal(signal.SIGTERM, lambda _signo, _frame: sys.exit(128 + signal.SIGTERM))
    return run(ns.split, ns.select, args, sys.stdout)


if __name__ == "__main__":
    sys.exit(main())
