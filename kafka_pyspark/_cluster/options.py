"""Where the cluster is: the cluster options, parsed and checked once, for every mode.

The options (docs/reading.md "Options")::

    zk.connect | broker.list (exactly one)     zk.sessiontimeout.ms 6000
    zk.connectiontimeout.ms 6000               socket.timeout.ms 30000
    socket.buffersize 65536                    zk.auth.user + zk.auth.password (digest ACLs)

Pure (no sockets). :func:`parse_cluster_options` reads them from Spark's option strings,
:func:`cluster_options` from Python values (the CLI, tests) by the same rules and wording;
:class:`~kafka_pyspark._cluster.cluster.Cluster` and
:class:`~kafka_pyspark._cluster.registry.Registry` take the
resulting :class:`ClusterOptions` and check nothing again. It sits in the cluster layer, below
``_spark/``, because the cluster itself takes it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kafka_pyspark._cluster.zk_auth import (
    CREDENTIALS_HINT,
    ZK_AUTH_OPTIONS,
    ZK_AUTH_SCHEME,
    credentials_from_options,
)
from kafka_pyspark._shared import defaults
from kafka_pyspark._shared.option_values import int_option, lower_options
from kafka_pyspark._shared.partition_key import is_decimal
from kafka_pyspark._wire.protocol import INT32_MAX
from kafka_pyspark.errors import OptionError

__all__ = [
    "CLUSTER_NAMES",
    "BrokerAddress",
    "ClusterOptions",
    "cluster_options",
    "host_problem",
    "parse_broker_list",
    "parse_cluster_options",
    "port_number",
    "zk_chroot",
]

#: the cluster options' documented spellings (Spark passes them lower-cased)
CLUSTER_NAMES = (
    "zk.connect",
    "broker.list",
    "zk.sessiontimeout.ms",
    "zk.connectiontimeout.ms",
    *ZK_AUTH_OPTIONS,
    "socket.timeout.ms",
    "socket.buffersize",
)
_ZK_CONNECT_FORMAT = "'host:port[,host:port...][/chroot]'"
_BROKER_LIST_FORMAT = "'id:host:port[,id:host:port...]'"


@dataclass(frozen=True)
class ClusterOptions:
    """Where the cluster is: exactly one of ``zk_connect`` / ``broker_list`` (checked by
    :func:`parse_cluster_options` / :func:`cluster_options`, not by the constructor).

    Frozen and picklable: a write plan carries it to the executors as it is."""

    zk_connect: str | None
    #: ``broker.list`` parsed (:func:`parse_broker_list`): the brokers, sorted by id
    broker_list: tuple[BrokerAddress, ...] | None
    zk_session_timeout_ms: int = defaults.ZK_SESSION_TIMEOUT_MS
    zk_connection_timeout_ms: int = defaults.ZK_CONNECTION_TIMEOUT_MS
    socket_timeout_ms: int = defaults.SOCKET_TIMEOUT_MS
    socket_buffer_size: int = defaults.SOCKET_BUFFER_SIZE
    #: ``("digest", "user:password")`` for kazoo; a secret: never in a repr
    zk_auth: tuple[str, str] | None = field(default=None, repr=False)


def parse_cluster_options(options: Mapping[str, Any]) -> ClusterOptions:
    """The cluster options in ``options`` (other names are ignored here).

    Raises :class:`OptionError` when both or neither of ``zk.connect`` / ``broker.list`` are
    given, for an empty value, a malformed ``zk.connect`` or ``broker.list`` or an
    out-of-range number.
    """
    opts = lower_options(options)
    zk = opts.get("zk.connect")
    bl = opts.get("broker.list")
    if zk is not None and bl is not None:
        raise OptionError(
            "broker.list", "conflicts with zk.connect: give exactly one of zk.connect / broker.list"
        )
    if zk is None and bl is None:
        raise OptionError(
            "zk.connect",
            f"one of zk.connect ({_ZK_CONNECT_FORMAT}) or broker.list ({_BROKER_LIST_FORMAT}) "
            "is required",
        )
    if zk is not None:
        zk = zk.strip()
        if not zk:
            raise OptionError("zk.connect", f"is empty; expected {_ZK_CONNECT_FORMAT}")
        _check_zk_connect(zk)
    brokers = None if bl is None else tuple(parse_broker_list(bl).values())
    auth = credentials_from_options(opts)  # OptionError never quoting the password
    if auth is not None and zk is None:
        raise OptionError(ZK_AUTH_OPTIONS[0], "needs zk.connect (credentials for ZooKeeper)")
    return ClusterOptions(
        zk_connect=zk,
        broker_list=brokers,
        zk_session_timeout_ms=int_option(
            opts, "zk.sessiontimeout.ms", defaults.ZK_SESSION_TIMEOUT_MS, 1, INT32_MAX
        ),
        zk_connection_timeout_ms=int_option(
            opts, "zk.connectiontimeout.ms", defaults.ZK_CONNECTION_TIMEOUT_MS, 1, INT32_MAX
        ),
        socket_timeout_ms=int_option(
            opts, "socket.timeout.ms", defaults.SOCKET_TIMEOUT_MS, 1, INT32_MAX
        ),
        socket_buffer_size=int_option(
            opts, "socket.buffersize", defaults.SOCKET_BUFFER_SIZE, 1, INT32_MAX
        ),
        zk_auth=auth,
    )


def cluster_options(
    *,
    zk_connect: str | None = None,
    broker_list: str | None = None,
    zk_session_timeout_ms: int = defaults.ZK_SESSION_TIMEOUT_MS,
    zk_connection_timeout_ms: int = defaults.ZK_CONNECTION_TIMEOUT_MS,
    zk_auth: tuple[str, str] | None = None,
    socket_timeout_ms: int = defaults.SOCKET_TIMEOUT_MS,
    socket_buffer_size: int = defaults.SOCKET_BUFFER_SIZE,
) -> ClusterOptions:
    """The cluster options from Python values, checked exactly as :func:`parse_cluster_options`
    checks the option strings (a number must be an ``int``, not a bool or a float).

    ``zk_auth`` is the pair :mod:`kafka_pyspark._cluster.zk_auth` parses: ``("digest",
    "user:password")``.
    """
    numbers = {
        "zk.sessiontimeout.ms": zk_session_timeout_ms,
        "zk.connectiontimeout.ms": zk_connection_timeout_ms,
        "socket.timeout.ms": socket_timeout_ms,
        "socket.buffersize": socket_buffer_size,
    }
    for name, value in numbers.items():
        if isinstance(value, bool) or not isinstance(value, int):
            raise OptionError(name, f"must be an integer, got {value!r}")
    given = {"zk.connect": zk_connect, "broker.list": broker_list, **_auth_options(zk_auth)}
    strings = {k: v for k, v in given.items() if v is not None}
    return parse_cluster_options({**strings, **{k: str(v) for k, v in numbers.items()}})


def _auth_options(auth: tuple[str, str] | None) -> dict[str, str]:
    if auth is None:
        return {}
    scheme, credential = auth
    if scheme != ZK_AUTH_SCHEME:
        raise OptionError(ZK_AUTH_OPTIONS[0], f"scheme {scheme!r} is not {ZK_AUTH_SCHEME!r}")
    user, _, password = credential.partition(":")
    return dict(zip(ZK_AUTH_OPTIONS, (user, password), strict=True))


def _check_zk_connect(value: str) -> None:
    if "@" in value:  # kazoo would drop "user:password@" silently; the value is not quoted
        raise OptionError(
            "zk.connect",
            "holds '@': user info (user:password@host) is not taken there, nor an '@' in a "
            "chroot (a password holding '/' would pass for one), and the value is not shown; "
            f"give ZooKeeper credentials in {CREDENTIALS_HINT}",
        )
    hosts, _, chroot = value.partition("/")
    for entry in hosts.split(","):
        host, sep, port = entry.strip().rpartition(":")
        if not entry.strip() or (sep and not host):
            raise OptionError("zk.connect", f"entry {entry!r} of {value!r} is not 'host:port'")
        if sep and port_number(port) is None:
            raise OptionError("zk.connect", f"port {port!r} in {value!r} is not in 1..65535")
        problem = host_problem(host if sep else entry.strip())
        if problem is not None:
            raise OptionError("zk.connect", f"entry {entry!r} of {value!r}: {problem}")
    if chroot and (chroot.endswith("/") or "//" in chroot):
        raise OptionError("zk.connect", f"malformed chroot '/{chroot}' in {value!r}")
    if chroot and any(part in (".", "..") for part in chroot.split("/")):
        # ZooKeeper paths are absolute names, not file paths: kazoo refuses these
        raise OptionError(
            "zk.connect", f"chroot '/{chroot}' in {value!r} has a '.' or '..' component"
        )


def zk_chroot(zk_connect: str) -> str | None:
    """The chroot of a (checked) ``zk.connect`` string: ``"/kafka"``, or None without one."""
    _, slash, chroot = zk_connect.partition("/")
    return f"/{chroot}" if slash and chroot else None


# --- broker.list --------------------------------------------------------------------------------

# id : host : port. A host may be an IPv6 literal in brackets ("[::1]"), which 0.7 itself never
# accepted but costs nothing here; the brackets are not part of the host.
_ENTRY = re.compile(r"(?P<id>[^:]*):(?:\[(?P<v6>[^\]]*)\]|(?P<host>[^:]*)):(?P<port>[^:]*)\Z")


@dataclass(frozen=True)
class BrokerAddress:
    """A broker id and where to reach it."""

    id: int
    host: str
    port: int

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.id}:{host}:{self.port}"


def parse_broker_list(value: str) -> dict[int, BrokerAddress]:
    """Parse ``broker.list`` (``"id:host:port,id:host:port"``) into {id: address}, sorted by id.

    Whitespace around entries and fields is ignored. Raises ``OptionError('broker.list', ...)``
    for an empty list, an empty entry, a non-integer id, an empty host, a port outside
    1..65535, a repeated id, or two ids at the same host:port (every message would be read
    twice).
    """
    if not isinstance(value, str) or not value.strip():
        raise OptionError("broker.list", f"is empty; expected {_BROKER_LIST_FORMAT}")
    out: dict[int, BrokerAddress] = {}
    where: dict[tuple[str, int], int] = {}
    for n, raw in enumerate(value.split(","), start=1):
        entry = raw.strip()
        if not entry:
            raise OptionError("broker.list", f"entry {n} is empty in {value!r}")
        address = _broker_entry(entry)
        if address.id in out:
            raise OptionError(
                "broker.list", f"broker id {address.id} appears twice ({out[address.id]}, {entry})"
            )
        other = where.get((address.host.lower(), address.port))
        if other is not None:
            raise OptionError(
                "broker.list",
                f"brokers {other} and {address.id} are both {address.host}:{address.port}; "
                "its partitions would be read twice",
            )
        out[address.id] = address
        where[(address.host.lower(), address.port)] = address.id
    return dict(sorted(out.items()))


def _broker_entry(entry: str) -> BrokerAddress:
    m = _ENTRY.match(entry)
    if m is None:
        raise OptionError(
            "broker.list", f"entry {entry!r} is not 'id:host:port' (Kafka 0.7 producer format)"
        )
    id_text = m.group("id").strip()
    host = (m.group("v6") if m.group("v6") is not None else m.group("host") or "").strip()
    port_text = m.group("port").strip()
    if not is_decimal(id_text) or int(id_text) > INT32_MAX:
        raise OptionError(
            "broker.list", f"entry {entry!r}: broker id {id_text!r} is not an integer >= 0"
        )
    if not host or any(c.isspace() for c in host):
        raise OptionError("broker.list", f"entry {entry!r}: host {host!r} is not a host name")
    problem = host_problem(host) if m.group("v6") is None else None
    if problem is not None:
        raise OptionError("broker.list", f"entry {entry!r}: {problem}")
    if port_number(port_text) is None:
        raise OptionError("broker.list", f"entry {entry!r}: port {port_text!r} is not in 1..65535")
    return BrokerAddress(int(id_text), host, int(port_text))


def host_problem(host: str) -> str | None:
    """Why ``host`` cannot be resolved as a host name (None if it can be tried): the resolver
    refuses an empty label or one over 63 characters (RFC 1035) with a UnicodeError, which
    would otherwise surface from a connection thread."""
    try:
        host.encode("idna")
    except UnicodeError:
        return (
            f"host {host!r} is not a valid host name (a dot-separated label is empty or "
            "longer than 63 characters)"
        )
    return None


def port_number(text: str) -> int | None:
    """A TCP port given as ASCII decimal text, ``1..65535``; else None."""
    return int(text) if is_decimal(text) and 0 < int(text) < 65536 else None
