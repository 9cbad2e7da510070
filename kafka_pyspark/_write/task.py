"""One write task (:class:`TaskWriter`): Arrow batches in, confirmed message sets out.

Per batch: check the values (no nulls, no message over the limit), route the rows
(:mod:`.route`), buffer and cut message sets (:mod:`.sets`), hand them to the
:class:`~kafka_pyspark.client.Producer` (MULTIPRODUCE per broker); at the end, the delivery
barrier on every connection used, and a :class:`~.report.WriteReport`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from kafka_pyspark import errors
from kafka_pyspark._shared import defaults
from kafka_pyspark._shared.partition_key import TopicPartition
from kafka_pyspark._write.delivery import WINDOW_BYTES, ExactlyOnce
from kafka_pyspark._write.digest import SetDigest
from kafka_pyspark._write.identity import TaskIdentity
from kafka_pyspark._write.plan import WritePlan
from kafka_pyspark._write.report import WriteReport, fmt_sets, fmt_written
from kafka_pyspark._write.route import Router
from kafka_pyspark._write.rows import (
    RowError,
    Targets,
    as_binary,
    row_label,
    value_offsets,
)
from kafka_pyspark._write.sets import SetBuilder
from kafka_pyspark._write.sizes import SizeLimits
from kafka_pyspark._write.store import open_store
from kafka_pyspark.client import Producer
from kafka_pyspark.errors import (
    AppendShortfallError,
    BrokerConnectionError,
    KafkaError,
    SchemaError,
    with_context,
)

log = logging.getLogger(__name__)

#: most input bytes (Arrow) an exactly-once task reads ahead while the store answers its claim:
#: about one window, which it holds anyway once writing
CLAIM_AHEAD_BYTES = WINDOW_BYTES


@dataclass
class _Tally:
    """What one target got so far: messages, message-set bytes, message sets."""

    messages: int = 0
    nbytes: int = 0
    sets: int = 0


def _count(tallies: dict[int, _Tally], target: int, messages: int, nbytes: int) -> None:
    """One more message set of ``messages`` messages and ``nbytes`` bytes for ``target``."""
    tally = tallies.get(target)
    if tally is None:
        tally = tallies[target] = _Tally()
    tally.messages += messages
    tally.nbytes += nbytes
    tally.sets += 1


class TaskWriter:
    """One write task: routes, batches, compresses, sends, confirms. Not thread-safe.

    Usable without Spark (tests, the benchmark, ``kafka07 produce``):
    ``TaskWriter(plan).write(batches)``.
    """

    def __init__(self, plan: WritePlan, *, task: str = "write task", seed: int | None = None,
                 identity: TaskIdentity | None = None) -> None:
        """``identity``: the task's (sink, batch, partition); with it and
        ``delivery.guarantee=exactly-once`` the task writes exactly once (:mod:`.delivery`),
        its keyless rows routed by runs seeded from it."""
        self.plan = plan
        self.opts = plan.options
        self.layout = plan.layout
        self.task = task
        self.identity = identity if self.opts.delivery.exactly_once else None
        if self.identity is not None and seed is None:
            seed = self.identity.seed
        self._rows_seen = 0
        self._targets = Targets()
        self._router = Router(plan, self._targets, np.random.default_rng(seed), task)
        # every message set must fit in one request (sizes.py)
        self._limits = SizeLimits.of(self.opts.max_message_size)
        self._sets = SetBuilder(self.opts, self._targets, self._limits, self._queue,
                                lambda row: row_label(task, row),
                                digests=self.identity is not None)
        self._prod: Producer | None = None
        self._handed: dict[int, _Tally] = {}  # target -> handed to the producer
        self._confirmed: dict[int, _Tally] = {}  # target -> confirmed
        self._earlier: dict[int, _Tally] = {}  # target -> landed by an earlier attempt
        self._once: ExactlyOnce | None = None

    # --- public --------------------------------------------------------------------------

    def write(self, batches: Iterable[pa.RecordBatch]) -> WriteReport:
        try:
            try:
                more = iter(batches)
                for batch in more:
                    if batch.num_rows:
                        ahead = [batch]
                        if self.identity is not None and self._once is None:
                            done = self._begin(self.identity, more, ahead)
                            if done is not None:
                                return done
                        for one in ahead:
                            self._add(one)
                self._sets.flush()
                if self._once is not None:
                    self._once.end_of_input()
            except RowError as e:
                # Stop here: confirm what was handed to the producer, report.
                if self._once is not None:
                    self._once.flush()  # recorded and sent: a re-run stops at the same row
                short = self._confirm(after=str(e))
                log.error("%s stopped at a bad row: %s", self.task, e)
                if short is not None:
                    return self._result(
                        error=with_context(short, then=f". The task had also stopped at a bad "
                                           f"row: {e}")
                    )
                return self._result(error=e.error)
            short = self._confirm()
            if short is None and self._once is not None:
                self._once.finish(self._rows_seen, self._written())
            return self._result(error=short)
        finally:
            self.close()

    def close(self) -> None:
        if self._once is not None:
            self._once.close()
        if self._prod is not None:
            self._prod.close()
            self._prod = None
        self._router.close()

    # --- results -------------------------------------------------------------------------

    def _written(self) -> dict[TopicPartition, tuple[int, int, int]]:
        out: dict[TopicPartition, tuple[int, int, int]] = {}
        for tallies in (self._confirmed, self._earlier):
            for i, t in tallies.items():
                if t.messages:
                    m, n, s = out.get(self._targets[i], (0, 0, 0))
                    out[self._targets[i]] = (m + t.messages, n + t.nbytes, s + t.sets)
        return out

    def _result(
        self, error: KafkaError | None = None, *, rows: int | None = None,
        written: dict[TopicPartition, tuple[int, int, int]] | None = None,
    ) -> WriteReport:
        ident = self.identity
        return WriteReport(
            task=self.task,
            rows=self._rows_seen if rows is None else rows,
            written=self._written() if written is None else written,
            failure=error,
            sink=None if ident is None else (ident.sink, ident.batch),
            records=() if self._once is None else self._once.records(),
        )

    # --- one batch -----------------------------------------------------------------------

    def _add(self, batch: pa.RecordBatch) -> None:
        lay = self.layout
        base = self._rows_seen
        values = as_binary(batch.column(lay.value))
        if values.null_count:
            row = int(np.flatnonzero(np.asarray(values.is_null()))[0])
            raise RowError(SchemaError(
                f"{row_label(self.task, base + row)}: value is null (a 0.7 message always has "
                "a payload; write an empty value instead)"
            ))
        if self.opts.codec == "none":
            self._check_sizes(batch, value_offsets(values), base)
        self._rows_seen += batch.num_rows
        if lay.topic is None and lay.key is None and lay.broker is None:
            assert self.opts.topic is not None
            targets, bounds = self._router.keyless_runs(self.opts.topic, batch.num_rows)
            self._sets.add_runs(values, targets, bounds, base)
        else:
            self._sets.add_grouped(values, self._router.route(batch, base), base)

    def _check_sizes(
        self, batch: pa.RecordBatch, offsets: npt.NDArray[np.int64], base: int
    ) -> None:
        lengths = np.diff(offsets)
        if not len(lengths) or not self._limits.message_over(int(lengths.max())):
            return
        row = int(np.flatnonzero(lengths > self._limits.payload_limit())[0])
        key = batch.column(self.layout.key)[row].as_py() if self.layout.key else None
        raise RowError(self._limits.too_large(
            row_label(self.task, base + row, key), "its message", int(lengths[row])
        ))

    # --- I/O ------------------------------------------------------------------------------

    def _producer(self) -> Producer:
        """The task's producer. Its sockets buffer :data:`~defaults.WRITE_SOCKET_BUFFER_SIZE`
        (or a larger ``socket.buffersize``), less than a request: buffers that take a whole
        request at once cost the sender more CPU per byte (docs/writing.md, "Socket buffers")."""
        if self._prod is None:
            self._prod = Producer(
                self.plan.brokers,
                timeout=self.plan.cluster.socket_timeout_ms / 1000.0,
                retries=self.plan.connect_retries,
                backoff=self.plan.connect_backoff,
                buffer_size=max(self.plan.cluster.socket_buffer_size,
                                defaults.WRITE_SOCKET_BUFFER_SIZE),
                max_request_size=self._limits.request_bytes,
                # wait for a lazily flushing broker's log end as long as for an answer
                check_appends=self.plan.cluster.socket_timeout_ms / 1000.0,
                before_write=self._before_write,
            )
        return self._prod

    def _before_write(self) -> None:
        """Exactly-once: the lock checked with the store before any bytes go to a broker."""
        if self._once is not None:
            self._once.before_write()

    def _begin(self, ident: TaskIdentity, more: Iterator[pa.RecordBatch],
               ahead: list[pa.RecordBatch]) -> WriteReport | None:
        """Exactly-once, before the first row is routed (a task without rows never touches
        the store): the lock, and the commit message again if the task was done. While the
        store answers the claim, input batches are read from ``more`` into ``ahead`` (up to
        :data:`CLAIM_AHEAD_BYTES`): Spark goes on making rows instead of waiting for the task."""
        self._once = self._exactly_once(ident)
        self._once.start()
        held = sum(b.nbytes for b in ahead)
        while held < CLAIM_AHEAD_BYTES and not self._once.claim_answered():
            batch = next(more, None)
            if batch is None:
                break
            if batch.num_rows:
                ahead.append(batch)
                held += batch.nbytes
        done = self._once.begin()
        self._router.pinned = self._once.pinned
        self._once.resolved = self._router.take_resolved
        if done is None:
            return None
        log.info("%s: %s was written before; nothing sent again", self.task, ident.describe())
        return self._result(rows=done.rows, written=done.written)

    def _exactly_once(self, ident: TaskIdentity) -> ExactlyOnce:
        d = self.opts.delivery
        store = open_store(self.plan.cluster, d.zk_root, d.store)
        once = ExactlyOnce(store, ident, d, self._targets, self._send, self._producer,
                           self._landed_earlier, defaults.MAX_DECOMPRESSED_SIZE)
        once.retry_note = self.plan.retry_note
        return once

    def _landed_earlier(self, target: int, messages: int, nbytes: int) -> None:
        _count(self._earlier, target, messages, nbytes)

    def _queue(self, targets: list[int], sets: list[bytes | memoryview], counts: list[int],
               digests: list[SetDigest] | None) -> None:
        if self._once is not None:
            assert digests is not None
            self._once.add(targets, sets, counts, digests)
        else:
            self._send(targets, sets, counts)

    def _send(self, targets: list[int], sets: list[bytes | memoryview],
              counts: list[int]) -> None:
        """Hand message sets to the producer, in order, and count them per target."""
        prod, keys, handed = self._producer(), self._targets.keys(), self._handed
        try:
            for target, data, messages in zip(targets, sets, counts, strict=True):
                topic, broker, partition = keys[target]
                # SetBuilder cut every set to fit one request: the producer's size check holds
                prod.send(broker, topic, partition, data)
                _count(handed, target, messages, len(data))
        except BrokerConnectionError as e:
            raise self._delivery_failure(e) from e

    def _confirm(self, after: str | None = None) -> AppendShortfallError | None:
        """Send what is buffered and run the delivery barrier on every connection used.

        Returns the error for partitions whose log grew less than was sent (the broker dropped
        data; reported in the task's report: a Spark retry would only be dropped again)."""
        if self._prod is None:
            return None
        try:
            confirmed = self._prod.flush()
        except AppendShortfallError as e:
            self._record_confirmed(e.confirmed)
            short = with_context(e, self.task)
            log.error("%s", short)
            return short
        except BrokerConnectionError as e:
            raise self._delivery_failure(e, after=after) from e
        self._record_confirmed(confirmed)
        return None

    def _record_confirmed(self, confirmed: Mapping[TopicPartition, tuple[int, int]]) -> None:
        for key, (sets, nbytes) in confirmed.items():
            target = self._targets.id(key)
            handed = self._handed.get(target, _Tally())
            # Sets are confirmed in the order they were handed over, all at once per flush:
            # a flush that returns confirms everything handed to the producer for that key.
            done = self._confirmed.setdefault(target, _Tally())
            done.messages = handed.messages
            done.nbytes += nbytes
            done.sets += sets

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
            f"{fmt_written(self._written())}. Not confirmed (may or may not be in Kafka): "
            f"{fmt_sets(unconfirmed)}. {self.plan.retry_note}"
        )
        if after:
            text += f". The task had stopped at a bad row: {after}"
        log.error("%s", text)
        return errors.DeliveryError(text, unconfirmed=dict(unconfirmed), confirmed=dict(confirmed))
