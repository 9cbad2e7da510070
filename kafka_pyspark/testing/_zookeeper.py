"""A throwaway standalone ZooKeeper for tests: Debian's ``zookeeper`` package (3.8), one JVM.

::

    with ZooKeeperServer() as zk:
        registry = Registry(zk.connect_string)

The server listens on 127.0.0.1 only, on a free port (picked by binding ``127.0.0.1:0``; a lost
port race is retried with a new port), keeps its data in a temporary directory and logs to
``<work dir>/zookeeper.log`` (the tail of that log is part of the error if the server does not
come up). :meth:`ZooKeeperServer.stop` terminates the JVM (SIGTERM, then SIGKILL, both bounded)
and removes the temporary directory.

Configuration written to ``zoo.cfg``: ``tickTime=500`` (so sessions can be as short as 1 s, which
fault tests use to expire sessions quickly), ``maxSessionTimeout=60000``, ``maxClientCnxns=0``
(tests open many connections from one address), ``forceSync=no`` (no fsync: test data only),
admin server off, four-letter words limited to ``ruok``/``srvr``. JVM flags are kept light for
start time: ``-Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -XX:-UsePerfData``.

The JVM is ``$JAVA_HOME/bin/java`` if set, else ``java`` on ``PATH``; the server jars come from
``/usr/share/java`` (``zookeeper.jar`` names its dependencies in its manifest; SLF4J's
``slf4j-simple`` binding writes the log), unless ``classpath`` names another server's (a
ZooKeeper built from source, e.g. 3.4 or 3.3: its jar, its libraries and the folder of its
``log4j.properties``; ``-Dzookeeper.log.file`` points its log at ours).
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
import weakref
from pathlib import Path

from kafka_pyspark._shared.closing import Service
from kafka_pyspark.errors import KafkaError

JAVA_DIR = Path("/usr/share/java")
ZOOKEEPER_JAR = JAVA_DIR / "zookeeper.jar"
# zookeeper.jar's manifest Class-Path lists jute, netty, slf4j-api, jetty, ...; these are named
# again explicitly (when present) so a package that drops the manifest entry still works, plus
# an SLF4J binding so the server's log goes somewhere (stderr -> our log file).
_EXTRA_JARS = ("zookeeper-jute.jar", "slf4j-api.jar", "slf4j-simple.jar")
MAIN_CLASS = "org.apache.zookeeper.server.ZooKeeperServerMain"
JVM_FLAGS = (
    "-Xmx256m",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-XX:-UsePerfData",
    "-Djava.net.preferIPv4Stack=true",
    "-Dzookeeper.admin.enableServer=false",
    "-Dzookeeper.jmx.log4j.disable=true",
    "-Dorg.slf4j.simpleLogger.showDateTime=true",
    "-Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS",
)
MISSING_PACKAGE = "Debian's zookeeper package is not installed: apt-get install -y zookeeper"
_PORT_RACE_ATTEMPTS = 5
_PROBE_LOGGER = logging.getLogger(__name__ + ".probe")
_PROBE_LOGGER.setLevel(logging.ERROR)
_LOG_TAIL_BYTES = 4000


class ZooKeeperServerError(KafkaError, RuntimeError):
    """The test ZooKeeper could not be started (missing package, no Java, did not come up)."""


def free_port(host: str = "127.0.0.1") -> int:
    """A port that was free a moment ago (bind ``host:0``, read it, close)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        port: int = s.getsockname()[1]
        return port


def _java() -> str:
    home = os.environ.get("JAVA_HOME")
    if home:
        candidate = Path(home) / "bin" / "java"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    found = shutil.which("java")
    if found is None:
        raise ZooKeeperServerError(
            "java was not found (set JAVA_HOME or put java on PATH; "
            "e.g. apt-get install -y openjdk-17-jre-headless)"
        )
    return found


def _classpath() -> str:
    if not ZOOKEEPER_JAR.is_file():
        raise ZooKeeperServerError(MISSING_PACKAGE)
    jars = [ZOOKEEPER_JAR] + [JAVA_DIR / j for j in _EXTRA_JARS if (JAVA_DIR / j).is_file()]
    return os.pathsep.join(str(j) for j in jars)


def new_chroot(connect_string: str, prefix: str = "t") -> str:
    """Create a fresh, empty chroot ``/<prefix>-<hex>`` on the ZooKeeper at ``connect_string``
    (``host:port``); ``connect_string`` with it."""
    return ensure_chroot(connect_string, f"/{prefix}-{uuid.uuid4().hex[:12]}")


def ensure_chroot(connect_string: str, chroot: str) -> str:
    """Create ``chroot`` (and its parents) on the ZooKeeper at ``connect_string`` (``host:port``)
    if missing; ``connect_string`` with it."""
    from kazoo.client import KazooClient

    client = KazooClient(hosts=connect_string, timeout=10.0, logger=_PROBE_LOGGER)
    client.start(timeout=10.0)
    try:
        client.ensure_path(chroot)
    finally:
        client.stop()
        client.close()
    return connect_string + chroot


