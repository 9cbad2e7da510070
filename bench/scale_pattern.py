"""Driver cost over many topics read by pattern: ``python -m bench scale_pattern``.

The many-topics shape of :mod:`bench.scale_rtt` (run by name only, like it; the same steps,
round-trip times, proxy and repeats): at N broker-partitions, N / ``PARTITIONS`` / ``BROKERS``
topics of ``PARTITIONS`` partitions on every broker (so N / 40 topics at N = 10,000 with 4
brokers), one message each, read with ``subscribePattern`` matching exactly those topics. Plan
and ``latestOffset`` resolve the pattern against the registry; the first ``commitToGroup``
writes the group's offsets under every topic; ``kafka07 lag`` reads them back topic by topic.

Rows: ``scale_pattern.<step>.<N>.rtt<ms>`` (ms), ``.driver_cpu``, and
``scale_pattern.rtt<ms>.measured`` (us), as :mod:`bench.scale_rtt`'s.
"""

from __future__ import annotations

from bench.results import Recorder
from bench.scale import BROKERS
from bench.scale_rtt import run_shape

#: ``python -m bench`` runs this module only when it is named
RUN_BY_NAME_ONLY = True

SIZES = (1_000, 10_000)
#: partitions of every topic on each broker
PARTITIONS = 10


def _prefix(n: int) -> str:
    # the size ends in "-", so no size's pattern matches another size's topics
    return f"scale-pattern-{n}-"


def topics(n: int) -> dict[str, int]:
    """The topics (partitions per broker) that make ``n`` broker-partitions."""
    count = n // (PARTITIONS * BROKERS)
    return {f"{_prefix(n)}{t:04d}": PARTITIONS for t in range(count)}


def _options(n: int) -> dict[str, str]:
    return {"subscribePattern": f"{_prefix(n)}[0-9]+", "startingOffsets": "earliest"}


def run(recorder: Recorder) -> None:
    run_shape(recorder, "scale_pattern", {t: p for n in SIZES for t, p in topics(n).items()},
              {n: _options(n) for n in SIZES})
