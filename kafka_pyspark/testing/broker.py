"""An embedded, single-node Kafka 0.7.2 broker: real sockets, real segment files, ZooKeeper.

::

    with EmbeddedBroker(log_dir=tmp, zk_connect="127.0.0.1:2181/chroot", num_partitions=2) as b:
        ...  # b.host, b.port; PRODUCE/FETCH/MULTIFETCH/MULTIPRODUCE/OFFSETS as 0.7.2

CLI (runs until SIGINT/SIGTERM)::

    python -m kafka_pyspark.testing.broker --port 9092 --log-dir /tmp/kafka-logs \\
        --broker-id 0 --zk 127.0.0.1:2181/chroot --partitions 2

Behaviour follows what a real 0.7.2 broker answered (``BROKER-FACTS.md``) and 0.7.2's own
request handling; ``docs/broker.md`` lists it, and every place this broker differs and why.
Requests are decoded with :mod:`kafka_pyspark.wire`, message sets validated with
:func:`kafka_pyspark.messages.decode_message_set`, data kept by :mod:`.log`. The broker does not
use :mod:`kafka_pyspark.client` (the code it is meant to test).

Threads: one accepting, one per connection (requests on a connection are answered in order),
one flushing on a timer (only when ``flush_interval > 1``), one ZooKeeper registrar.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import logging
import os
import queue
import random
import select
import shutil
import signal
import socket
import struct
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import FrameType
from typing import Any

from kafka_pyspark import wire
from kafka_pyspark._closing import Service
from kafka_pyspark.errors import (
    KafkaError,
    MessageError,
    OffsetOutOfRangeError,
    OptionError,
    ProtocolError,
    TopicNameError,
)
from kafka_pyspark.messages import decode_message_set
from kafka_pyspark.messages.layout import LENGTH, MIN_LENGTH_BY_MAGIC
from kafka_pyspark.testing.log import (
    OFFSETS_EARLIEST,
    OFFSETS_LATEST,
    LogStore,
    PartitionLog,
    ReadSlice,
    parse_segment_file_name,
    partition_dir_name,
)

log = logging.getLogger(__name__)

__all__ = ["EmbeddedBroker", "EmbeddedBrokerError", "main"]

# 0.7.2 error codes (kafka.common.ErrorMapping)
_NO_ERROR = 0
_UNKNOWN = -1
_OFFSET_OUT_OF_RANGE = 1
_WRONG_PARTITION = 3

_RANDOM_PARTITION = -1  # PRODUCE partition -1: the broker picks one
_REQUEST_LENGTH = struct.Struct(">i")  # int32 REQUEST_LENGTH (excludes itself)
_RECV_CHUNK = 1 << 20
_MAX_DECOMPRESSED = 256 << 20  # bound on one produced set's inflated size (memory guard)
_JOIN_TIMEOUT = 5.0
_MSG_MORE = getattr(socket, "MSG_MORE", 0)


class EmbeddedBrokerError(KafkaError, RuntimeError):
    """The embedded broker could not start (port, log directory, ZooKeeper registration)."""


class _CloseConnection(Exception):
    """Internal: drop the connection (0.7.2 closes it when a request handler throws)."""


# --- request framing -----------------------------------------------------------------------


class _RequestReader:
    """Reads whole request frames from a socket, buffering pipelined requests.

    A connection may idle between requests indefinitely (as in 0.7.2), but a request that has
    started must arrive whole within ``deadline`` seconds of its first byte (of the moment the
    previous one was taken, for a pipelined request), however its bytes trickle; otherwise
    the connection is closed, so a stuck or hostile peer cannot hold a thread.
    """

    __slots__ = ("_buf", "_deadline", "_max", "_sock", "_started", "_stopping")

    def __init__(self, sock: socket.socket, max_size: int, stopping: threading.Event,
                 deadline: float) -> None:
        self._sock = sock
        self._max = max_size
        self._buf = bytearray()
        self._stopping = stopping
        self._deadline = deadline
        self._started = 0.0  # monotonic time the current request began (buffer non-empty)

    def _fill(self, need: int) -> bool:
        """Buffer at least ``need`` bytes; False at a clean end of stream between requests."""
        while len(self._buf) < need:
            between_requests = not self._buf
            left = self._deadline
            if not between_requests:
                left = self._started + self._deadline - time.monotonic()
                if left <= 0:
                    raise _CloseConnection(
                        f"request not received whole within {self._deadline:g} s "
                        f"({len(self._buf)} of {need} bytes)"
                    )
                if left < self._deadline:
                    self._sock.settimeout(left)
            try:
                chunk = self._sock.recv(min(_RECV_CHUNK, max(65536, need - len(self._buf))))
            except TimeoutError:
                if self._stopping.is_set():
                    raise
                # idle: may stay open indefinitely, as in 0.7.2; in a request: the deadline
                # check above closes the connection
                continue
            finally:
                if left < self._deadline:
                    self._sock.settimeout(self._deadline)
            if not chunk:
                if between_requests:
                    return False
                raise _CloseConnection("peer closed the connection in the middle of a request")
            if between_requests:
                self._started = time.monotonic()
            self._buf += chunk
        return True

    def read(self) -> bytes | None:
        """The next request body, or None at a clean end of stream."""
        if self._buf:
            self._started = time.monotonic()  # a pipelined request: its clock starts now
        if not self._fill(4):
            return None
        (size,) = _REQUEST_LENGTH.unpack_from(self._buf, 0)
        if size <= 0 or size > self._max:
            # 0.7.2 BoundedByteBufferReceive: InvalidRequestException, connection closed
            raise _CloseConnection(f"request size {size} outside 1..{self._max}")
        self._fill(4 + size)
        with memoryview(self._buf) as view:
            body = bytes(view[4 : 4 + size])  # one copy (a bytearray slice would be another)
        del self._buf[: 4 + size]
        return body


# --- sending -------------------------------------------------------------------------------


def _wait_writable(sock: socket.socket) -> None:
    timeout = sock.gettimeout()
    poller = select.poll()
    poller.register(sock.fileno(), select.POLLOUT)
    if not poller.poll(None if timeout is None else int(timeout * 1000)):
        raise TimeoutError("timed out sending a response")


def _send_slice(sock: socket.socket, piece: ReadSlice) -> None:
    """Send ``piece`` straight from its segment file with ``os.sendfile``.

    Falls back to positional reads + ``sendall`` where ``sendfile`` is not available.
    """
    fd = piece.open()
    try:
        _send_fd(sock, fd, piece)
    finally:
        os.close(fd)


def _send_fd(sock: socket.socket, fd: int, piece: ReadSlice) -> None:
    position, remaining = piece.position, piece.length
    if hasattr(os, "sendfile"):
        out = sock.fileno()
        while remaining > 0:
            try:
                n = os.sendfile(out, fd, position, remaining)
            except BlockingIOError:
                _wait_writable(sock)
                continue
            except OSError as e:
                if e.errno in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP) and (
                    position == piece.position
                ):
                    break  # not supported for this pair of descriptors: fall back
                raise
            if n == 0:
                raise _CloseConnection(f"{piece.segment.path} is shorter than announced")
            position += n
            remaining -= n
    while remaining > 0:
        chunk = os.pread(fd, min(remaining, _RECV_CHUNK), position)
        if not chunk:
            raise _CloseConnection(f"{piece.segment.path} is shorter than announced")
        sock.sendall(chunk)
        position += len(chunk)
        remaining -= len(chunk)


# --- message set checks --------------------------------------------------------------------


def _oversized(data: bytes, max_message_size: int) -> tuple[int, int] | None:
    """(offset, payload size) of the first whole message whose payload exceeds the limit.

    0.7.2 ``verifyMessageSize`` (shallow): such a set is dropped with a log line only.
    Malformed headers are left to the full validation that follows.
    """
    if len(data) - 4 - min(MIN_LENGTH_BY_MAGIC.values()) <= max_message_size:
        return None  # no payload in this set can be that large
    pos, end = 0, len(data)
    while pos + 4 <= end:
        (length,) = LENGTH.unpack_from(data, pos)
        if length < 1 or pos + 4 + length > end:
            return None
        header = MIN_LENGTH_BY_MAGIC.get(data[pos + 4])
        if header is None:
            return None
        if length - header > max_message_size:
            return pos, length - header
        pos += 4 + length
    return None


class _Rejected(Exception):
    """Internal: a produced message set 0.7.2 would refuse (connection closed)."""


def _validate(data: bytes) -> tuple[int, int]:
    """(bytes of whole valid messages, message count incl. inner ones) or :class:`_Rejected`.

    0.7.2 ``Log.append``: every message is checked deep (CRC at each level, known magic and
    codec, decompressible); a truncated *trailing* message is dropped silently, but a set
    whose *first* message is truncated is refused (``InvalidMessageSizeException``).
    """
    try:
        result = decode_message_set(
            data, 0, verify_crc=True, max_decompressed_size=_MAX_DECOMPRESSED
        )
    except MessageError as e:
        raise _Rejected(str(e)) from e
    if result.bytes_consumed == 0 and result.partial_size is not None:
        raise _Rejected(
            f"first message is {result.partial_size} bytes but only {len(data)} were sent"
        )
    return result.bytes_consumed, result.batch.num_rows


# --- ZooKeeper registry --------------------------------------------------------------------


class _ZkRegistrar:
    """0.7.2 ``KafkaZooKeeper``: ``/brokers/ids/<id>`` and ``/brokers/topics/<t>/<id>``.

    Both ephemeral. The broker node is written at start; topic nodes for every topic on disk
    at start (synchronously) and for a new topic on its first produce (by a worker thread).
    After a session expiry everything is registered again on the new session.
    """

    def __init__(
        self,
        zk_connect: str,
        *,
        broker_id: int,
        host: str,
        port: int,
        session_timeout: float,
        connection_timeout: float,
    ) -> None:
        from kazoo.client import KazooClient

        self._broker_id = broker_id
        self._host = host
        self._port = port
        self._session_timeout = session_timeout
        self._connection_timeout = connection_timeout
        self._op_timeout = max(session_timeout, connection_timeout) + 1.0
        try:
            self._client = KazooClient(
                hosts=zk_connect,
                timeout=session_timeout,
                connection_retry={"max_tries": -1, "delay": 0.1, "max_delay": 1.0},
            )
        except Exception as e:  # kazoo: ValueError etc. for a malformed connect string
            raise EmbeddedBrokerError(f"bad ZooKeeper connect string {zk_connect!r}: {e}") from e
        self._queue: queue.Queue[tuple[str, int] | None] = queue.Queue()
        self._registered: dict[str, int] = {}  # topic -> partition count, written in ZK
        self._wanted: dict[str, int] = {}  # every topic asked for
        self._cond = threading.Condition()
        self._stopping = threading.Event()
        self._session_lost = False
        self._thread: threading.Thread | None = None
        self.broker_node = f"/brokers/ids/{broker_id}"

    # kazoo plumbing: every call is bounded in time
    def _call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        async_result = getattr(self._client, name + "_async")(*args, **kwargs)
        return async_result.get(timeout=self._op_timeout)

    def start(self, topics: Mapping[str, int]) -> None:
        try:
            self._client.start(timeout=self._connection_timeout)
        except Exception as e:
            with contextlib.suppress(Exception):
                self._close_client()
            raise EmbeddedBrokerError(f"cannot connect to ZooKeeper: {e!r}") from e
        try:
            self._client.add_listener(self._on_state)
            self._register_broker()
            for topic, count in topics.items():
                with self._cond:
                    self._wanted[topic] = count
                self._register_topic(topic, count)
        except Exception as e:
            self._close_client()
            if isinstance(e, EmbeddedBrokerError):
                raise
            raise EmbeddedBrokerError(f"ZooKeeper registration failed: {e}") from e
        self._thread = threading.Thread(
            target=self._run, name=f"kafka07-broker-{self._broker_id}-zk", daemon=True
        )
        self._thread.start()

    def _on_state(self, state: str) -> None:
        from kazoo.protocol.states import KazooState

        if state == KazooState.LOST:
            if not self._stopping.is_set():  # a clean stop ends the session on purpose
                log.warning("broker %d: ZooKeeper session lost", self._broker_id)
            self._session_lost = True
        elif state == KazooState.CONNECTED and self._session_lost:
            self._session_lost = False
            self._queue.put(("", -1))  # re-register everything on the new session

    def register_topic(self, topic: str, count: int) -> None:
        with self._cond:
            if topic in self._wanted:
                return
            self._wanted[topic] = count
        self._queue.put((topic, count))

    def wait_registered(self, topic: str, timeout: float) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: topic in self._registered, timeout)

    def _run(self) -> None:
        while not self._stopping.is_set():
            item = self._queue.get()
            if item is None:
                return
            topic, count = item
            while not self._stopping.is_set():
                try:
                    if topic:
                        self._register_topic(topic, count)
                    else:
                        self._register_all()
                    break
                except Exception as e:  # keep trying while the broker runs
                    log.warning("broker %d: ZooKeeper registration failed (%s); retrying",
                                self._broker_id, e)
                    self._stopping.wait(0.5)

    def _register_all(self) -> None:
        with self._cond:
            self._registered.clear()
            wanted = dict(self._wanted)
        self._register_broker()
        for topic, count in wanted.items():
            self._register_topic(topic, count)

    def _register_broker(self) -> None:
        creator = f"{self._host}-{int(time.time() * 1000)}"
        data = f"{creator}:{self._host}:{self._port}".encode()
        self._create_ephemeral(self.broker_node, data, same_owner=self._is_my_address)
        log.info("broker %d registered at %s: %s", self._broker_id, self.broker_node,
                 data.decode())

    def _is_my_address(self, existing: bytes) -> bool:
        parts = existing.decode("utf-8", "replace").split(":")
        return len(parts) == 3 and parts[1] == self._host and parts[2] == str(self._port)

    def _register_topic(self, topic: str, count: int) -> None:
        path = f"/brokers/topics/{topic}/{self._broker_id}"
        # a topic node under our id can only be ours (a second broker with this id would have
        # failed to register /brokers/ids/<id>): a leftover is from our previous session
        self._create_ephemeral(path, str(count).encode(), same_owner=lambda _: True)
        with self._cond:
            self._registered[topic] = count
            self._cond.notify_all()
        log.info("broker %d registered topic %s with %d partitions", self._broker_id, topic,
                 count)

    def _create_ephemeral(self, path: str, data: bytes, *, same_owner: Any) -> None:
        from kazoo.exceptions import NodeExistsError, NoNodeError

        deadline = time.monotonic() + self._session_timeout + 1.0
        while True:
            try:
                self._call("create", path, data, ephemeral=True, makepath=True)
                return
            except NodeExistsError:
                pass
            try:
                existing, stat = self._call("get", path)
            except NoNodeError:
                continue
            if stat.ephemeralOwner == self._client.client_id[0]:
                if existing != data:
                    self._call("set", path, data)
                return
            if same_owner(existing):
                # our own node from a previous session (fast restart): replace it
                log.info("replacing stale %s = %r from an earlier session", path, existing)
                with contextlib.suppress(NoNodeError):
                    self._call("delete", path, version=stat.version)
                continue
            if time.monotonic() >= deadline:
                raise EmbeddedBrokerError(
                    f"{path} is registered by someone else ({existing.decode(errors='replace')})"
                    ": is another broker using id "
                    f"{self._broker_id}?"
                )
            self._wait_gone(path, deadline)

    def _wait_gone(self, path: str, deadline: float) -> None:
        gone = threading.Event()
        if self._call("exists", path, watch=lambda _event: gone.set()) is not None:
            gone.wait(min(1.0, max(0.0, deadline - time.monotonic())))

    def stop(self) -> None:
        """Leave ZooKeeper: closing the session removes exactly the ephemeral nodes it owns."""
        self._stopping.set()
        self._queue.put(None)
        if self._thread is not None:
            self._thread.join(_JOIN_TIMEOUT)
        with self._cond:
            self._registered.clear()
        self._close_client()

    def _close_client(self) -> None:
        try:
            self._client.stop()
        finally:
            self._client.close()


# --- the broker ----------------------------------------------------------------------------


class EmbeddedBroker(Service):
    """A real single-node Kafka 0.7.2 broker for tests, demos and users' own tests.

    ``port=0`` picks a free port at the first :meth:`start`; :meth:`restart` keeps it.
    ``log_dir=None`` uses a temporary directory, removed when the context manager exits (or
    the object is collected). ``zk_connect`` (``host:port[,host:port][/chroot]``; the chroot
    must exist) registers the broker and its topics in ZooKeeper as 0.7.2 does.

    Beyond the contract: ``flush_interval_ms`` (time-based flush when ``flush_interval > 1``,
    0.7.2's ``log.default.flush.interval.ms``), ``max_request_size`` (0.7.2's
    ``max.socket.request.bytes``), ``socket_timeout`` (seconds for one request to arrive
    whole / one response to be sent), ``zk_session_timeout`` / ``zk_connection_timeout``
    (seconds), ``fsync`` (fsync segment files on flush; off: tests need visibility, not
    power-loss durability).
    """

    def __init__(
        self,
        broker_id: int = 0,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        log_dir: str | Path | None = None,
        zk_connect: str | None = None,
        num_partitions: int = 1,
        topic_partitions: Mapping[str, int] | None = None,
        log_file_size: int = 1 << 30,
        flush_interval: int = 1,
        max_message_size: int = 1_000_000,
        flush_interval_ms: int = 3000,
        max_request_size: int = 100 << 20,
        socket_timeout: float = 30.0,
        zk_session_timeout: float = 6.0,
        zk_connection_timeout: float = 6.0,
        fsync: bool = False,
    ) -> None:
        if broker_id < 0:
            raise OptionError("broker_id", f"must be >= 0, got {broker_id}")
        if not 0 <= port <= 65535:
            raise OptionError("port", f"must be 0..65535, got {port}")
        if num_partitions < 1:
            raise OptionError("num_partitions", f"must be >= 1, got {num_partitions}")
        overrides = dict(topic_partitions or {})
        for topic, count in overrides.items():
            wire.validate_topic_name(topic)
            if count < 1:
                raise OptionError("topic_partitions", f"{topic!r}: must be >= 1, got {count}")
        for name, value in (
            ("log_file_size", log_file_size),
            ("flush_interval", flush_interval),
            ("max_request_size", max_request_size),
        ):
            if value < 1:
                raise OptionError(name, f"must be >= 1, got {value}")
        if max_message_size < 0:
            raise OptionError("max_message_size", f"must be >= 0, got {max_message_size}")
        if flush_interval_ms < 1:
            raise OptionError("flush_interval_ms", f"must be >= 1, got {flush_interval_ms}")

        self._broker_id = broker_id
        self._host = host
        self._port = port
        self._zk_connect = zk_connect
        self._num_partitions = num_partitions
        self._topic_partitions = overrides
        self._log_file_size = log_file_size
        self._flush_interval = flush_interval
        self._max_message_size = max_message_size
        self._flush_interval_ms = flush_interval_ms
        self._max_request_size = max_request_size
        self._socket_timeout = socket_timeout
        self._zk_session_timeout = zk_session_timeout
        self._zk_connection_timeout = zk_connection_timeout
        self._fsync = fsync

        self._own_log_dir = log_dir is None
        if log_dir is None:
            self._log_dir = Path(tempfile.mkdtemp(prefix=f"kafka07-broker-{broker_id}-"))
            self._finalizer: weakref.finalize[Any, Any] | None = weakref.finalize(
                self, shutil.rmtree, str(self._log_dir), True
            )
        else:
            self._log_dir = Path(log_dir)
            self._finalizer = None

        self._lifecycle = threading.Lock()
        self._running = False
        self._stopping = threading.Event()
        self._store: LogStore | None = None
        self._listener: socket.socket | None = None
        self._zk: _ZkRegistrar | None = None
        self._threads: list[threading.Thread] = []
        self._conns_lock = threading.Lock()
        self._conns: dict[socket.socket, threading.Thread] = {}
        self._new_topic_cond = threading.Condition()

    # --- properties ------------------------------------------------------------------------

    @property
    def broker_id(self) -> int:
        return self._broker_id

    @property
    def host(self) -> str:
        """The address the broker listens on and registers (``127.0.0.1`` by default)."""
        return self._advertised_host()

    @property
    def port(self) -> int:
        """The listening port (the picked one after the first start when built with 0)."""
        return self._port

    @property
    def log_dir(self) -> Path:
        return self._log_dir

    @property
    def zk_connect(self) -> str | None:
        return self._zk_connect

    @property
    def num_partitions(self) -> int:
        return self._num_partitions

    @property
    def running(self) -> bool:
        return self._running

    @property
    def broker_list_entry(self) -> str:
        """``id:host:port``, as 0.7's ``broker.list`` expects."""
        return f"{self._broker_id}:{self.host}:{self._port}"

    def partitions_for(self, topic: str) -> int:
        """This broker's partition count for ``topic`` (override or ``num_partitions``)."""
        return self._topic_partitions.get(topic, self._num_partitions)

    def _advertised_host(self) -> str:
        if self._host in ("", "0.0.0.0"):
            try:
                return socket.gethostbyname(socket.gethostname())
            except OSError:
                return "127.0.0.1"
        return self._host

    # --- lifecycle -------------------------------------------------------------------------

    def start(self) -> EmbeddedBroker:
        """Open the logs (recovering each partition's last segment), listen, register."""
        with self._lifecycle:
            if self._running:
                return self
            self._stopping.clear()
            try:
                self._store = LogStore(
                    self._log_dir,
                    max_segment_size=self._log_file_size,
                    flush_interval=self._flush_interval,
                    fsync=self._fsync,
                )
                self._listener = self._listen()
                self._port = self._listener.getsockname()[1]
                if self._zk_connect:
                    self._zk = _ZkRegistrar(
                        self._zk_connect,
                        broker_id=self._broker_id,
                        host=self._advertised_host(),
                        port=self._port,
                        session_timeout=self._zk_session_timeout,
                        connection_timeout=self._zk_connection_timeout,
                    )
                    self._zk.start({t: self.partitions_for(t) for t in self._store.topics()})
            except BaseException:
                self._teardown()
                raise
            self._running = True
            self._spawn(self._accept_loop, "accept")
            if self._flush_interval > 1:
                self._spawn(self._flush_loop, "flusher")
            log.info(
                "broker %d listening on %s:%d, log dir %s%s",
                self._broker_id,
                self._host,
                self._port,
                self._log_dir,
                f", ZooKeeper {self._zk_connect}" if self._zk_connect else "",
            )
            return self

    def _listen(self) -> socket.socket:
        family = socket.AF_INET6 if ":" in self._host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((self._host, self._port))
            sock.listen(128)
            sock.settimeout(1.0)
        except OSError as e:
            sock.close()
            raise EmbeddedBrokerError(
                f"broker {self._broker_id} cannot listen on {self._host}:{self._port}: {e}"
            ) from e
        return sock

    def _spawn(self, target: Any, name: str) -> None:
        t = threading.Thread(
            target=target, name=f"kafka07-broker-{self._broker_id}-{name}", daemon=True
        )
        self._threads.append(t)
        t.start()

    def stop(self) -> None:
        """Stop accepting, drop connections, leave ZooKeeper, flush and close the logs."""
        with self._lifecycle:
            if not self._running:
                return
            self._running = False
            self._teardown()
            log.info("broker %d stopped", self._broker_id)

    def _teardown(self) -> None:
        self._stopping.set()
        listener, self._listener = self._listener, None
        if listener is not None:
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)
            listener.close()
        with self._conns_lock:
            conns = list(self._conns.items())
        for sock, _ in conns:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        for _, thread in conns:
            thread.join(_JOIN_TIMEOUT)
        for thread in self._threads:
            thread.join(_JOIN_TIMEOUT)
        self._threads = []
        zk, self._zk = self._zk, None
        if zk is not None:
            try:
                zk.stop()
            except Exception as e:
                log.warning("broker %d: ZooKeeper shutdown: %s", self._broker_id, e)
        store, self._store = self._store, None
        if store is not None:
            store.close()

    def restart(self) -> EmbeddedBroker:
        """Stop, then start again on the same port and log directory (recovery runs)."""
        self.stop()
        return self.start()

    def close(self) -> None:
        """Stop, and remove the log directory if it is a temporary one made by this broker."""
        self.stop()
        if self._finalizer is not None:
            self._finalizer()

    def __repr__(self) -> str:
        state = "running" if self._running else "stopped"
        return f"EmbeddedBroker(id={self._broker_id}, {self._host}:{self._port}, {state})"

    # --- helpers for tests -----------------------------------------------------------------

    def topics(self) -> list[str]:
        """Topics with at least one partition log on this broker."""
        store = self._store
        if store is not None:
            return store.topics()
        found = set()
        if self._log_dir.is_dir():
            for entry in self._log_dir.iterdir():
                topic, sep, part = entry.name.rpartition("-")
                if sep and topic and part.isdigit() and entry.is_dir():
                    found.add(topic)
        return sorted(found)

    def segment_files(self, topic: str, partition: int) -> list[Path]:
        """The partition's segment files on disk, oldest first (works while stopped too)."""
        directory = self._log_dir / partition_dir_name(topic, partition)
        if not directory.is_dir():
            return []
        found = []
        for entry in directory.iterdir():
            start = parse_segment_file_name(entry.name)
            if start is not None:
                found.append((start, entry))
        return [p for _, p in sorted(found)]

    def log_end(self, topic: str, partition: int) -> int | None:
        """The flushed end offset of a partition log, None if it does not exist."""
        plog = self._log(topic, partition)
        return None if plog is None else plog.end

    def flush(self) -> None:
        """Flush every log now (data appended but held back by ``flush_interval``)."""
        store = self._store
        if store is not None:
            store.flush_all()

    def wait_for_topic(self, topic: str, timeout: float = 10.0) -> None:
        """Wait until ``topic`` exists here and, with ZooKeeper, is registered there.

        Raises ``TimeoutError`` after ``timeout`` seconds.
        """
        deadline = time.monotonic() + timeout
        with self._new_topic_cond:
            if not self._new_topic_cond.wait_for(
                lambda: self._store is not None and topic in self._store.topics(), timeout
            ):
                raise TimeoutError(f"topic {topic!r} did not appear on broker {self._broker_id}")
        zk = self._zk
        if zk is not None and not zk.wait_registered(
            topic, max(0.0, deadline - time.monotonic())
        ):
            raise TimeoutError(f"topic {topic!r} was not registered in ZooKeeper in time")

    def _log(self, topic: str, partition: int) -> PartitionLog | None:
        store = self._store
        return None if store is None else store.get(topic, partition)

    # --- threads ---------------------------------------------------------------------------

    def _accept_loop(self) -> None:
        listener = self._listener
        while not self._stopping.is_set() and listener is not None:
            try:
                sock, addr = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                if self._stopping.is_set():
                    return
                log.exception("broker %d: accept failed", self._broker_id)
                time.sleep(0.05)
                continue
            sock.settimeout(self._socket_timeout)
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            thread = threading.Thread(
                target=self._serve,
                args=(sock, addr),
                name=f"kafka07-broker-{self._broker_id}-conn-{addr[1]}",
                daemon=True,
            )
            with self._conns_lock:  # started under the lock: stop() joins only started ones
                if self._stopping.is_set():
                    sock.close()
                    return
                self._conns[sock] = thread
                thread.start()

    def _flush_loop(self) -> None:
        interval = self._flush_interval_ms / 1000.0
        while not self._stopping.wait(interval):
            store = self._store
            if store is not None:
                try:
                    store.flush_all(older_than=interval)
                except Exception:
                    log.exception("broker %d: scheduled flush failed", self._broker_id)

    def _serve(self, sock: socket.socket, addr: Any) -> None:
        reader = _RequestReader(
            sock, self._max_request_size, self._stopping, self._socket_timeout
        )
        try:
            while not self._stopping.is_set():
                body = reader.read()
                if body is None:
                    break
                try:
                    request = wire.decode_request(body)
                except ProtocolError as e:
                    log.warning("broker %d: closing connection from %s: %s",
                                self._broker_id, addr, e)
                    break
                self._handle(sock, request)
        except _CloseConnection as e:
            level = logging.DEBUG if self._stopping.is_set() else logging.WARNING
            log.log(level, "broker %d: closing connection from %s: %s", self._broker_id, addr, e)
        except OSError as e:
            if not self._stopping.is_set():
                log.debug("broker %d: connection from %s: %s", self._broker_id, addr, e)
        except Exception:
            log.exception("broker %d: error serving %s; closing", self._broker_id, addr)
        finally:
            with self._conns_lock:
                self._conns.pop(sock, None)
            sock.close()

    # --- request handling ------------------------------------------------------------------

    def _handle(self, sock: socket.socket, request: wire.Request) -> None:
        if isinstance(request, wire.FetchRequest):
            self._send_fetch(sock, [self._fetch(request)], multi=False)
        elif isinstance(request, wire.MultiFetchRequest):
            self._send_fetch(sock, [self._fetch(f) for f in request.fetches], multi=True)
        elif isinstance(request, wire.ProduceRequest):
            self._produce(request, "PRODUCE")
        elif isinstance(request, wire.MultiProduceRequest):
            for item in request.produces:  # 0.7.2: in order; a bad one ends the request
                self._produce(item, "MULTIPRODUCE")
        elif isinstance(request, wire.OffsetsRequest):
            sock.sendall(wire.encode_offsets_response(_NO_ERROR, self._offsets(request)))
        else:  # pragma: no cover - decode_request returns only the types above
            raise _CloseConnection(f"unexpected request {request!r}")

    def _check_partition(self, topic: str, partition: int) -> bool:
        return 0 <= partition < self.partitions_for(topic)

    def _fetch(self, req: wire.FetchRequest) -> tuple[int, ReadSlice | None]:
        if req.topic == "":
            return _UNKNOWN, None  # 0.7.2: InvalidTopicException -> UnknownCode
        if not self._check_partition(req.topic, req.partition):
            return _WRONG_PARTITION, None
        plog = self._log(req.topic, req.partition)
        if plog is None:
            return _NO_ERROR, None  # unknown topic / never-written partition: empty set
        try:
            return _NO_ERROR, plog.read(req.offset, req.max_size)
        except OffsetOutOfRangeError:
            return _OFFSET_OUT_OF_RANGE, None

    def _send_fetch(
        self, sock: socket.socket, parts: Sequence[tuple[int, ReadSlice | None]], *, multi: bool
    ) -> None:
        """FETCH: ``int32 (2+n) | int16 error | n bytes``; MULTIFETCH: a top frame around them.

        Headers go with ``sendall`` (flagged MSG_MORE when a body follows), bodies with
        ``sendfile``. A negative length (negative max size) is announced as 0.7.2 did, then
        the connection is dropped.
        """
        sizes = [0 if piece is None else piece.length for _, piece in parts]
        if multi:
            top = wire.encode_fetch_response_header(_NO_ERROR, sum(6 + n for n in sizes))
            sock.sendall(top, _MSG_MORE if parts else 0)
        for (error, piece), size in zip(parts, sizes, strict=True):
            header = wire.encode_fetch_response_header(error, size)
            sock.sendall(header, _MSG_MORE if size > 0 else 0)
            if piece is None or size == 0:
                continue
            if size < 0:
                raise _CloseConnection(f"negative fetch size {size}")
            _send_slice(sock, piece)

    def _offsets(self, req: wire.OffsetsRequest) -> list[int]:
        if req.topic == "":
            raise _CloseConnection("OFFSETS for an empty topic name")
        if not self._check_partition(req.topic, req.partition):
            # 0.7.2: InvalidPartitionException escapes the handler: no answer, connection closed
            raise _CloseConnection(
                f"OFFSETS for invalid partition {req.topic}-{req.partition}"
            )
        plog = self._log(req.topic, req.partition)
        if plog is None:  # 0.7.2 Log.getEmptyOffsets
            return [0] if req.time in (OFFSETS_LATEST, OFFSETS_EARLIEST) else []
        try:
            return plog.offsets_before(req.time, req.max_number)
        except ValueError as e:
            raise _CloseConnection(str(e)) from e

    def _produce(self, req: wire.ProduceRequest, kind: str) -> None:
        """Append a produced message set, or raise :class:`_CloseConnection` as 0.7.2 does."""
        topic = req.topic
        try:
            wire.validate_topic_name(topic)
        except TopicNameError as e:
            raise _CloseConnection(f"{kind} refused: {e}") from e
        count = self.partitions_for(topic)
        partition = random.randrange(count) if req.partition == _RANDOM_PARTITION else req.partition
        if not 0 <= partition < count:
            raise _CloseConnection(
                f"{kind} refused: wrong partition {partition} for {topic} "
                f"(valid partitions 0..{count - 1})"
            )
        store = self._store
        if store is None:
            raise _CloseConnection("broker is stopping")
        try:
            plog, new_topic = store.get_or_create(topic, partition)
        except (OSError, KafkaError) as e:
            raise _CloseConnection(
                f"{kind}: cannot open the log of {topic}-{partition}: {e}"
            ) from e
        if new_topic:
            with self._new_topic_cond:
                self._new_topic_cond.notify_all()
            if self._zk is not None:
                self._zk.register_topic(topic, count)
        data = req.messages
        too_big = _oversized(data, self._max_message_size)
        if too_big is not None:
            # 0.7.2: MessageSizeTooLargeException is logged, the set dropped, the connection kept
            log.warning(
                "%s on %s-%d dropped: payload size of %d at offset %d of the set is larger "
                "than max.message.size %d",
                kind, topic, partition, too_big[1], too_big[0], self._max_message_size,
            )
            return
        try:
            valid, messages = _validate(data)
        except _Rejected as e:
            raise _CloseConnection(f"{kind} on {topic}-{partition} refused: {e}") from e
        if valid < len(data):
            log.debug("%s on %s-%d: dropped a truncated %d-byte tail", kind, topic, partition,
                      len(data) - valid)
        plog.append(memoryview(data)[:valid], messages)


