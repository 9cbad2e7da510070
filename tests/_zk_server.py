"""Which ZooKeeper the tests run against, and what it can do.

By default the fixtures start Debian's ZooKeeper (3.8). ``KAFKA07_TEST_ZOOKEEPER`` picks
another one:

- ``host:port``: a running server the ``zookeeper`` fixture uses as it is (each test gets a
  chroot of its own on it); tests that start, stop or pause a server of their own still start
  Debian's;
- a Java class path (it names a ``.jar``): the server every fixture and test starts, instead of
  Debian's, e.g. a ZooKeeper 3.4 built from source:
  ``zk-3.4.14/zookeeper-3.4.14.jar:zk-3.4.14/lib/*:zk-3.4.14/conf``.

Tests that need ``multi`` (3.4+) or ``multiRead`` (3.6+) are marked
``@pytest.mark.zk_needs("multi")`` / ``("multiRead")`` and skip on a server without it (asked
as the product asks: the server's ``srvr`` four-letter word).
"""

from __future__ import annotations

import os
from pathlib import Path

from kafka_pyspark._cluster.zk_reads import (
    MULTI,
    MULTI_READ,
    four_letter_word,
    multi_read_supported,
    multi_supported,
    server_version,
)
from kafka_pyspark.testing._zookeeper import ZooKeeperServer

ENV = "KAFKA07_TEST_ZOOKEEPER"


def _given() -> str:
    return os.environ.get(ENV, "").strip()


def external_server() -> str | None:
    """``host:port`` of the running server ``KAFKA07_TEST_ZOOKEEPER`` names, if it names one."""
    given = _given()
    return given if given and ".jar" not in given else None


def server(*, port: int = 0, data_dir: str | Path | None = None,
           start_timeout: float = 60.0) -> ZooKeeperServer:
    """A ZooKeeper for a test to start: the class path ``KAFKA07_TEST_ZOOKEEPER`` names, else
    Debian's."""
    given = _given()
    return ZooKeeperServer(port=port, data_dir=data_dir, start_timeout=start_timeout,
                           classpath=given if ".jar" in given else None)


class ExternalZooKeeper(ZooKeeperServer):
    """The running server ``KAFKA07_TEST_ZOOKEEPER=host:port`` names, as the ``zookeeper``
    fixture: its connect string and chroots; it is not started, stopped, paused or restarted
    by the tests (those calls do nothing or fail as on a stopped server)."""

    def __init__(self, connect_string: str) -> None:
        host, port = connect_string.rsplit(":", 1)
        super().__init__(port=int(port))
        self.host = host

    def start(self) -> ExternalZooKeeper:
        return self

    def stop(self) -> None:
        pass


def features(connect_string: str) -> set[str]:
    """Which of ``multi`` and ``multiRead`` the server at ``connect_string`` (``host:port``)
    answers, from its ``srvr`` four-letter word."""
    host, port = connect_string.rsplit(":", 1)
    srvr = four_letter_word((host, int(port)), b"srvr", 10.0)
    return {kind for kind, has in ((MULTI, multi_supported(srvr)),
                                   (MULTI_READ, multi_read_supported(srvr))) if has}


def describe(connect_string: str) -> str:
    """The server's version as its ``srvr`` word gives it (or why not)."""
    host, port = connect_string.rsplit(":", 1)
    try:
        version = server_version(four_letter_word((host, int(port)), b"srvr", 10.0))
    except OSError as e:
        return f"ZooKeeper {connect_string} (srvr: {e})"
    shown = "unknown" if version is None else f"{version[0]}.{version[1]}"
    return f"ZooKeeper {connect_string} (version {shown})"
