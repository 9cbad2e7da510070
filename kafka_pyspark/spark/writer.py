"""``df.write.format("kafka07")`` and ``df.writeStream.format("kafka07")``: one engine, two faces.

Driver (the writer's ``__init__``, which Spark runs at ``save()``/``start()``, and for a
streaming query once per micro-batch): parse and check options and columns
(:mod:`~kafka_pyspark.spark.write_options`), then resolve the cluster into a :class:`WritePlan`
of picklable primitives: the live brokers and, per known topic, the sorted (broker, partition)
list 0.7's producer would use. Spark pickles the writer, plan included, to the executors.

Executor (``write``, once per task, :class:`TaskWriter`): Arrow batches in ->

1. route every row to a broker-partition (vectorised, :mod:`kafka_pyspark.partitioner`):
   explicit ``broker``/``partition`` columns, else the key's Java hash over the sorted list,
   else random (one random broker-partition per run of ``batch.size`` keyless rows);
2. buffer per broker-partition and cut message sets of ``batch.size`` messages, fewer where
   an uncompressed set would not fit one request or a compressed wrapper would exceed
   ``max.message.size`` (split in halves); one message that cannot fit is an error naming its
   row (:mod:`~kafka_pyspark.spark.write_sizes`);
3. MULTIPRODUCE per broker, up to about ``max.message.size`` + 1 MiB per request;
4. at the end, the delivery barrier on every connection used (an OFFSETS request answered on
   the same connection proves every earlier PRODUCE on it was appended);
5. return a :class:`Kafka07CommitMessage` with per broker-partition message/byte counts.

Failures:

* a connection lost before its barrier answered: the task raises
  :class:`~kafka_pyspark.errors.BrokerConnectionError` saying how much data is unconfirmed and
  Spark retries the task (at-least-once: the retry may duplicate what the broker did append).
  Connecting is retried with backoff (bounded) while nothing has been sent.
* bad data in a row (oversize message, null value, a key or explicit target with no valid
  partition): the task stops at that row, confirms what it already sent (barrier), and returns
  a commit message carrying the error. The driver's ``commit`` then raises it, naming the row,
  with a summary of everything every task wrote. No Spark retry: it could not succeed and would
  only write the rows before the bad one again.
* ``abort`` (a task failed) logs what is in Kafka anyway: 0.7 cannot take data back.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)

from kafka_pyspark import errors
from kafka_pyspark.client import Producer
from kafka_pyspark.errors import (
    AppendShortfallError,
    BrokerConnectionError,
    InvalidPartitionError,
    KafkaError,
    MessageTooLargeError,
    OptionError,
    RequestTooLargeError,
    SchemaError,
    TopicNameError,
)
from kafka_pyspark.partitioner import hash_partitions, java_hashcodes, random_partitions
from kafka_pyspark.spark.write_options import (
    ColumnLayout,
    WriteOptions,
    parse_write_options,
    resolve_columns,
)
from kafka_pyspark.spark.write_sizes import (
    MAX_COMPRESS_INPUT,
    MESSAGE_OVERHEAD,
    cut_runs,
    message_limit,
    request_limit,
    set_limit,
)
from kafka_pyspark.wire import validate_topic_name

if TYPE_CHECKING:
    from pyspark.sql.types import StructType

    from kafka_pyspark.cluster import Cluster
    from kafka_pyspark.spark.options import ClusterOptions

log = logging.getLogger(__name__)

_MAX_INT32 = 2**31 - 1

Target = tuple[str, int, int]
"""(topic, broker id, partition)"""


# --- the plan shipped to executors ---------------------------------------------------------


@dataclass(frozen=True)
class WritePlan:
    """Everything a write task needs, resolved on the driver (picklable primitives)."""

    options: WriteOptions
    layout: ColumnLayout
    brokers: dict[int, tuple[str, int]]
    #: topic -> sorted (broker, partition) list; empty tuple: known not to be registered
    topics: dict[str, tuple[tuple[int, int], ...]]
    #: broker.list mode: executors probe topics the driver did not resolve (``topic`` column)
    broker_list: str | None = None
    socket_timeout_ms: int = 30000
    socket_buffer_size: int = 65536
    connect_retries: int = 3
    connect_backoff: float = 0.2

    def new_topic_partitions(self) -> tuple[tuple[int, int], ...]:
        """Seed 003 "Creating New Topics": partition 0 of every live broker."""
        return tuple((b, 0) for b in sorted(self.brokers))


def build_plan(options: Mapping[str, str], schema: StructType) -> WritePlan:
    """Driver side: check options and columns, then resolve the cluster (bounded I/O)."""
    from kafka_pyspark.cluster import Cluster

    wopts, copts = parse_write_options(options)
    layout = resolve_columns(schema, wopts)
    with Cluster(**copts.cluster_kwargs()) as cluster:
        return resolve_plan(cluster, wopts, layout, copts)


def resolve_plan(
    cluster: Cluster, wopts: WriteOptions, layout: ColumnLayout, copts: ClusterOptions
) -> WritePlan:
    """The plan for one write job (or one micro-batch) from a cluster view."""
    brokers = {b: (a.host, a.port) for b, a in cluster.brokers().items()}
    if not brokers:
        raise BrokerConnectionError(
            f"no live brokers registered in {cluster!r}: nothing to write to"
        )
    topics: dict[str, tuple[tuple[int, int], ...]] = {}
    registry = cluster.registry()
    if layout.topic is not None and registry is not None:
        # Rows name their topics: resolve every registered topic now, so that all tasks route
        # a topic's keys over the same list, and any other topic is known to be new.
        for topic in cluster.topics():
            try:
                validate_topic_name(topic)
            except TopicNameError:
                continue  # not writable by name anyway
            counts = registry.topic_partitions(topic)
            topics[topic] = tuple(
                (b, p) for b, n in sorted(counts.items()) if b in brokers for p in range(n)
            )
    if wopts.topic is not None and wopts.topic not in topics:
        topics[wopts.topic] = tuple(
            (b, p) for b, p in cluster.partitions(wopts.topic) if b in brokers
        )
    return WritePlan(
        options=wopts,
        layout=layout,
        brokers=brokers,
        topics=topics,
        broker_list=copts.broker_list if registry is None else None,
        socket_timeout_ms=copts.socket_timeout_ms,
        socket_buffer_size=copts.socket_buffer_size,
    )


# --- commit message --------------------------------------------------------------------------


@dataclass
class Kafka07CommitMessage(WriterCommitMessage):
    """What one write task did. ``written`` maps (topic, broker, partition) to (messages,
    message-set bytes, message sets), all confirmed by the delivery barrier. ``error`` is set
    when the task stopped at a bad row (see the module docstring); ``error_type`` is the name
    of the :mod:`kafka_pyspark.errors` class to raise on the driver."""

    task: str
    rows: int
    written: dict[Target, tuple[int, int, int]] = field(default_factory=dict)
    error: str | None = None
    error_type: str | None = None

    @property
    def messages(self) -> int:
        return sum(m for m, _, _ in self.written.values())

    @property
    def bytes(self) -> int:
        return sum(b for _, b, _ in self.written.values())


def _fmt_written(written: Mapping[Target, tuple[int, int, int]], limit: int = 20) -> str:
    if not written:
        return "nothing"
    by_topic: dict[str, list[tuple[int, int, int, int]]] = {}
    for (topic, b, p), (m, n, _) in sorted(written.items()):
        by_topic.setdefault(topic, []).append((b, p, m, n))
    parts = []
    for topic, rows in by_topic.items():
        msgs = sum(r[2] for r in rows)
        nbytes = sum(r[3] for r in rows)
        detail = ", ".join(f"{b}-{p}: {m}" for b, p, m, _ in rows[:limit])
        if len(rows) > limit:
            detail += f", ... ({len(rows) - limit} more)"
        parts.append(f"topic {topic!r}: {msgs} messages, {nbytes} bytes [{detail}]")
    return "; ".join(parts)


def _merge(messages: Iterable[Kafka07CommitMessage]) -> dict[Target, tuple[int, int, int]]:
    total: dict[Target, tuple[int, int, int]] = {}
    for msg in messages:
        for t, (m, n, s) in msg.written.items():
            pm, pn, ps = total.get(t, (0, 0, 0))
            total[t] = (pm + m, pn + n, ps + s)
    return total


def _error_class(name: str | None) -> type[KafkaError]:
    cls = getattr(errors, name or "", None)
    if isinstance(cls, type) and issubclass(cls, KafkaError):
        return cls
    return KafkaError


def _raise_class(cls: type[KafkaError], message: str) -> KafkaError:
    """An instance of ``cls`` with ``message`` (some classes take extra constructor args)."""
    try:
        return cls(message)
    except TypeError:
        return KafkaError(message)


def commit_job(messages: Sequence[WriterCommitMessage | None], what: str) -> None:
    """Driver: log the summary; raise the first task's data error, if any (with the summary)."""
    done = [m for m in messages if isinstance(m, Kafka07CommitMessage)]
    total = _merge(done)
    rows = sum(m.rows for m in done)
    failed = [m for m in done if m.error is not None]
    summary = _fmt_written(total)
    if failed:
        first = failed[0]
        log.error(
            "kafka07 %s failed: %d of %d tasks stopped at a bad row; written and confirmed "
            "before that (0.7 cannot take it back): %s",
            what, len(failed), len(done), summary,
        )
        others = "" if len(failed) == 1 else f" ({len(failed) - 1} more tasks failed alike)"
        raise _raise_class(
            _error_class(first.error_type),
            f"{first.error}{others}. Written and confirmed by all tasks before "
            f"the job stopped (0.7 cannot take it back): {summary}",
        )
    log.info("kafka07 %s committed: %d rows from %d tasks; %s", what, rows, len(done), summary)