def _terminate(proc: subprocess.Popen[bytes], grace: float = 10.0) -> None:
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(signal.SIGCONT)  # a paused JVM would not act on SIGTERM
        proc.terminate()
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=5.0)


class ZooKeeperServer(Service):
    """Debian's ZooKeeper 3.8 run standalone on ``127.0.0.1`` (a test fixture, not production).

    ``port=0`` picks a free port. ``classpath``: another server's jars instead of Debian's
    (a Java class path). ``data_dir`` keeps the data somewhere that survives
    :meth:`stop` (the default is inside the temporary work directory, removed on stop).
    :meth:`restart` stops and starts the same server on the same port with the same data
    (:meth:`halt` only stops it, :meth:`start` brings it back);
    :meth:`pause`/:meth:`resume` freeze and thaw it (a server that accepts but never answers).
    ``own_process_group``: the JVM runs in a session of its own, so a terminal's Ctrl-C reaches
    only this process, which then stops the JVM in its turn (``kafka07 local-cluster``).
    """

    host = "127.0.0.1"

    def __init__(
        self,
        *,
        port: int = 0,
        data_dir: str | Path | None = None,
        start_timeout: float = 60.0,
        classpath: str | None = None,
        own_process_group: bool = False,
    ) -> None:
        if not 0 <= port <= 65535:
            raise ValueError(f"port must be 0..65535, got {port}")
        self._auto_port = port == 0
        self.port = port
        self._user_data_dir = Path(data_dir) if data_dir is not None else None
        self.start_timeout = start_timeout
        self.classpath = classpath  # None: Debian's package
        self.own_process_group = own_process_group
        self.work_dir: Path | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._finalizer: weakref.finalize[..., ZooKeeperServer] | None = None
        self._dir_finalizer: weakref.finalize[..., ZooKeeperServer] | None = None

    # --- public API --------------------------------------------------------------------------

    @property
    def connect_string(self) -> str:
        """``"127.0.0.1:<port>"`` (valid once started)."""
        if self.port == 0:
            raise ZooKeeperServerError("ZooKeeperServer is not started")
        return f"{self.host}:{self.port}"

    def new_chroot(self, prefix: str = "t") -> str:
        """Create a fresh, empty chroot ``/<prefix>-<hex>`` on this server; the connect string
        with it (``"127.0.0.1:<port>/<prefix>-<hex>"``), so tests never see each other's nodes."""
        return new_chroot(self.connect_string, prefix)

    def create_chroot(self, chroot: str) -> str:
        """Create ``chroot`` (and its parents) on this server if missing; the connect string
        with it (``"127.0.0.1:<port>/kafka"``)."""
        return ensure_chroot(self.connect_string, chroot)

    @property
    def data_dir(self) -> Path | None:
        if self._user_data_dir is not None:
            return self._user_data_dir
        return None if self.work_dir is None else self.work_dir / "data"

    @property
    def log_path(self) -> Path | None:
        return None if self.work_dir is None else self.work_dir / "zookeeper.log"

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int | None:
        """The JVM's process id while running."""
        return None if self._proc is None else self._proc.pid

    def pause(self) -> None:
        """Freeze the JVM (SIGSTOP): connections stay open but nothing is answered, which is
        how a hung ZooKeeper looks to clients. Undo with :meth:`resume`."""
        if self._proc is None or self._proc.poll() is not None:
            raise ZooKeeperServerError("ZooKeeperServer is not running")
        self._proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        """Continue a JVM frozen by :meth:`pause` (SIGCONT)."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.send_signal(signal.SIGCONT)

    def start(self) -> ZooKeeperServer:
        """Start the server and wait (bounded by ``start_timeout``) until a client can connect."""
        if self.running:
            return self
        classpath = self.classpath or _classpath()
        java = _java()
        if self.work_dir is None:
            self.work_dir = Path(tempfile.mkdtemp(prefix="kafka07-zookeeper-"))
            # removed by stop(), or when this object is collected / the interpreter exits
            self._dir_finalizer = weakref.finalize(
                self, shutil.rmtree, str(self.work_dir), True
            )
        try:
            self._start(java, classpath)
        except BaseException:
            self.stop()  # the error carries the log's tail; nothing is left behind
            raise
        return self

    def stop(self) -> None:
        """Terminate the JVM (bounded) and remove the temporary work directory."""
        self._kill_process()
        if self._dir_finalizer is not None:
            self._dir_finalizer()  # rmtree, once
            self._dir_finalizer = None
        self.work_dir = None
        if self._auto_port:
            self.port = 0

    def halt(self) -> None:
        """Terminate the JVM (bounded) but keep its port and data: :meth:`start` brings the
        same server back (what clients see as a ZooKeeper outage)."""
        self._kill_process()

    def restart(self) -> ZooKeeperServer:
        """Stop the JVM and start it again on the same port with the same data."""
        self._kill_process()
        return self.start()

    def close(self) -> None:
        """The same as :meth:`stop` (ends ``with``)."""
        self.stop()

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"ZooKeeperServer({self.host}:{self.port}, {state})"

    # --- internals ---------------------------------------------------------------------------

    def _start(self, java: str, classpath: str) -> None:
        assert self.work_dir is not None  # set by start()
        deadline = time.monotonic() + self.start_timeout
        data_dir = self.data_dir
        assert data_dir is not None
        data_dir.mkdir(parents=True, exist_ok=True)
        # A port picked by us can be lost to another process before the JVM binds it: retry
        # with a new one. A fixed port (given, or kept by restart()) is tried once.
        attempts = _PORT_RACE_ATTEMPTS if self.port == 0 else 1
        for attempt in range(attempts):
            port = self.port or free_port(self.host)
            cfg = self.work_dir / "zoo.cfg"
            cfg.write_text(_zoo_cfg(port, data_dir), encoding="ascii")
            log_path = self.log_path
            assert log_path is not None
            with open(log_path, "ab") as log:
                log.write(f"--- starting ZooKeeper on {self.host}:{port} ---\n".encode())
                log.flush()
                self._proc = subprocess.Popen(
                    [java, *JVM_FLAGS, f"-Dzookeeper.log.file={log_path}", "-cp", classpath,
                     MAIN_CLASS, str(cfg)],
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    cwd=self.work_dir,
                    start_new_session=self.own_process_group,
                )
            self._finalizer = weakref.finalize(self, _terminate, self._proc, 2.0)
            self.port = port
            if self._wait_ready(deadline):
                return
            self._kill_process()
            if attempt + 1 < attempts and self._log_says_port_taken():
                self.port = 0
                continue
            break
        raise ZooKeeperServerError(
            f"ZooKeeper did not start on {self.host}:{self.port} within "
            f"{self.start_timeout:.0f}s; end of its log:\n{self._log_tail()}"
        )

    def _wait_ready(self, deadline: float) -> bool:
        """True once a kazoo session is established; False if the JVM died or time ran out."""
        proc = self._proc
        assert proc is not None
        # Cheap TCP polling first, then one real ZooKeeper session as the readiness proof.
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                return False
            try:
                with socket.create_connection((self.host, self.port), timeout=1.0):
                    break
            except OSError:
                time.sleep(0.05)
        else:
            return False
        from kazoo.client import KazooClient
        from kazoo.exceptions import KazooException
        from kazoo.handlers.threading import KazooTimeoutError
        from kazoo.retry import KazooRetry

        # The server may accept and drop connections while it starts; kazoo's retry loop logs
        # each drop as a warning, which is noise here.
        client = KazooClient(
            hosts=f"{self.host}:{self.port}",
            timeout=2.0,
            logger=_PROBE_LOGGER,
            connection_retry=KazooRetry(max_tries=-1, delay=0.05, backoff=1.5, max_delay=0.2),
        )
        try:
            connected = client.start_async()
            while not connected.wait(0.05):
                if proc.poll() is not None or time.monotonic() >= deadline:
                    return False
            while time.monotonic() < deadline and proc.poll() is None:
                try:
                    client.get_children_async("/").get(timeout=1.0)
                    return True
                except (KazooTimeoutError, KazooException):
                    time.sleep(0.05)
            return False
        finally:
            with contextlib.suppress(Exception):
                client.stop()
                client.close()

    def _kill_process(self) -> None:
        proc, self._proc = self._proc, None
        if self._finalizer is not None:
            self._finalizer.detach()
            self._finalizer = None
        if proc is not None:
            _terminate(proc)

    def _log_tail(self) -> str:
        path = self.log_path
        if path is None or not path.exists():
            return "(no log)"
        data = path.read_bytes()
        return data[-_LOG_TAIL_BYTES:].decode("utf-8", "replace")

    def _log_says_port_taken(self) -> bool:
        tail = self._log_tail()
        return "Address already in use" in tail or "BindException" in tail


def _zoo_cfg(port: int, data_dir: Path) -> str:
    return "\n".join(
        (
            "tickTime=500",
            "minSessionTimeout=1000",
            "maxSessionTimeout=60000",
            f"dataDir={data_dir}",
            f"clientPort={port}",
            "clientPortAddress=127.0.0.1",
            "maxClientCnxns=0",
            "admin.enableServer=false",
            "4lw.commands.whitelist=ruok,srvr",
            "forceSync=no",
            "preAllocSize=4096",
            "",
        )
    )
