"""The reliability suite's shared parts: the outcome table, and servers that tests may break.

Table: a test calls the ``record`` fixture once per scenario it runs::

    record("broker SIGKILL mid batch read", expected=sent_values, got=read_values)

``expected``/``got`` are lists of values (missing and duplicated are counted as multisets) or
plain counts; ``detail`` adds to the outcome (e.g. the error class a scenario must end with).
The test's own result (passed / failed / xfailed ...) is the outcome; the seconds are the
test's wall time (setup, call and teardown). ``pytest_terminal_summary`` prints the table at
the end of the run (``make test-reliability``; docs/reliability.md holds a run's figures).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pytest
from rel_support import Recorder

if TYPE_CHECKING:
    from kafka_pyspark.testing._zookeeper import ZooKeeperServer

COLUMNS = ("scenario", "expected", "read/written", "missing", "duplicated", "outcome", "s")


@dataclass
class Record:
    nodeid: str
    scenario: str
    expected: int
    got: int
    missing: int
    duplicated: int
    detail: str = ""
    outcome: str = "?"
    seconds: float = 0.0


_RECORDS: list[Record] = []
_STARTED: dict[str, float] = {}


def _count(expected: Sequence[Any] | int, got: Sequence[Any] | int) -> tuple[int, int, int, int]:
    if isinstance(expected, int) and isinstance(got, int):
        return expected, got, max(0, expected - got), max(0, got - expected)
    assert not isinstance(expected, int) and not isinstance(got, int), "lists or counts, not both"
    want, have = Counter(expected), Counter(got)
    missing = sum((want - have).values())
    extra = have - want
    duplicated = sum(n for v, n in extra.items() if v in want)
    return len(expected), len(got), missing, duplicated


@pytest.fixture
def record(request: pytest.FixtureRequest) -> Recorder:
    """``record(scenario, expected=..., got=..., detail="")``: one row of the table."""

    def add(
        scenario: str,
        *,
        expected: Sequence[Any] | int,
        got: Sequence[Any] | int,
        detail: str = "",
    ) -> None:
        n_expected, n_got, missing, duplicated = _count(expected, got)
        _RECORDS.append(
            Record(request.node.nodeid, scenario, n_expected, n_got, missing, duplicated, detail)
        )

    return add


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    _STARTED[item.nodeid] = time.monotonic()
    yield
    seconds = time.monotonic() - _STARTED.pop(item.nodeid, time.monotonic())
    for r in _RECORDS:
        if r.nodeid == item.nodeid:
            r.seconds = seconds


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    status = None
    if hasattr(report, "wasxfail"):
        status = "xpassed" if report.passed else "xfailed"
    elif report.failed:
        status = "failed" if report.when == "call" else f"error ({report.when})"
    elif report.when == "call":
        status = "passed"
    if status is None:
        return
    for r in _RECORDS:
        if r.nodeid == report.nodeid and (r.outcome in ("?", "passed") or status != "passed"):
            r.outcome = status


def format_table(records: Sequence[Record]) -> list[str]:
    rows = [
        (
            r.scenario,
            str(r.expected),
            str(r.got),
            str(r.missing),
            str(r.duplicated),
            r.outcome + (f": {r.detail}" if r.detail else ""),
            f"{r.seconds:.1f}",
        )
        for r in records
    ]
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not _RECORDS:
        return
    terminalreporter.section("reliability: rows expected / read or written, outcome, seconds")
    for line in format_table(_RECORDS):
        terminalreporter.write_line(line)


# --- servers a test may stop, pause or kill -----------------------------------------------------


@pytest.fixture(scope="module")
def own_zookeeper() -> Iterator[ZooKeeperServer]:
    """A ZooKeeper of this module alone (tests stop and pause it; the session one is shared).
    Left running after each test (a test that halts or pauses it brings it back)."""
    from _zk_server import server

    with server() as zk:
        yield zk


@pytest.fixture
def revive_zookeeper(own_zookeeper: ZooKeeperServer) -> Iterator[ZooKeeperServer]:
    """``own_zookeeper``, brought back (resumed, restarted) after the test whatever happened."""
    yield own_zookeeper
    own_zookeeper.resume()
    if not own_zookeeper.running:
        own_zookeeper.start()