def abort_job(messages: Sequence[WriterCommitMessage | None], what: str) -> None:
    """Driver: log what is in Kafka despite the abort (0.7 has no way to remove it)."""
    done = [m for m in messages if isinstance(m, Kafka07CommitMessage)]
    stopped = sum(1 for m in done if m.error is not None)
    missing = sum(1 for m in messages if m is None)
    text = (
        f"kafka07 {what} aborted: {len(done)} of {len(messages)} tasks finished"
        + (f" ({stopped} of them stopped at a bad row)" if stopped else "")
        + "; what they wrote stays in Kafka (0.7 cannot take data back): "
        + _fmt_written(_merge(done))
    )
    if missing:
        text += (
            f". {missing} tasks failed: what they sent before failing may be partly in Kafka "
            "(each task's error itemises what was not confirmed); a rerun writes those rows "
            "again (at-least-once)"
        )
    log.warning("%s", text)


# --- the engine ------------------------------------------------------------------------------


class _RowError(Exception):
    """Internal: bad data in a row; carries the domain error to report."""

    def __init__(self, error: KafkaError) -> None:
        super().__init__(str(error))
        self.error = error


def _as_binary(arr: pa.Array | pa.ChunkedArray) -> pa.Array:
    """A string/binary column as ``pa.binary()`` (zero-copy for string/binary)."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    t = arr.type
    if pa.types.is_string(t):
        return arr.view(pa.binary())
    if pa.types.is_binary(t):
        return arr
    return arr.cast(pa.binary())


def _value_offsets(arr: pa.Array) -> npt.NDArray[np.int64]:
    """Offsets of a ``pa.binary()`` array, rebased so element i is bytes [o[i], o[i+1])."""
    n = len(arr)
    buf = arr.buffers()[1]
    if buf is None or n == 0:
        return np.zeros(n + 1, dtype=np.int64)
    offsets = np.frombuffer(buf, dtype=np.int32, count=arr.offset + n + 1)[arr.offset :]
    return offsets.astype(np.int64)


def _compact(arr: pa.Array) -> pa.Array:
    """A copy of a (sliced) array holding only its own bytes."""
    return pa.concat_arrays([arr])


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


class _Pending:
    """Rows routed to one broker-partition, not yet cut into a message set."""

    __slots__ = ("chunks", "count", "rows")

    def __init__(self) -> None:
        self.chunks: list[pa.Array] = []
        self.rows: list[npt.NDArray[np.int64]] = []
        self.count = 0


class TaskWriter:
    """One write task: routes, batches, compresses, sends, confirms. Not thread-safe.

    Usable without Spark (tests, the benchmark): ``TaskWriter(plan).write(batches)``.
    """

    def __init__(self, plan: WritePlan, *, task: str = "write task", seed: int | None = None):
        from kafka_pyspark.messages import encode_message_set_arrow, encode_message_sets_arrow

        self.plan = plan
        self.opts = plan.options
        self.layout = plan.layout
        self.task = task
        self._encode = encode_message_set_arrow
        self._encode_many = encode_message_sets_arrow
        self._rng = np.random.default_rng(seed)
        self._rows_seen = 0
        self._valid_topics: set[str] = set()
        self._partitions: dict[str, tuple[tuple[int, int], ...]] = {}
        self._dest_ids: dict[str, npt.NDArray[np.int64]] = {}
        self._targets: list[Target] = []
        self._target_index: dict[Target, int] = {}
        self._pending: list[_Pending] = []
        self._carry: tuple[pa.Array, int] | None = None  # keyless rows not yet in a set
        self._prod: Producer | None = None
        # every message set must fit in one request (write_sizes)
        self._max_request = request_limit(self.opts.max_message_size)
        self._handed: dict[int, list[int]] = {}  # target -> [messages, bytes, sets] to producer
        self._confirmed: dict[int, list[int]] = {}  # target -> [messages, bytes, sets] confirmed
        self._probe: Cluster | None = None

    # --- public --------------------------------------------------------------------------

    def write(self, batches: Iterable[pa.RecordBatch]) -> Kafka07CommitMessage:
        try:
            try:
                for batch in batches:
                    if batch.num_rows:
                        self._route(batch)
                self._flush_all()
            except _RowError as e:
                # Stop here: confirm what was handed to the producer, report.
                short = self._confirm(after=str(e))
                log.error("%s stopped at a bad row: %s", self.task, e)
                if short is not None:
                    return self._result(error=type(short)(f"{short}. The task had also "
                                                          f"stopped at a bad row: {e}"))
                return self._result(error=e.error)
            short = self._confirm()
            return self._result(error=short)
        finally:
            self.close()

    def close(self) -> None:
        if self._prod is not None:
            self._prod.close()
            self._prod = None
        if self._probe is not None:
            self._probe.close()
            self._probe = None

    # --- results -------------------------------------------------------------------------

    def _written(self) -> dict[Target, tuple[int, int, int]]:
        return {self._targets[i]: (m, n, s) for i, (m, n, s) in self._confirmed.items() if m}

    def _result(self, error: KafkaError | None = None) -> Kafka07CommitMessage:
        return Kafka07CommitMessage(
            task=self.task,
            rows=self._rows_seen,
            written=self._written(),
            error=None if error is None else str(error),
            error_type=None if error is None else type(error).__name__,
        )

    # --- routing -------------------------------------------------------------------------

    def _row_label(self, row: int, key: Any = None) -> str:
        text = f"row {row} of {self.task}"
        if key is not None:
            text += f" (key {_short(key)})"
        return text

    def _topic_partitions(self, topic: str) -> tuple[tuple[int, int], ...]:
        found = self._partitions.get(topic)
        if found is not None:
            return found
        bps = self.plan.topics.get(topic)
        if bps is None and self.plan.broker_list is not None:
            bps = tuple(self._probe_cluster().partitions(topic))
        if not bps:
            bps = self.plan.new_topic_partitions()
        self._partitions[topic] = bps
        self._dest_ids[topic] = np.array(
            [self._target_id((topic, b, p)) for b, p in bps], dtype=np.int64
        )
        return bps

    def _probe_cluster(self) -> Cluster:
        if self._probe is None:
            from kafka_pyspark.cluster import Cluster

            self._probe = Cluster(
                broker_list=self.plan.broker_list,
                socket_timeout_ms=self.plan.socket_timeout_ms,
                socket_buffer_size=self.plan.socket_buffer_size,
            )
        return self._probe

    def _target_id(self, target: Target) -> int:
        i = self._target_index.get(target)
        if i is None:
            i = self._target_index[target] = len(self._targets)
            self._targets.append(target)
            self._pending.append(_Pending())
        return i

    def _check_topic(self, topic: str, row: int) -> None:
        if topic in self._valid_topics:
            return
        try:
            validate_topic_name(topic)
        except TopicNameError as e:
            raise _RowError(TopicNameError(f"{self._row_label(row)}: {e}")) from e
        self._valid_topics.add(topic)

    def _route(self, batch: pa.RecordBatch) -> None:
        lay = self.layout
        n = batch.num_rows
        base = self._rows_seen
        values = _as_binary(batch.column(lay.value))
        if values.null_count:
            row = int(np.flatnonzero(np.asarray(values.is_null()))[0])
            raise _RowError(
                SchemaError(
                    f"{self._row_label(base + row)}: value is null (a 0.7 message always has "
                    "a payload; write an empty value instead)"
                )
            )
        offsets = _value_offsets(values)
        if self.opts.codec == "none":
            self._check_sizes(batch, offsets, base)
        self._rows_seen += n
        if lay.topic is None and lay.key is None and lay.broker is None:
            assert self.opts.topic is not None
            self._route_random(self.opts.topic, values, base)
            return
        dest = np.empty(n, dtype=np.int64)
        for topic, rows in self._topic_groups(batch, base):
            self._assign(batch, topic, rows, dest, base)
        self._append_grouped(values, dest, base)

    def _check_sizes(
        self, batch: pa.RecordBatch, offsets: npt.NDArray[np.int64], base: int
    ) -> None:
        limit = message_limit(self.opts.max_message_size, self._max_request)
        lengths = np.diff(offsets)
        if len(lengths) and int(lengths.max()) > limit:
            row = int(np.flatnonzero(lengths > limit)[0])
            key = batch.column(self.layout.key)[row].as_py() if self.layout.key else None
            why = (
                f"over max.message.size ({limit}); a 0.7 broker would drop the whole message "
                "set silently"
                if limit == self.opts.max_message_size
                else f"over {limit}, the most one request can carry within a 0.7 broker's "
                "max.socket.request.bytes (100 MiB)"
            )
            raise _RowError(
                MessageTooLargeError(
                    f"{self._row_label(base + row, key)}: message payload is "
                    f"{int(lengths[row])} bytes, {why}"
                )
            )

    def _topic_groups(
        self, batch: pa.RecordBatch, base: int
    ) -> Iterator[tuple[str, npt.NDArray[np.int64] | None]]:
        """(topic, row indices or None for all rows) per distinct topic in the batch."""
        lay = self.layout
        if lay.topic is None:
            assert self.opts.topic is not None
            yield self.opts.topic, None
            return
        col = batch.column(lay.topic)
        if self.opts.topic is not None and col.null_count:
            col = pc.fill_null(col, self.opts.topic)
        if col.null_count:
            row = int(np.flatnonzero(np.asarray(col.is_null()))[0])
            raise _RowError(
                SchemaError(
                    f"{self._row_label(base + row)}: topic is null and there is no 'topic' option"
                )
            )
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

    def _assign(
        self,
        batch: pa.RecordBatch,
        topic: str,
        rows: npt.NDArray[np.int64] | None,
        dest: npt.NDArray[np.int64],
        base: int,
    ) -> None:
        """Fill ``dest[rows]`` with target ids for one topic's rows."""
        lay = self.layout
        bps = self._topic_partitions(topic)
        ids = self._dest_ids[topic]
        n = batch.num_rows if rows is None else len(rows)
        row_idx = np.arange(batch.num_rows, dtype=np.int64) if rows is None else rows
        out = np.full(n, -1, dtype=np.int64)

        def col(name: str) -> pa.Array:
            c = batch.column(name)
            return c if rows is None else c.take(pa.array(rows))

        if lay.broker is not None and lay.partition is not None:
            self._assign_explicit(topic, bps, col(lay.broker), col(lay.partition), out,
                                  row_idx, base)
        if lay.key is not None:
            keys = col(lay.key)
            todo = (out < 0) & np.asarray(keys.is_valid(), dtype=bool)
            if todo.any():
                sel = np.flatnonzero(todo)
                some = keys if len(sel) == n else keys.take(pa.array(sel))
                local = hash_partitions(some, len(bps))
                if len(local) and int(local.min()) < 0:
                    self._invalid_hash(some, local, sel, row_idx, base, len(bps))
                out[sel] = ids[local]
        rest = np.flatnonzero(out < 0)
        if len(rest):
            picks = random_partitions(len(rest), len(bps), self._rng, self.opts.batch_size)
            out[rest] = ids[picks]
        if rows is None:
            dest[:] = out
        else:
            dest[rows] = out

    def _invalid_hash(
        self,
        keys: pa.Array,
        local: npt.NDArray[np.int64],
        sel: npt.NDArray[np.int64],
        row_idx: npt.NDArray[np.int64],
        base: int,
        n: int,
    ) -> None:
        j = int(np.flatnonzero(local < 0)[0])
        key = keys[j].as_py()
        h = int(java_hashcodes(keys.slice(j, 1))[0])
        raise _RowError(
            InvalidPartitionError(
                f"{self._row_label(base + int(row_idx[sel[j]]), key)}: the key's Java hashCode "
                f"is {h} (Integer.MIN_VALUE), Math.abs leaves it negative and {h} % {n} = "
                f"{int(local[j])}; 0.7's DefaultPartitioner gives no partition for this key "
                "(its producer throws InvalidPartitionException). Route this row with explicit "
                "broker/partition columns or change its key"
            )
        )

    def _assign_explicit(
        self,
        topic: str,
        bps: tuple[tuple[int, int], ...],
        brokers: pa.Array,
        partitions: pa.Array,
        out: npt.NDArray[np.int64],
        row_idx: npt.NDArray[np.int64],
        base: int,
    ) -> None:
        b_valid = np.asarray(brokers.is_valid(), dtype=bool)
        p_valid = np.asarray(partitions.is_valid(), dtype=bool)
        half = b_valid ^ p_valid
        if half.any():
            i = int(np.flatnonzero(half)[0])
            raise _RowError(
                SchemaError(
                    f"{self._row_label(base + int(row_idx[i]))}: broker is "
                    f"{brokers[i].as_py()} but partition is {partitions[i].as_py()}; give both "
                    "or neither (null in both routes by key/random)"
                )
            )
        both = np.flatnonzero(b_valid & p_valid)
        if not len(both):
            return
        b = np.asarray(brokers.fill_null(0), dtype=np.int64)[both]
        p = np.asarray(partitions.fill_null(0), dtype=np.int64)[both]
        pairs, inverse = np.unique(np.stack([b, p], axis=1), axis=0, return_inverse=True)
        inverse = inverse.reshape(-1)
        registered: dict[int, int] = {}
        for bb, pp in bps:
            registered[bb] = max(registered.get(bb, 0), pp + 1)
        pair_ids = np.empty(len(pairs), dtype=np.int64)
        for k, (bb, pp) in enumerate(pairs.tolist()):
            problem = None
            if bb not in self.plan.brokers:
                problem = f"broker {bb} is not a live broker (live: {sorted(self.plan.brokers)})"
            elif not 0 <= pp <= _MAX_INT32:
                problem = f"partition {pp} is not a partition number"
            elif bb in registered and pp >= registered[bb]:
                problem = (
                    f"topic {topic!r} has {registered[bb]} partitions on broker {bb}; a 0.7 "
                    f"broker closes the connection on a PRODUCE to partition {pp}"
                )
            if problem is not None:
                i = int(both[int(np.flatnonzero(inverse == k)[0])])
                raise _RowError(
                    InvalidPartitionError(
                        f"{self._row_label(base + int(row_idx[i]))}: explicit target "
                        f"{bb}-{pp} of topic {topic!r}: {problem}"
                    )
                )
            pair_ids[k] = self._target_id((topic, int(bb), int(pp)))
        out[both] = pair_ids[inverse]

    # --- buffering and message sets -------------------------------------------------------

    def _route_random(self, topic: str, values: pa.Array, base: int) -> None:
        """Keyless rows of one topic: consecutive runs of batch.size rows, each run one set to
        a random broker-partition (no reordering, zero-copy slices)."""
        ids = self._dest_ids.get(topic)
        if ids is None:
            self._topic_partitions(topic)
            ids = self._dest_ids[topic]
        bs = self.opts.batch_size
        start = 0
        if self._carry is not None:
            carry, carry_base = self._carry
            need = bs - len(carry)
            head = pa.concat_arrays([carry, values.slice(0, need)])
            if len(head) < bs:
                self._carry = (head, carry_base)
                return
            self._carry = None
            self._emit_rows(int(self._rng.choice(ids)), head, carry_base)
            start = need
        n = len(values)
        while n - start >= bs:
            self._emit_rows(int(self._rng.choice(ids)), values.slice(start, bs), base + start)
            start += bs
        if start < n:
            self._carry = (_compact(values.slice(start)), base + start)

    def _emit_rows(self, target: int, values: pa.Array, first_row: int) -> None:
        rows = np.arange(first_row, first_row + len(values), dtype=np.int64)
        for lo, hi in self._cut(target, values, 0, len(values)):
            self._emit(target, values.slice(lo, hi - lo), rows[lo:hi])

    def _append_grouped(
        self, values: pa.Array, dest: npt.NDArray[np.int64], base: int
    ) -> None:
        rows = np.arange(base, base + len(values), dtype=np.int64)
        if len(dest) and (dest == dest[0]).all():
            self._append(int(dest[0]), values, rows)
            return
        order = np.argsort(dest, kind="stable")
        sorted_dest = dest[order]
        taken = values.take(pa.array(order))
        starts = np.flatnonzero(np.diff(sorted_dest)) + 1
        bounds = [0, *starts.tolist(), len(order)]
        for lo, hi in itertools.pairwise(bounds):
            self._append(int(sorted_dest[lo]), taken.slice(lo, hi - lo), rows[order[lo:hi]])

    def _append(self, target: int, values: pa.Array, rows: npt.NDArray[np.int64]) -> None:
        pend = self._pending[target]
        if pend.count + len(values) < self.opts.batch_size:
            # It waits for more rows: keep a compact copy, not a view that would hold the
            # whole Arrow batch in memory (with many partitions, that would be many batches).
            values, rows = _compact(values), rows.copy()
        pend.chunks.append(values)
        pend.rows.append(rows)
        pend.count += len(values)
        if pend.count >= self.opts.batch_size:
            self._drain(target, final=False)

    def _drain(self, target: int, *, final: bool) -> None:
        pend = self._pending[target]
        if not pend.count:
            return
        values = pend.chunks[0] if len(pend.chunks) == 1 else pa.concat_arrays(pend.chunks)
        rows = pend.rows[0] if len(pend.rows) == 1 else np.concatenate(pend.rows)
        end = len(values) if final else len(values) - len(values) % self.opts.batch_size
        cuts = list(self._cut(target, values, 0, end))
        if cuts:
            # every set of this flush in one encoder call (no per-set Python loop over rows)
            bounds = [lo for lo, _ in cuts] + [cuts[-1][1]]
            sets = self._encode_many(values, bounds, compression=self.opts.codec)
            for (lo, hi), data in zip(cuts, sets, strict=True):
                self._emit(target, values.slice(lo, hi - lo), rows[lo:hi], data)
        if end < len(values):
            pend.chunks = [_compact(values.slice(end))]
            pend.rows = [rows[end:].copy()]
            pend.count = len(values) - end
        else:
            pend.chunks, pend.rows, pend.count = [], [], 0

    def _cut(self, target: int, values: pa.Array, lo: int, hi: int) -> Iterator[tuple[int, int]]:
        """[lo, hi) in runs of batch.size rows; uncompressed, also runs whose encoded set fits
        one request; compressed, runs of at most MAX_COMPRESS_INPUT payload bytes."""
        offsets = _value_offsets(values)
        if self.opts.codec == "none":
            limit = set_limit(self._max_request, self._targets[target][0])
            return cut_runs(offsets, lo, hi, self.opts.batch_size, limit, MESSAGE_OVERHEAD)
        return cut_runs(offsets, lo, hi, self.opts.batch_size, MAX_COMPRESS_INPUT)

    def _emit(
        self,
        target: int,
        values: pa.Array,
        rows: npt.NDArray[np.int64],
        data: bytes | None = None,
    ) -> None:
        """Queue one message set, ``data`` if already encoded (split in halves if its wrapper
        is too large)."""
        if data is None:
            data = self._encode(values, compression=self.opts.codec)
        topic, b, p = self._targets[target]
        payload = len(data) - MESSAGE_OVERHEAD
        wrapper_over = self.opts.codec != "none" and payload > self.opts.max_message_size
        if wrapper_over or len(data) > set_limit(self._max_request, topic):
            if len(values) > 1:
                half = len(values) // 2
                self._emit(target, values.slice(0, half), rows[:half])
                self._emit(target, values.slice(half), rows[half:])
                return
            what = (
                f"its {self.opts.codec} wrapper message" if self.opts.codec != "none"
                else "its message"
            )
            raw = (
                f" ({len(values[0].as_py())} bytes before compression)"
                if self.opts.codec != "none" else ""
            )
            limit = (
                f"over max.message.size ({self.opts.max_message_size}); a 0.7 broker would "
                "drop it silently" if wrapper_over
                else f"more than one request can carry ({self._max_request} bytes)"
            )
            raise _RowError(
                MessageTooLargeError(
                    f"{self._row_label(int(rows[0]))}: {what} for topic {topic!r} "
                    f"broker-partition {b}-{p} has a {payload}-byte payload{raw}, {limit}"
                )
            )
        self._queue(target, data, len(values))

    # --- I/O ------------------------------------------------------------------------------

    def _producer(self) -> Producer:
        if self._prod is None:
            self._prod = Producer(
                self.plan.brokers,
                timeout=self.plan.socket_timeout_ms / 1000.0,
                retries=self.plan.connect_retries,
                backoff=self.plan.connect_backoff,
                buffer_size=self.plan.socket_buffer_size,
                max_request_size=self._max_request,
                # wait for a lazily flushing broker's log end as long as for an answer
                check_appends=self.plan.socket_timeout_ms / 1000.0,
            )
        return self._prod

    def _queue(self, target: int, data: bytes, messages: int) -> None:
        topic, broker, partition = self._targets[target]
        try:
            self._producer().send(broker, topic, partition, data)
        except RequestTooLargeError as e:  # only a message set of one huge message
            raise _RowError(MessageTooLargeError(f"{topic}/{broker}-{partition}: {e}")) from e
        except BrokerConnectionError as e:
            raise self._delivery_failure(e) from e
        c = self._handed.setdefault(target, [0, 0, 0])
        c[0] += messages
        c[1] += len(data)
        c[2] += 1

    def _flush_all(self) -> None:
        if self._carry is not None:
            carry, first_row = self._carry
            self._carry = None
            assert self.opts.topic is not None
            ids = self._dest_ids[self.opts.topic]
            self._emit_rows(int(self._rng.choice(ids)), carry, first_row)
        for target in range(len(self._pending)):
            self._drain(target, final=True)

    def _confirm(self, after: str | None = None) -> AppendShortfallError | None:
        """Send what is buffered and run the delivery barrier on every connection used.

        Returns the error for partitions whose log grew less than was sent (the broker dropped
        data; reported in the commit message: a Spark retry would only be dropped again)."""
        if self._prod is None:
            return None
        try:
            confirmed = self._prod.flush()
        except AppendShortfallError as e:
            self._record_confirmed(e.confirmed)
            short = AppendShortfallError(f"{self.task}: {e}")
            log.error("%s", short)
            return short
        except BrokerConnectionError as e:
            raise self._delivery_failure(e, after=after) from e
        self._record_confirmed(confirmed)
        return None

    def _record_confirmed(self, confirmed: Mapping[Target, tuple[int, int]]) -> None:
        for key, (sets, nbytes) in confirmed.items():
            target = self._target_index[key]
            handed = self._handed.get(target, [0, 0, 0])
            # Sets are confirmed in the order they were handed over, all at once per flush:
            # a flush that returns confirms everything handed to the producer for that key.
            c = self._confirmed.setdefault(target, [0, 0, 0])
            c[0], c[1], c[2] = handed[0], c[1] + nbytes, c[2] + sets

    def _delivery_failure(
        self, e: BrokerConnectionError, after: str | None = None
    ) -> BrokerConnectionError:
        """The task's error for a lost connection: what is confirmed, what may be lost."""
        unconfirmed = getattr(e, "unconfirmed", None) or {}
        confirmed = getattr(e, "confirmed", None) or {}
        if self._prod is not None and not after:
            # Confirm what the other brokers have, so the report is exact.
            try:
                more = self._prod.flush()
            except BrokerConnectionError as e2:
                unconfirmed = {**unconfirmed, **(getattr(e2, "unconfirmed", None) or {})}
                more = getattr(e2, "confirmed", None) or {}
            confirmed = {**confirmed, **more}
        self._record_confirmed(confirmed)
        text = (
            f"{self.task}: {e}. Confirmed written before the failure: "
            f"{_fmt_written(self._written())}. Not confirmed (may or may not be in Kafka): "
            f"{_fmt_sets(unconfirmed)}. Spark retries the task; the retry writes its rows "
            "again (at-least-once: duplicates possible, nothing silently lost)"
        )
        if after:
            text += f". The task had stopped at a bad row: {after}"
        log.error("%s", text)
        return errors.DeliveryError(text, unconfirmed=dict(unconfirmed), confirmed=dict(confirmed))