# --- CLI -----------------------------------------------------------------------------------


def _parse_topic_partitions(value: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for item in filter(None, (part.strip() for part in value.split(","))):
        topic, sep, count = item.rpartition(":")
        if not sep or not count.isdigit():
            raise argparse.ArgumentTypeError(f"expected topic:count, got {item!r}")
        out[topic] = int(count)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m kafka_pyspark.testing.broker",
        description="Run an embedded Kafka 0.7.2 broker until SIGINT/SIGTERM.",
    )
    parser.add_argument("--port", type=int, default=9092)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--log-dir", required=True)
    parser.add_argument("--broker-id", type=int, default=0)
    parser.add_argument("--zk", default=None, help="HOST:PORT[,HOST:PORT][/chroot]")
    parser.add_argument("--partitions", type=int, default=1, help="num.partitions")
    parser.add_argument("--topic-partitions", type=_parse_topic_partitions, default={},
                        help="per-topic partition counts, topic:count,...")
    parser.add_argument("--log-file-size", type=int, default=1 << 30)
    parser.add_argument("--flush-interval", type=int, default=1, help="messages")
    parser.add_argument("--flush-interval-ms", type=int, default=3000)
    parser.add_argument("--max-message-size", type=int, default=1_000_000)
    parser.add_argument("--zk-session-timeout", type=float, default=6.0, help="seconds")
    parser.add_argument("--zk-connection-timeout", type=float, default=6.0, help="seconds")
    parser.add_argument("--log-level", default="INFO")
    args = parser.parse_args(argv)

    logging.basicConfig(
        level=getattr(logging, str(args.log_level).upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    stop = threading.Event()

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        log.info("signal %d: shutting down", signum)
        stop.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    try:
        broker = EmbeddedBroker(
            args.broker_id,
            host=args.host,
            port=args.port,
            log_dir=args.log_dir,
            zk_connect=args.zk,
            num_partitions=args.partitions,
            topic_partitions=args.topic_partitions,
            log_file_size=args.log_file_size,
            flush_interval=args.flush_interval,
            flush_interval_ms=args.flush_interval_ms,
            max_message_size=args.max_message_size,
            zk_session_timeout=args.zk_session_timeout,
            zk_connection_timeout=args.zk_connection_timeout,
        ).start()
    except KafkaError as e:
        log.error("%s", e)
        return 1
    try:
        while not stop.wait(1.0):
            pass
    finally:
        broker.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
