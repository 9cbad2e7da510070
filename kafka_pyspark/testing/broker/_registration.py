"""The broker's ZooKeeper registration, as 0.7.2's ``KafkaZooKeeper`` does it."""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
from collections.abc import Mapping
from typing import Any

from kafka_pyspark.testing.broker._broker_errors import JOIN_TIMEOUT, EmbeddedBrokerError

log = logging.getLogger(__name__)


class ZkRegistrar:
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
            self._thread.join(JOIN_TIMEOUT)
        with self._cond:
            self._registered.clear()
        self._close_client()

    def _close_client(self) -> None:
        try:
            self._client.stop()
        finally:
            self._client.close()
