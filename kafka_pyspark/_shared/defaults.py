"""The one home of every option default (docs/reading.md, docs/writing.md; 0.7.2's own defaults
where 0.7 has the option: docs/dev/PROTOCOL.md "Measured: config defaults").

Pure constants, importing nothing: the option parsers (:mod:`kafka_pyspark._options`), the
cluster and registry, the client, the decoders and the embedded broker all take their defaults
from here, so a default changed here is changed everywhere (and in ``docs/``, which
``tests/test_docs_options.py`` checks against the parsers).
"""

from __future__ import annotations

# --- the cluster (every mode) ------------------------------------------------------------------

#: ``zk.sessiontimeout.ms`` (0.7.2 consumer default)
ZK_SESSION_TIMEOUT_MS = 6000
#: ``zk.connectiontimeout.ms`` (0.7.2 consumer default)
ZK_CONNECTION_TIMEOUT_MS = 6000
#: ``socket.timeout.ms`` (0.7.2 consumer default): every broker socket call is bounded by it
SOCKET_TIMEOUT_MS = 30000
#: ``socket.buffersize`` (0.7.2 consumer default, bytes)
SOCKET_BUFFER_SIZE = 65536
#: the least a write task's broker sockets buffer (bytes; a larger ``socket.buffersize`` is kept):
#: larger buffers cost the sender more CPU per byte on loopback, smaller ones limit what can be
#: in flight to a remote broker (docs/writing.md, "Socket buffers")
WRITE_SOCKET_BUFFER_SIZE = 256 << 10

# --- reading -----------------------------------------------------------------------------------

#: ``fetch.size`` (0.7.2 consumer default): bytes asked per FETCH
FETCH_SIZE = 1 << 20
#: ``max.fetch.size``: the most a FETCH grows to for one large message
MAX_FETCH_SIZE = 100 << 20
#: ``max.decompressed.size``: the most one compressed wrapper may inflate to
MAX_DECOMPRESSED_SIZE = 64 << 20
#: Arrow batches an executor hands to Spark: consecutive fetch answers of one range are combined
#: up to this many rows (Spark pays a fixed cost per batch; an answer of a quarter of it or more
#: goes alone)
BATCH_ROWS = 65536
#: ... and up to this many bytes, which with the fetch size bounds a task's memory
BATCH_BYTES = 16 << 20
#: ``zk.outage.max.ms``: how long a stream goes on without ZooKeeper (docs/streaming.md)
ZK_OUTAGE_MAX_MS = 600_000

# --- writing (0.7.2 producer defaults) ---------------------------------------------------------

#: ``batch.size``: most messages per message set
BATCH_SIZE = 200
#: ``max.message.size``: the largest message payload a 0.7.2 broker (and producer) accepts
MAX_MESSAGE_SIZE = 1_000_000

# --- exactly-once writing (docs/writing.md "Exactly once") -------------------------------------

#: ``delivery.zk.root``: where the sink's records live, under the ``zk.connect`` chroot
DELIVERY_ZK_ROOT = "/kafka_pyspark/sinks"
#: ``delivery.lock.timeout.ms``: how long a second attempt of a task waits for the first's lock
#: (a killed holder's ephemeral lock goes with its ZooKeeper session, ``zk.sessiontimeout.ms``)
DELIVERY_LOCK_TIMEOUT_MS = 60_000
#: ``delivery.visibility.wait.ms``: how long after taking the lock a retry waits for message
#: sets an earlier attempt sent to become readable before sending them again. 0.7.2 flushes a
#: log every ``log.default.flush.interval.ms`` (3000), checked by a scheduler every
#: ``log.default.flush.scheduler.interval.ms`` (3000), and serves only flushed bytes: appended
#: data is readable within ~6 s; one more second of margin.
DELIVERY_VISIBILITY_WAIT_MS = 7_000
