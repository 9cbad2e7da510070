"""``kafka07 lag``'s totals: one per topic in order of appearance, then the group's, in a
number of passes over the rows that does not grow with the number of topics."""

from __future__ import annotations

from collections.abc import Iterator

from kafka_pyspark._admin.lag import (
    ALL_TOPICS,
    ERROR,
    NOT_COMMITTED,
    OK,
    LagRow,
    LagTotal,
    lag_totals,
)


class _CountedRows(list[LagRow]):
    """A list of rows that counts the passes made over it."""

    passes = 0

    def __iter__(self) -> Iterator[LagRow]:
        self.passes += 1
        return super().__iter__()


def _row(topic: str, partition: int, lag: int | None, status: str = OK,
         owner: str | None = None) -> LagRow:
    return LagRow("g", topic, 0, partition, 0, 0, lag, lag, status, owner=owner)


def test_totals_per_topic_in_order_then_the_group() -> None:
    fresh = LagRow("g", "b", 0, 2, None, 40, 800, None, NOT_COMMITTED)  # 760 bytes, no lag
    rows = [_row("b", 0, 5, owner="c-0"), _row("a", 0, 2), _row("b", 1, None, NOT_COMMITTED),
            _row("a", 1, None, ERROR, owner="c-1"), fresh]
    assert lag_totals(rows) == [
        LagTotal("b", 5, 3, 1, 0, not_committed=2, not_committed_bytes=760),
        LagTotal("a", 2, 2, 1, 1),
        LagTotal(ALL_TOPICS, 7, 5, 2, 1, not_committed=2, not_committed_bytes=760),
    ]


def _passes(topics: int, per_topic: int) -> int:
    rows = _CountedRows(_row(f"t{t}", p, 1) for t in range(topics) for p in range(per_topic))
    totals = lag_totals(rows)
    assert totals[-1] == LagTotal(ALL_TOPICS, topics * per_topic, topics * per_topic, 0, 0)
    assert [t.topic for t in totals[:-1]] == [f"t{t}" for t in range(topics)]
    return rows.passes


def test_passes_over_the_rows_do_not_grow_with_the_topics() -> None:
    assert _passes(200, 5) == _passes(1, 1000)
