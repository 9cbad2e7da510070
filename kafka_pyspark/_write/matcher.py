"""Which of a task's recorded message sets are in a broker-partition's log (pure).

A task's sets to one broker-partition are sent in order on one connection, by one attempt after
another, so what landed is a prefix of the recorded sets, in order, possibly with other
producers' messages between them (never inside one: the broker appends a set whole).
:func:`landed_prefix` walks the log from the recorded start and counts that prefix: a compressed
set is one wrapper whose inner digest equals the recorded one; an uncompressed set is a run of
``messages`` consecutive uncompressed messages with the recorded size and digest.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from kafka_pyspark._write.digest import LogUnit, SetDigest, digest_of_crcs

__all__ = ["landed_prefix"]


def landed_prefix(expected: Sequence[SetDigest], log: Sequence[LogUnit]) -> int:
    """How many of ``expected`` (in order) are found in ``log`` (in order)."""
    if not expected:
        return 0
    sizes = np.fromiter((u.inner.inner_bytes if not u.wrapped else -1 for u in log),
                        dtype=np.int64, count=len(log))
    plain = sizes >= 0
    # prefix sums of plain message sizes and counts: a run's size in O(1)
    size_sum = np.concatenate(([0], np.cumsum(np.where(plain, sizes, 0))))
    plain_sum = np.concatenate(([0], np.cumsum(plain)))
    found, i, n = 0, 0, len(log)
    while found < len(expected) and i < n:
        want = expected[found]
        unit = log[i]
        if unit.wrapped:
            if unit.inner == want:
                found += 1
            i += 1
            continue
        m = want.messages
        end = i + m
        if (end <= n and plain_sum[end] - plain_sum[i] == m
                and size_sum[end] - size_sum[i] == want.inner_bytes
                and _run_digest(log, i, end) == want.digest):
            found += 1
            i = end
        else:
            i += 1
    return found


def _run_digest(log: Sequence[LogUnit], lo: int, hi: int) -> int:
    crcs = np.fromiter((log[k].inner.digest for k in range(lo, hi)), dtype=np.uint32,
                       count=hi - lo)
    return digest_of_crcs(crcs)
