"""Routing: every row to a broker-partition, one function per mode (vectorised).

A topic's broker-partitions are 0.7's producer's sorted list
(:func:`~kafka_pyspark._partitioner.sorted_partitions`), resolved once per topic and task
(:meth:`Router.topic_targets`): from the plan, else probed (``broker.list``), else a new topic
(partition 0 of every live broker). Then, in this order of precedence per row:

* explicit ``broker``/``partition`` columns (:meth:`Router._route_explicit`);
* the key's Java hash over the list (:meth:`Router._route_hash`);
* random (:class:`RandomRuns`): runs of ``batch.size`` consecutive keyless rows of a topic, each
  run to one uniformly random broker-partition, a run continuing across Arrow batches.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from kafka_pyspark._partitioner import hash_partitions, java_hashcodes, random_partitions
from kafka_pyspark._shared.partition_key import partition_key
from kafka_pyspark._wire import INT32_MAX, validate_topic_name
from kafka_pyspark._write.rows import RowError, Targets, row_label
from kafka_pyspark.errors import InvalidPartitionError, SchemaError, TopicNameError

if TYPE_CHECKING:
    from kafka_pyspark._cluster import Cluster
    from kafka_pyspark._write.plan import WritePlan


Ids = npt.NDArray[np.int64]
#: random picks drawn at once (runs): draws never depend on how rows come in calls
PICK_CHUNK = 1024


class RandomRuns:
    """Keyless rows of one topic: runs of ``block`` consecutive rows, each run to one uniformly
    random target; a run not finished by one call continues in the next. The picks are drawn
    from the generator in chunks of :data:`PICK_CHUNK` runs, so run ``k`` goes to the same
    target however the rows come in calls (Arrow batches): with a seeded generator the routing
    is a function of the row order alone (exactly-once retries rely on it)."""

    __slots__ = ("_block", "_current", "_ids", "_left", "_picks", "_rng", "_used")

    def __init__(self, ids: Ids, block: int, rng: np.random.Generator) -> None:
        self._ids = ids
        self._block = block
        self._rng = rng
        self._current = -1
        self._left = 0  # rows still to go to _current
        self._picks: Ids = np.zeros(0, dtype=np.int64)
        self._used = 0

    def _next_picks(self, runs: int) -> Ids:
        """The targets of the next ``runs`` runs."""
        while len(self._picks) - self._used < runs:
            more = random_partitions(PICK_CHUNK, len(self._ids), self._rng)
            self._picks = np.concatenate([self._picks[self._used:], more])
            self._used = 0
        out = self._picks[self._used:self._used + runs]
        self._used += runs
        return out

    def take(self, n: int) -> Ids:
        """Target ids for the next ``n`` keyless rows."""
        targets, bounds = self.take_runs(n)
        return np.repeat(targets, np.diff(bounds))

    def take_runs(self, n: int) -> tuple[Ids, Ids]:
        """The next ``n`` keyless rows as runs: ``(targets, bounds)``, rows
        ``bounds[i]:bounds[i + 1]`` to ``targets[i]``; a run's neighbours go elsewhere
        (consecutive runs to one target are one), so it is :meth:`take`'s rows, run-length
        encoded, without an array per row."""
        head = min(n, self._left)
        self._left -= head
        rest = n - head
        if not rest:
            lone = np.array([self._current] if head else [], dtype=np.int64)
            return lone, np.array([0, head] if head else [0], dtype=np.int64)
        k = -(-rest // self._block)
        targets = self._ids[self._next_picks(k)]
        ends = head + self._block * np.arange(1, k + 1, dtype=np.int64)
        ends[-1] = n
        if head:
            targets = np.concatenate([[self._current], targets])
            ends = np.concatenate([[head], ends])
        self._current = int(targets[-1])
        self._left = -rest % self._block
        keep = np.flatnonzero(np.append(targets[1:] != targets[:-1], True))
        return targets[keep], np.concatenate([[0], ends[keep]]).astype(np.int64)


class Router:
    """Routes one task's rows; raises :class:`RowError` naming the first row it cannot route."""

    def __init__(
        self, plan: WritePlan, targets: Targets, rng: np.random.Generator, task: str
    ) -> None:
        self.plan = plan
        self.targets = targets
        self.task = task
        self._rng = rng
        self._ids: dict[str, Ids] = {}  # topic -> target id per entry of its sorted list
        self._counts: dict[str, dict[int, int]] = {}  # topic -> broker -> partition count
        self._runs: dict[str, RandomRuns] = {}
        self._valid_topics: set[str] = set()
        self._probe: Cluster | None = None
        #: topic -> the sorted list an earlier attempt of this task routed over (exactly-once)
        self.pinned: dict[str, tuple[tuple[int, int], ...]] = {}
        #: lists resolved and not yet taken by :meth:`take_resolved`
        self._resolved: dict[str, tuple[tuple[int, int], ...]] = {}

    def take_resolved(self) -> dict[str, tuple[tuple[int, int], ...]]:
        """The topics' sorted lists resolved since the last call (recorded with the intent)."""
        out, self._resolved = self._resolved, {}
        return out

    def close(self) -> None:
        if self._probe is not None:
            self._probe.close()
            self._probe = None

    # --- entry points ----------------------------------------------------------------------

    def keyless(self, topic: str, n: int) -> Ids:
        """Targets for ``n`` rows of ``topic`` with no key and no explicit target."""
        return self._random_runs(topic).take(n)

    def keyless_runs(self, topic: str, n: int) -> tuple[Ids, Ids]:
        """:meth:`keyless` as runs (:meth:`RandomRuns.take_runs`)."""
        return self._random_runs(topic).take_runs(n)

    def route(self, batch: pa.RecordBatch, base: int) -> Ids:
        """A target id per row of ``batch`` (its first row is row ``base`` of the task)."""
        dest = np.empty(batch.num_rows, dtype=np.int64)
        for topic, rows in self._topic_groups(batch, base):
            out = self._route_topic(batch, topic, rows, base)
            if rows is None:
                dest[:] = out
            else:
                dest[rows] = out
        return dest

    # --- the sorted list per topic (new topics included) -------------------------------------

    def topic_targets(self, topic: str) -> Ids:
        """Target ids over ``topic``'s sorted broker-partition list, resolved once."""
        ids = self._ids.get(topic)
        if ids is None:
            bps = self.pinned.get(topic) or self.plan.topics.get(topic)
            if bps is None and self.plan.cluster.broker_list is not None:
                bps = tuple(self._probe_cluster().partitions(topic))
            if not bps:
                bps = self.plan.new_topic_partitions()
            self._resolved[topic] = tuple(bps)
            counts: dict[int, int] = {}
            for b, p in bps:
                counts[b] = max(counts.get(b, 0), p + 1)
            self._counts[topic] = counts
            ids = self._ids[topic] = np.array(
                [self.targets.id((topic, b, p)) for b, p in bps], dtype=np.int64
            )
        return ids

    def _probe_cluster(self) -> Cluster:
        if self._probe is None:
            from kafka_pyspark._cluster import Cluster

            self._probe = Cluster(self.plan.cluster)
        return self._probe

    # --- per topic -------------------------------------------------------------------------

    def _topic_groups(
        self, batch: pa.RecordBatch, base: int
    ) -> Iterator[tuple[str, Ids | None]]:
        """(topic, row indices or None for all rows) per distinct topic in the batch."""
        opts, lay = self.plan.options, self.plan.layout
        if lay.topic is None:
            assert opts.topic is not None
            yield opts.topic, None
            return
        col = batch.column(lay.topic)
        if opts.topic is not None and col.null_count:
            import pyarrow.compute as pc  # only here: importing it costs 0.1-0.2 s

            col = pc.fill_null(col, opts.topic)
        if col.null_count:
            row = int(np.flatnonzero(np.asarray(col.is_null()))[0])
            raise RowError(SchemaError(
                f"{row_label(self.task, base + row)}: topic is null and there is no 'topic' "
                "option"
            ))
        encoded = col.dictionary_encode()
        names = encoded.dictionary.to_pylist()
        indices = np.asarray(encoded.indices, dtype=np.int64)
        if len(names) == 1:
            self._check_topic(names[0], base)
            yield names[0], None
            return
        order = np.argsort(indices, kind="stable")
        bounds = np.searchsorted(indices[order], np.arange(len(names) + 1))
        for i, name in enumerate(names):
            rows = order[bounds[i] : bounds[i + 1]]
            if len(rows):
                self._check_topic(name, base + int(rows[0]))
                yield name, np.sort(rows)

    def _check_topic(self, topic: str, row: int) -> None:
        if topic in self._valid_topics:
            return
        try:
            validate_topic_name(topic)
        except TopicNameError as e:
            raise RowError(TopicNameError(f"{row_label(self.task, row)}: {e}")) from e
        self._valid_topics.add(topic)

    def _route_topic(
        self, batch: pa.RecordBatch, topic: str, rows: Ids | None, base: int
    ) -> Ids:
        """Target ids for one topic's rows: explicit, else by key, else random."""
        lay = self.plan.layout
        row_idx = np.arange(batch.num_rows, dtype=np.int64) if rows is None else rows
        out = np.full(len(row_idx), -1, dtype=np.int64)

        def col(name: str) -> pa.Array:
            c = batch.column(name)
            return c if rows is None else c.take(pa.array(rows))

        if lay.broker is not None and lay.partition is not None:
            self._route_explicit(topic, col(lay.broker), col(lay.partition), out,
                                 row_idx + base)
        if lay.key is not None:
            self._route_hash(topic, col(lay.key), out, row_idx + base)
        rest = np.flatnonzero(out < 0)
        if len(rest):
            out[rest] = self.keyless(topic, len(rest))
        return out

    def _random_runs(self, topic: str) -> RandomRuns:
        runs = self._runs.get(topic)
        if runs is None:
            ids = self.topic_targets(topic)
            runs = self._runs[topic] = RandomRuns(ids, self.plan.options.batch_size, self._rng)
        return runs

    # --- by key ----------------------------------------------------------------------------

    def _route_hash(self, topic: str, keys: pa.Array, out: Ids, row_no: Ids) -> None:
        """Rows not yet routed with a non-null key: 0.7's DefaultPartitioner over the list."""
        todo = (out < 0) & np.asarray(keys.is_valid(), dtype=bool)
        if not todo.any():
            return
        ids = self.topic_targets(topic)
        sel = np.flatnonzero(todo)
        some = keys if len(sel) == len(out) else keys.take(pa.array(sel))
        local = hash_partitions(some, len(ids))
        if len(local) and int(local.min()) < 0:
            j = int(np.flatnonzero(local < 0)[0])
            h = int(java_hashcodes(some.slice(j, 1))[0])
            raise RowError(InvalidPartitionError(
                f"{row_label(self.task, int(row_no[sel[j]]), some[j].as_py())}: the key's "
                f"Java hashCode is {h} (Integer.MIN_VALUE), Math.abs leaves it negative and "
                f"{h} % {len(ids)} = {int(local[j])}; 0.7's DefaultPartitioner gives no "
                "partition for this key (its producer throws InvalidPartitionException). Route "
                "this row with explicit broker/partition columns or change its key"
            ))
        out[sel] = ids[local]

    # --- explicit --------------------------------------------------------------------------

    def _route_explicit(
        self, topic: str, brokers: pa.Array, partitions: pa.Array, out: Ids, row_no: Ids
    ) -> None:
        """Rows naming both broker and partition go there, if that target can exist."""
        b_valid = np.asarray(brokers.is_valid(), dtype=bool)
        p_valid = np.asarray(partitions.is_valid(), dtype=bool)
        half = b_valid ^ p_valid
        if half.any():
            i = int(np.flatnonzero(half)[0])
            raise RowError(SchemaError(
                f"{row_label(self.task, int(row_no[i]))}: broker is {brokers[i].as_py()} but "
                f"partition is {partitions[i].as_py()}; give both or neither (null in both "
                "routes by key/random)"
            ))
        both = np.flatnonzero(b_valid & p_valid)
        if not len(both):
            return
        b = np.asarray(brokers.fill_null(0), dtype=np.int64)[both]
        p = np.asarray(partitions.fill_null(0), dtype=np.int64)[both]
        pairs, inverse = np.unique(np.stack([b, p], axis=1), axis=0, return_inverse=True)
        inverse = inverse.reshape(-1)
        self.topic_targets(topic)
        pair_ids = np.empty(len(pairs), dtype=np.int64)
        for k, (bb, pp) in enumerate(pairs.tolist()):
            problem = self._explicit_problem(topic, bb, pp)
            if problem is not None:
                i = int(both[int(np.flatnonzero(inverse == k)[0])])
                raise RowError(InvalidPartitionError(
                    f"{row_label(self.task, int(row_no[i]))}: explicit target "
                    f"{partition_key(bb, pp)} of topic {topic!r}: {problem}"
                ))
            pair_ids[k] = self.targets.id((topic, int(bb), int(pp)))
        out[both] = pair_ids[inverse]

    def _explicit_problem(self, topic: str, broker: int, partition: int) -> str | None:
        registered = self._counts[topic]
        if broker not in self.plan.brokers:
            return f"broker {broker} is not a live broker (live: {sorted(self.plan.brokers)})"
        if not 0 <= partition <= INT32_MAX:
            return f"partition {partition} is not a partition number"
        if broker in registered and partition >= registered[broker]:
            return (
                f"topic {topic!r} has {registered[broker]} partitions on broker {broker}; a "
                f"0.7 broker closes the connection on a PRODUCE to partition {partition}"
            )
        return None