def _fmt_sets(counts: Mapping[Target, tuple[int, int]]) -> str:
    if not counts:
        return "nothing"
    return ", ".join(
        f"topic {t!r} {b}-{p}: {sets} message sets, {nbytes} bytes"
        for (t, b, p), (sets, nbytes) in sorted(counts.items())
    )


# --- the Spark faces ----------------------------------------------------------------------


def _task_label() -> str:
    try:
        from pyspark import TaskContext

        ctx = TaskContext.get()
    except Exception:  # pragma: no cover - no Spark on this path
        ctx = None
    if ctx is None:
        return "write task"
    return (
        f"write task for Spark partition {ctx.partitionId()} (stage {ctx.stageId()}, "
        f"attempt {ctx.attemptNumber()})"
    )


class Kafka07BatchWriter(DataSourceArrowWriter):
    """``df.write.format("kafka07")``: Arrow batches in, 0.7 MULTIPRODUCE out."""

    def __init__(self, options: dict[str, str], schema: StructType, overwrite: bool) -> None:
        if overwrite:
            raise OptionError(
                "mode",
                "overwrite is not possible: Kafka 0.7 topics are append-only logs; use "
                "mode('append')",
            )
        self.plan = build_plan(options, schema)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> Kafka07CommitMessage:
        return TaskWriter(self.plan, task=_task_label()).write(iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        commit_job(messages, "write")

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        abort_job(messages, "write")


class Kafka07StreamWriter(DataSourceStreamArrowWriter):
    """``df.writeStream.format("kafka07")``: the same engine per micro-batch.

    Spark creates this writer on the driver for every micro-batch (and again to commit it),
    so the plan - live brokers, partitions per topic - is refreshed from the registry each
    micro-batch: a topic written for the first time to partition 0 of every broker is written
    to all its partitions once the brokers have registered them.
    """

    def __init__(self, options: dict[str, str], schema: StructType, overwrite: bool) -> None:
        # overwrite is Spark's "complete" output mode: every row of the result is appended to
        # the topic each micro-batch, as Spark's Kafka sink does.
        self.plan = build_plan(options, schema)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> Kafka07CommitMessage:
        return TaskWriter(self.plan, task=_task_label()).write(iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        commit_job(messages, f"micro-batch {batchId}")

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        abort_job(messages, f"micro-batch {batchId}")


__all__ = [
    "Kafka07BatchWriter",
    "Kafka07CommitMessage",
    "Kafka07StreamWriter",
    "TaskWriter",
    "WritePlan",
    "build_plan",
    "resolve_plan",
]
