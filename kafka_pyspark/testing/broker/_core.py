"""The broker itself: lifecycle, listening, one thread per connection, the log store.

Request handling is in :mod:`.handlers`, framing in :mod:`.transport`, ZooKeeper in
:mod:`.registration`.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import socket
import tempfile
import threading
import time
import weakref
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kafka_pyspark import _wire as wire
from kafka_pyspark._shared import defaults
from kafka_pyspark._shared.closing import Service
from kafka_pyspark.client._framing import BROKER_MAX_REQUEST_BYTES
from kafka_pyspark.errors import (
    OptionError,
    ProtocolError,
)
from kafka_pyspark.testing._log import (
    LogStore,
    PartitionLog,
    parse_segment_file_name,
    partition_dir_name,
)
from kafka_pyspark.testing.broker._broker_errors import (
    JOIN_TIMEOUT,
    CloseConnection,
    EmbeddedBrokerError,
)
from kafka_pyspark.testing.broker._handlers import RequestHandlers
from kafka_pyspark.testing.broker._registration import ZkRegistrar
from kafka_pyspark.testing.broker._server_transport import RequestReader

log = logging.getLogger(__name__)

__all__ = ["EmbeddedBroker", "EmbeddedBrokerError"]


def _checked_settings(
    *,
    broker_id: int,
    port: int,
    advertised_port: int | None,
    num_partitions: int,
    topic_partitions: Mapping[str, int] | None,
    log_file_size: int,
    flush_interval: int,
    max_request_size: int,
    max_message_size: int,
    flush_interval_ms: int,
) -> dict[str, int]:
    """The broker's settings checked (:class:`OptionError` naming the first bad one); returns
    the per-topic partition counts."""
    if broker_id < 0:
        raise OptionError("broker_id", f"must be >= 0, got {broker_id}")
    if not 0 <= port <= 65535:
        raise OptionError("port", f"must be 0..65535, got {port}")
    if advertised_port is not None and not 1 <= advertised_port <= 65535:
        raise OptionError("advertised_port", f"must be 1..65535, got {advertised_port}")
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
    return overrides


class EmbeddedBroker(RequestHandlers, Service):
    """A real single-node Kafka 0.7.2 broker for tests, demos and users' own tests.

    ``port=0`` picks a free port at the first :meth:`start`; :meth:`restart` keeps it.
    ``log_dir=None`` uses a temporary directory, removed when the context manager exits (or
    the object is collected). ``zk_connect`` (``host:port[,host:port][/chroot]``; the chroot
    must exist) registers the broker and its topics in ZooKeeper as 0.7.2 does.

    ``advertised_host`` / ``advertised_port``: the address registered in ZooKeeper (and in
    :attr:`broker_list_entry`) when clients must reach the broker through another one, e.g. a
    proxy; by default the listening address. 0.7.2's ``hostname`` property is the first; it
    has no second (its broker registers the port it listens on).

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
        advertised_host: str | None = None,
        advertised_port: int | None = None,
        log_dir: str | Path | None = None,
        zk_connect: str | None = None,
        num_partitions: int = 1,
        topic_partitions: Mapping[str, int] | None = None,
        log_file_size: int = 1 << 30,
        flush_interval: int = 1,
        max_message_size: int = defaults.MAX_MESSAGE_SIZE,
        flush_interval_ms: int = 3000,
        max_request_size: int = BROKER_MAX_REQUEST_BYTES,
        socket_timeout: float = 30.0,
        zk_session_timeout: float = 6.0,
        zk_connection_timeout: float = 6.0,
        fsync: bool = False,
    ) -> None:
        overrides = _checked_settings(
            broker_id=broker_id, port=port, advertised_port=advertised_port,
            num_partitions=num_partitions,
            topic_partitions=topic_partitions, log_file_size=log_file_size,
            flush_interval=flush_interval, max_request_size=max_request_size,
            max_message_size=max_message_size, flush_interval_ms=flush_interval_ms,
        )
        self._broker_id = broker_id
        self._host = host
        self._port = port
        self._advertised = (advertised_host or None, advertised_port)
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
        self._log_dir, self._finalizer = self._open_log_dir(log_dir)
        self._init_runtime_state()

    def _open_log_dir(
        self, log_dir: str | Path | None
    ) -> tuple[Path, weakref.finalize[Any, Any] | None]:
        """The log directory, and for a temporary one (``log_dir=None``) the finalizer that
        removes it (at :meth:`close`, or when the broker is collected)."""
        if log_dir is not None:
            return Path(log_dir), None
        path = Path(tempfile.mkdtemp(prefix=f"kafka07-broker-{self._broker_id}-"))
        return path, weakref.finalize(self, shutil.rmtree, str(path), True)

    def _init_runtime_state(self) -> None:
        """The state :meth:`start` and :meth:`stop` change (lock, listener, ZooKeeper session,
        threads, connections), empty until the first start."""
        self._lifecycle = threading.Lock()
        self._running = False
        self._stopping = threading.Event()
        self._store: LogStore | None = None
        self._listener: socket.socket | None = None
        self._zk: ZkRegistrar | None = None
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
        """The address the broker listens on (``127.0.0.1`` by default; this machine's address
        when listening on all interfaces)."""
        return self._listen_host()

    @property
    def port(self) -> int:
        """The listening port (the picked one after the first start when built with 0)."""
        return self._port

    @property
    def advertised_host(self) -> str:
        """The host registered in ZooKeeper: ``advertised_host``, else :attr:`host`."""
        return self._advertised[0] or self.host

    @property
    def advertised_port(self) -> int:
        """The port registered in ZooKeeper: ``advertised_port``, else :attr:`port`."""
        return self._advertised[1] or self._port

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
        """``id:host:port`` (the advertised address), as 0.7's ``broker.list`` expects."""
        return f"{self._broker_id}:{self.advertised_host}:{self.advertised_port}"

    def partitions_for(self, topic: str) -> int:
        """This broker's partition count for ``topic`` (override or ``num_partitions``)."""
        return self._topic_partitions.get(topic, self._num_partitions)

    def _listen_host(self) -> str:
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
                    self._zk = ZkRegistrar(
                        self._zk_connect,
                        broker_id=self._broker_id,
                        host=self.advertised_host,
                        port=self.advertised_port,
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
            thread.join(JOIN_TIMEOUT)
        for thread in self._threads:
            thread.join(JOIN_TIMEOUT)
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
        reader = RequestReader(
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
        except CloseConnection as e:
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
