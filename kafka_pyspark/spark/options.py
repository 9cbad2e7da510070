"""Read options and the cluster options: parsed and validated once, into frozen dataclasses.

Pure: no sockets, no Spark session. The readers call :func:`parse_read_options` in their
``__init__``; :meth:`Kafka07DataSource.schema` calls :func:`validate_read_options` so that a bad
option fails at ``load()``, before any query runs. The writer's options live in
:mod:`kafka_pyspark.spark.write_options`, which reuses :func:`parse_cluster_options`.

Spark hands options over with lower-cased names (a ``CaseInsensitiveDict``); errors name the
option as the user documentation spells it (``startingOffsets``, not ``startingoffsets``).

Cluster (all modes; API.md "Where the cluster is")::

    zk.connect | broker.list (exactly one)     zk.sessiontimeout.ms 6000
    zk.connectiontimeout.ms 6000               socket.timeout.ms 30000
    socket.buffersize 65536                    zk.auth (digest:user:password; a secret)

Reading (batch and stream; API.md "Reading")::

    subscribe | subscribePattern | assign (exactly one)
    startingOffsets   earliest | latest | group | {"topic": {"0-1": 1234, "0-2": -2}}
                      (default: batch earliest, stream latest)
    startingTimestamp epoch ms (instead of startingOffsets)
    endingOffsets     batch only: latest | JSON (default latest)
    group.id, failOnDataLoss (true), minPartitions, fetch.size (1048576),
    max.fetch.size (104857600), verifyChecksums (true), max.decompressed.size (67108864)
    maxBytesPerTrigger, commitToGroup (false), zk.outage.max.ms (600000): stream only
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Literal

from kafka_pyspark import defaults
from kafka_pyspark.errors import OptionError, TopicNameError
from kafka_pyspark.names import parse_partition_key
from kafka_pyspark.wire.protocol import INT32_MAX, INT64_MAX, OFFSETS_EARLIEST
from kafka_pyspark.wire.topics import validate_topic_name

__all__ = [
    "BATCH_ONLY_OPTIONS",
    "CLUSTER_OPTIONS",
    "READ_OPTIONS",
    "STREAM_ONLY_OPTIONS",
    "WRITE_OPTIONS",
    "Assign",
    "ClusterOptions",
    "OffsetSpec",
    "ReadOptions",
    "Subscribe",
    "SubscribePattern",
    "Subscription",
    "canonical_name",
    "java_regex_to_python",
    "parse_cluster_options",
    "parse_offsets_json",
    "parse_read_options",
    "validate_read_options",
]

Mode = Literal["batch", "stream"]

# Canonical spellings (as documented); Spark passes the names lower-cased.
_CLUSTER_NAMES = (
    "zk.connect",
    "broker.list",
    "zk.sessiontimeout.ms",
    "zk.connectiontimeout.ms",
    "zk.auth",
    "socket.timeout.ms",
    "socket.buffersize",
)
_COMMON_READ_NAMES = (
    "subscribe",
    "subscribePattern",
    "assign",
    "startingOffsets",
    "startingTimestamp",
    "group.id",
    "failOnDataLoss",
    "minPartitions",
    "fetch.size",
    "max.fetch.size",
    "verifyChecksums",
    "max.decompressed.size",
)
_BATCH_ONLY_NAMES = ("endingOffsets",)
_STREAM_ONLY_NAMES = ("maxBytesPerTrigger", "commitToGroup", "zk.outage.max.ms")

_CANONICAL: dict[str, str] = {
    n.lower(): n
    for n in (*_CLUSTER_NAMES, *_COMMON_READ_NAMES, *_BATCH_ONLY_NAMES, *_STREAM_ONLY_NAMES)
}

#: lower-cased names of the cluster options (every mode)
CLUSTER_OPTIONS = frozenset(n.lower() for n in _CLUSTER_NAMES)
#: lower-cased names of every read option (batch or stream; not the cluster options)
READ_OPTIONS = frozenset(
    n.lower() for n in (*_COMMON_READ_NAMES, *_BATCH_ONLY_NAMES, *_STREAM_ONLY_NAMES)
)
BATCH_ONLY_OPTIONS = frozenset(n.lower() for n in _BATCH_ONLY_NAMES)
STREAM_ONLY_OPTIONS = frozenset(n.lower() for n in _STREAM_ONLY_NAMES)
#: lower-cased names of the writer's own options (:mod:`kafka_pyspark.spark.write_options`)
WRITE_OPTIONS = frozenset(
    {"topic", "compression.codec", "batch.size", "max.message.size", "partitioner"}
)

_INTEGER = re.compile(r"[+-]?[0-9]+\Z")


def canonical_name(name: str) -> str:
    """The documented spelling of an option name (``startingoffsets`` -> ``startingOffsets``)."""
    return _CANONICAL.get(name.lower(), name)


# --- small value parsers ----------------------------------------------------------------------


def _lower(options: Mapping[str, Any]) -> dict[str, str]:
    out: dict[str, str] = {}
    for k, v in options.items():
        key = str(k).lower()
        if v is None:
            raise OptionError(canonical_name(key), "has no value")
        out[key] = str(v)
    return out


def _int(opts: Mapping[str, str], name: str, default: int, low: int, high: int) -> int:
    raw = opts.get(name.lower())
    if raw is None:
        return default
    return _int_value(name, raw, low, high)


def _int_value(name: str, raw: str, low: int, high: int) -> int:
    text = raw.strip()
    if not _INTEGER.match(text):
        raise OptionError(name, f"must be an integer, got {raw!r}")
    value = int(text)
    if not low <= value <= high:
        raise OptionError(name, f"must be between {low} and {high}, got {value}")
    return value


def _bool(opts: Mapping[str, str], name: str, default: bool) -> bool:
    raw = opts.get(name.lower())
    if raw is None:
        return default
    text = raw.strip().lower()
    if text == "true":
        return True
    if text == "false":
        return False
    raise OptionError(name, f"must be true or false, got {raw!r}")


def _topic(option: str, name: str) -> str:
    try:
        return validate_topic_name(name)
    except TopicNameError as e:
        raise OptionError(option, str(e)) from e


def _partition_key(option: str, topic: str, key: Any) -> tuple[int, int]:
    parsed = parse_partition_key(key)
    if parsed is None:
        raise OptionError(
            option,
            f"topic {topic!r}: {key!r} is not 'brokerId-partition' (e.g. \"0-1\", as 0.7 names "
            "broker-partitions)",
        )
    broker, partition = parsed
    if broker > INT32_MAX or partition > INT32_MAX:
        raise OptionError(option, f"topic {topic!r}: {key!r} is out of the int32 range")
    return broker, partition


class _DuplicateKey(Exception):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """json ``object_pairs_hook``: a key given twice is an error (json.loads keeps the last)."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


def _json(option: str, raw: str) -> Any:
    try:
        return json.loads(raw, object_pairs_hook=_unique_keys)
    except _DuplicateKey as e:
        raise OptionError(
            option,
            f"key {e.key!r} appears twice in one JSON object (which one is meant?): {raw!r}",
        ) from None
    except ValueError as e:  # json.JSONDecodeError is a ValueError
        raise OptionError(option, f"is not valid JSON ({e}): {raw!r}") from e


# --- the cluster ------------------------------------------------------------------------------


@dataclass(frozen=True)
class ClusterOptions:
    """Where the cluster is: exactly one of ``zk_connect`` / ``broker_list``."""

    zk_connect: str | None
    broker_list: str | None
    zk_session_timeout_ms: int = defaults.ZK_SESSION_TIMEOUT_MS
    zk_connection_timeout_ms: int = defaults.ZK_CONNECTION_TIMEOUT_MS
    socket_timeout_ms: int = defaults.SOCKET_TIMEOUT_MS
    socket_buffer_size: int = defaults.SOCKET_BUFFER_SIZE
    zk_auth: str | None = field(default=None, repr=False)  # a secret: never in a repr

    def cluster_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for :class:`kafka_pyspark.cluster.Cluster`."""
        return {
            "zk_connect": self.zk_connect,
            "broker_list": self.broker_list,
            "zk_session_timeout_ms": self.zk_session_timeout_ms,
            "zk_connection_timeout_ms": self.zk_connection_timeout_ms,
            "zk_auth": self.zk_auth,
            "socket_timeout_ms": self.socket_timeout_ms,
            "socket_buffer_size": self.socket_buffer_size,
        }


def parse_cluster_options(options: Mapping[str, Any]) -> ClusterOptions:
    """The cluster options in ``options`` (other names are ignored here).

    Raises :class:`OptionError` when both or neither of ``zk.connect`` / ``broker.list`` are
    given, for an empty value, a malformed ``broker.list`` or an out-of-range number.
    """
    opts = _lower(options)
    zk = opts.get("zk.connect")
    bl = opts.get("broker.list")
    if zk is not None and bl is not None:
        raise OptionError(
            "broker.list", "conflicts with zk.connect: give exactly one of zk.connect / broker.list"
        )
    if zk is None and bl is None:
        raise OptionError(
            "zk.connect",
            "one of zk.connect ('host:port[,host:port...][/chroot]') or broker.list "
            "('id:host:port[,id:host:port...]') is required",
        )
    if zk is not None:
        zk = zk.strip()
        if not zk:
            raise OptionError(
                "zk.connect", "is empty; expected 'host:port[,host:port...][/chroot]'"
            )
        _check_zk_connect(zk)
    if bl is not None:
        from kafka_pyspark.cluster import parse_broker_list

        parse_broker_list(bl)  # raises OptionError('broker.list', ...)
    auth = opts.get("zk.auth")
    if auth is not None:
        from kafka_pyspark.zk_auth import parse_zk_auth

        if zk is None:
            raise OptionError("zk.auth", "needs zk.connect (credentials for ZooKeeper)")
        parse_zk_auth(auth)  # raises OptionError('zk.auth', ...) without quoting the secret
    return ClusterOptions(
        zk_connect=zk,
        broker_list=bl,
        zk_session_timeout_ms=_int(
            opts, "zk.sessiontimeout.ms", defaults.ZK_SESSION_TIMEOUT_MS, 1, INT32_MAX
        ),
        zk_connection_timeout_ms=_int(
            opts, "zk.connectiontimeout.ms", defaults.ZK_CONNECTION_TIMEOUT_MS, 1, INT32_MAX
        ),
        socket_timeout_ms=_int(opts, "socket.timeout.ms", defaults.SOCKET_TIMEOUT_MS, 1, INT32_MAX),
        socket_buffer_size=_int(
            opts, "socket.buffersize", defaults.SOCKET_BUFFER_SIZE, 1, INT32_MAX
        ),
        zk_auth=auth,
    )


def _check_zk_connect(value: str) -> None:
    hosts, _, chroot = value.partition("/")
    for entry in hosts.split(","):
        host, sep, port = entry.strip().rpartition(":")
        if not entry.strip() or (sep and not host):
            raise OptionError("zk.connect", f"entry {entry!r} of {value!r} is not 'host:port'")
        if sep and (not port.isdigit() or not 0 < int(port) < 65536):
            raise OptionError("zk.connect", f"port {port!r} in {value!r} is not in 1..65535")
    if chroot and (chroot.endswith("/") or "//" in chroot):
        raise OptionError("zk.connect", f"malformed chroot '/{chroot}' in {value!r}")


# --- what to read -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Subscribe:
    """``subscribe``: topics by name."""

    topics: tuple[str, ...]

    def allows(self, topic: str) -> bool:
        return topic in self.topics


@dataclass(frozen=True)
class SubscribePattern:
    """``subscribePattern``: every registered topic the pattern matches in full.

    ``pattern`` is the user's text; ``regex`` the Python translation (see
    :func:`java_regex_to_python`).
    """

    pattern: str
    regex: str

    @cached_property
    def _compiled(self) -> re.Pattern[str]:
        return re.compile(self.regex)

    def allows(self, topic: str) -> bool:
        return self._compiled.fullmatch(topic) is not None


@dataclass(frozen=True)
class Assign:
    """``assign``: explicit ``(topic, broker, partition)`` triples, sorted."""

    partitions: tuple[tuple[str, int, int], ...]

    @property
    def topics(self) -> tuple[str, ...]:
        return tuple(sorted({t for t, _, _ in self.partitions}))

    def allows(self, topic: str) -> bool:
        return any(t == topic for t, _, _ in self.partitions)


Subscription = Subscribe | SubscribePattern | Assign

OffsetKind = Literal["earliest", "latest", "group", "timestamp", "specific"]


@dataclass(frozen=True)
class OffsetSpec:
    """Where a read starts (or ends).

    ``kind``: ``earliest``, ``latest``, ``group`` (the committed offsets of ``group.id``),
    ``timestamp`` (``startingTimestamp``) or ``specific`` (JSON). For ``specific``,
    ``offsets`` maps ``(topic, broker, partition)`` to a byte offset, or to -2 earliest / -1
    latest (``wire.OFFSETS_EARLIEST``/``OFFSETS_LATEST``); broker-partitions it does not name
    use ``default``.
    """

    kind: OffsetKind
    offsets: dict[tuple[str, int, int], int] = field(default_factory=dict)
    timestamp: int | None = None
    default: Literal["earliest", "latest"] = "earliest"

    def __hash__(self) -> int:
        return hash((self.kind, tuple(sorted(self.offsets.items())), self.timestamp))


def parse_offsets_json(option: str, raw: str) -> dict[tuple[str, int, int], int]:
    """``{"topic": {"0-1": 1234, "0-2": -2}}`` -> ``{("topic", 0, 1): 1234, ...}``."""
    doc = _json(option, raw)
    if not isinstance(doc, dict) or not doc:
        raise OptionError(
            option, f'must be a non-empty JSON object {{"topic": {{"0-1": 1234}}}}, got {raw!r}'
        )
    out: dict[tuple[str, int, int], int] = {}
    for topic, parts in doc.items():
        _topic(option, topic)
        if not isinstance(parts, dict) or not parts:
            raise OptionError(
                option,
                f'topic {topic!r}: expected a non-empty object {{"brokerId-partition": offset}}, '
                f"got {json.dumps(parts)}",
            )
        for key, value in parts.items():
            broker, partition = _partition_key(option, topic, key)
            if isinstance(value, bool) or not isinstance(value, int):
                raise OptionError(
                    option,
                    f"topic {topic!r} {key}: offset must be an integer (a byte offset, -2 "
                    f"earliest, -1 latest), got {json.dumps(value)}",
                )
            if not OFFSETS_EARLIEST <= value <= INT64_MAX:
                raise OptionError(
                    option,
                    f"topic {topic!r} {key}: offset {value} is negative (only -2 earliest and "
                    "-1 latest are allowed)",
                )
            if out.get((topic, broker, partition), value) != value:
                raise OptionError(
                    option,
                    f"topic {topic!r}: broker-partition {broker}-{partition} is given twice "
                    f"(as {key!r}, with offsets {out[(topic, broker, partition)]} and {value})",
                )
            out[(topic, broker, partition)] = value
    return out


def _parse_assign(raw: str) -> Assign:
    doc = _json("assign", raw)
    if not isinstance(doc, dict) or not doc:
        raise OptionError(
            "assign", f'must be a non-empty JSON object {{"topic": ["0-0", "0-1"]}}, got {raw!r}'
        )
    found: set[tuple[str, int, int]] = set()
    for topic, keys in doc.items():
        _topic("assign", topic)
        if not isinstance(keys, list) or not keys:
            raise OptionError(
                "assign",
                f'topic {topic!r}: expected a non-empty list of "brokerId-partition" strings, '
                f"got {json.dumps(keys)}",
            )
        for key in keys:
            broker, partition = _partition_key("assign", topic, key)
            found.add((topic, broker, partition))
    return Assign(tuple(sorted(found)))


def _parse_subscribe(raw: str) -> Subscribe:
    topics: list[str] = []
    for part in raw.split(","):
        name = part.strip()
        if name and name not in topics:
            topics.append(_topic("subscribe", name))
    if not topics:
        raise OptionError("subscribe", f"names no topic: {raw!r}")
    return Subscribe(tuple(topics))


# Java's POSIX character classes (java.util.regex.Pattern, US-ASCII), as class contents.
_POSIX = {
    "Lower": "a-z",
    "Upper": "A-Z",
    "ASCII": "\\x00-\\x7f",
    "Alpha": "a-zA-Z",
    "Digit": "0-9",
    "Alnum": "a-zA-Z0-9",
    "Punct": "!-/:-@\\[-`{-~",
    "Graph": "!-~",
    "Print": " -~",
    "Blank": " \\t",
    "Cntrl": "\\x00-\\x1f\\x7f",
    "XDigit": "0-9a-fA-F",
    "Space": " \\t\\n\\x0b\\f\\r",
    "javaLowerCase": "a-z",
    "javaUpperCase": "A-Z",
}
_P_CLASS = re.compile(r"\\([pP])\{(?:Is)?(\w+)\}")


def java_regex_to_python(pattern: str) -> str:
    """Translate the Java-only constructs of a ``java.util.regex`` pattern to Python ``re``.

    Handles ``\\Q...\\E`` quoting and the ASCII POSIX classes ``\\p{Alnum}`` etc. (also
    negated, ``\\P{...}``, and inside ``[...]``). Everything else topic patterns use (classes,
    alternation, quantifiers, groups, anchors; possessive quantifiers and atomic groups since
    Python 3.11) is spelled the same. Raises ``KeyError`` naming an unknown ``\\p`` class.
    """
    out: list[str] = []
    i, n = 0, len(pattern)
    depth = 0  # inside [...]
    while i < n:
        c = pattern[i]
        if c == "\\" and i + 1 < n:
            nxt = pattern[i + 1]
            if nxt == "Q":
                end = pattern.find("\\E", i + 2)
                literal = pattern[i + 2 :] if end < 0 else pattern[i + 2 : end]
                out.append(re.escape(literal))
                i = n if end < 0 else end + 2
                continue
            if nxt in "pP":
                m = _P_CLASS.match(pattern, i)
                if m is None or m.group(2) not in _POSIX:
                    name = m.group(2) if m else pattern[i : i + 3]
                    raise KeyError(name)
                body = _POSIX[m.group(2)]
                negated = m.group(1) == "P"
                if depth:
                    if negated:
                        raise KeyError(f"\\P{{{m.group(2)}}} inside [...]")
                    out.append(body)
                else:
                    out.append(f"[^{body}]" if negated else f"[{body}]")
                i = m.end()
                continue
            out.append(pattern[i : i + 2])
            i += 2
            continue
        if c == "[":
            depth += 1
        elif c == "]" and depth:
            depth -= 1
        out.append(c)
        i += 1
    return "".join(out)


def _parse_pattern(raw: str) -> SubscribePattern:
    # As 0.7's Whitelist (kafka.consumer.TopicFilter): trim, commas are alternation, spaces are
    # dropped, quotes a properties file may bring are stripped; the topic must match in full.
    text = raw.strip().replace(",", "|").replace(" ", "")
    text = re.sub(r"^[\"']+", "", text)
    text = re.sub(r"[\"']+$", "", text)
    if not text:
        raise OptionError("subscribePattern", f"is an empty pattern: {raw!r}")
    try:
        regex = java_regex_to_python(text)
    except KeyError as e:
        raise OptionError(
            "subscribePattern", f"{raw!r}: unsupported character class {e.args[0]}"
        ) from None
    try:
        re.compile(regex)
    except re.error as e:
        raise OptionError("subscribePattern", f"{raw!r} is not a valid regex: {e}") from e
    return SubscribePattern(raw, regex)


# --- all read options -------------------------------------------------------------------------


@dataclass(frozen=True)
class ReadOptions:
    """Every read option, parsed and checked (see the module docstring for defaults)."""

    mode: Mode
    cluster: ClusterOptions
    subscription: Subscription
    starting: OffsetSpec
    ending: OffsetSpec
    group_id: str | None = None
    fail_on_data_loss: bool = True
    min_partitions: int | None = None
    fetch_size: int = defaults.FETCH_SIZE
    max_fetch_size: int = defaults.MAX_FETCH_SIZE
    verify_checksums: bool = True
    max_decompressed_size: int = defaults.MAX_DECOMPRESSED_SIZE
    max_bytes_per_trigger: int | None = None
    commit_to_group: bool = False
    zk_outage_max_ms: int = defaults.ZK_OUTAGE_MAX_MS


def _check_names(opts: Mapping[str, str], mode: Mode | None) -> None:
    for key in sorted(opts):
        if key in CLUSTER_OPTIONS or key in READ_OPTIONS:
            if mode == "batch" and key in STREAM_ONLY_OPTIONS:
                raise OptionError(
                    canonical_name(key),
                    "is a streaming option (spark.readStream); it has no meaning in a batch read",
                )
            if mode == "stream" and key in BATCH_ONLY_OPTIONS:
                raise OptionError(
                    canonical_name(key),
                    "is a batch option (spark.read); a stream has no end",
                )
            continue
        if key in ("path", "paths"):
            raise OptionError(
                key,
                "reads segment files (docs/segments.md) and conflicts with zk.connect/broker.list",
            )
        if key in WRITE_OPTIONS:
            raise OptionError(key, "is a write option; it has no meaning when reading")
        known = sorted(canonical_name(k) for k in CLUSTER_OPTIONS | READ_OPTIONS)
        raise OptionError(key, f"unknown option for reading; known options: {', '.join(known)}")


def _parse_subscription(opts: Mapping[str, str], cluster: ClusterOptions) -> Subscription:
    given = [n for n in ("subscribe", "subscribePattern", "assign") if n.lower() in opts]
    if len(given) > 1:
        raise OptionError(given[1], f"conflicts with {given[0]}: give exactly one of "
                          "subscribe, subscribePattern, assign")
    if not given:
        raise OptionError(
            "subscribe", "one of subscribe, subscribePattern or assign is required"
        )
    raw = opts[given[0].lower()]
    if given[0] == "subscribe":
        return _parse_subscribe(raw)
    if given[0] == "assign":
        return _parse_assign(raw)
    sub = _parse_pattern(raw)
    if cluster.zk_connect is None:
        raise OptionError(
            "subscribePattern",
            "needs zk.connect: topics are listed from the ZooKeeper registry (broker.list "
            "names brokers, not topics)",
        )
    return sub


def _parse_offset_spec(
    opts: Mapping[str, str],
    name: str,
    allowed: tuple[str, ...],
    default: Literal["earliest", "latest"],
) -> OffsetSpec:
    raw = opts.get(name.lower())
    if raw is None:
        return OffsetSpec(default, default=default)
    text = raw.strip()
    if text.lower() in allowed:
        kind: OffsetKind = text.lower()  # type: ignore[assignment]
        return OffsetSpec(kind, default=default)
    if text.startswith("{"):
        return OffsetSpec("specific", parse_offsets_json(name, text), default=default)
    words = ", ".join(allowed)
    raise OptionError(name, f"must be {words} or JSON {{\"topic\": {{\"0-1\": 1234}}}}, "
                      f"got {raw!r}")


def _check_offsets_subscribed(option: str, spec: OffsetSpec, sub: Subscription) -> None:
    for topic, broker, partition in sorted(spec.offsets):
        if isinstance(sub, Assign):
            if (topic, broker, partition) not in sub.partitions:
                raise OptionError(
                    option, f"names topic {topic!r} {broker}-{partition}, which assign does not"
                )
        elif not sub.allows(topic):
            what = "subscribe" if isinstance(sub, Subscribe) else "subscribePattern"
            raise OptionError(option, f"names topic {topic!r}, which {what} does not include")


def parse_read_options(options: Mapping[str, Any], mode: Mode = "batch") -> ReadOptions:
    """All read options for ``mode``; :class:`OptionError` naming the option on any problem.

    Unknown names, write options, options of the other mode, conflicts (``zk.connect`` and
    ``broker.list``; two of ``subscribe``/``subscribePattern``/``assign``;
    ``startingOffsets`` and ``startingTimestamp``), malformed JSON and out-of-range numbers
    are all errors.
    """
    if mode not in ("batch", "stream"):
        raise ValueError(f"mode must be 'batch' or 'stream', got {mode!r}")
    return _parse(options, mode)


def validate_read_options(options: Mapping[str, Any]) -> None:
    """Check read options valid in either mode (batch or stream is not known yet).

    For ``DataSource.schema()``, which Spark calls at ``load()`` for ``spark.read`` and
    ``spark.readStream`` alike; the reader re-checks the mode-specific options.
    """
    _parse(options, None)


def _parse(options: Mapping[str, Any], mode: Mode | None) -> ReadOptions:
    opts = _lower(options)
    _check_names(opts, mode)
    cluster = parse_cluster_options(opts)
    sub = _parse_subscription(opts, cluster)

    start_default: Literal["earliest", "latest"] = "latest" if mode == "stream" else "earliest"
    if "startingtimestamp" in opts:
        if "startingoffsets" in opts:
            raise OptionError(
                "startingTimestamp",
                "conflicts with startingOffsets: give at most one of them",
            )
        ts = _int_value("startingTimestamp", opts["startingtimestamp"], 0, INT64_MAX)
        starting = OffsetSpec("timestamp", timestamp=ts, default=start_default)
    else:
        starting = _parse_offset_spec(
            opts, "startingOffsets", ("earliest", "latest", "group"), start_default
        )
    ending = _parse_offset_spec(opts, "endingOffsets", ("latest",), "latest")
    _check_offsets_subscribed("startingOffsets", starting, sub)
    _check_offsets_subscribed("endingOffsets", ending, sub)
    if starting.kind == "specific" and ending.kind == "specific":
        for key, start in starting.offsets.items():
            end = ending.offsets.get(key)
            if start >= 0 and end is not None and end >= 0 and start > end:
                topic, broker, partition = key
                raise OptionError(
                    "startingOffsets",
                    f"topic {topic!r} {broker}-{partition}: start {start} is after "
                    f"endingOffsets {end}",
                )

    group_id = opts.get("group.id")
    if group_id is not None:
        group_id = group_id.strip()
        if not group_id or group_id in (".", "..") or "/" in group_id:
            raise OptionError("group.id", f"{opts['group.id']!r} is not a legal group id "
                              "(a ZooKeeper node name)")
    commit = _bool(opts, "commitToGroup", False)
    if starting.kind == "group" or commit:
        needing = "startingOffsets=group" if starting.kind == "group" else "commitToGroup"
        if group_id is None:
            raise OptionError("group.id", f"is required by {needing}")
        if cluster.zk_connect is None:
            raise OptionError(
                "zk.connect", f"{needing} needs zk.connect: 0.7 keeps group offsets in ZooKeeper"
            )

    min_partitions: int | None = None
    if "minpartitions" in opts:
        min_partitions = _int_value("minPartitions", opts["minpartitions"], 1, 1_000_000)
    max_fetch = _int(opts, "max.fetch.size", defaults.MAX_FETCH_SIZE, 1, INT32_MAX)
    fetch = _int(opts, "fetch.size", min(defaults.FETCH_SIZE, max_fetch), 1, INT32_MAX)
    if fetch > max_fetch:
        raise OptionError(
            "fetch.size", f"{fetch} is larger than max.fetch.size ({max_fetch})"
        )
    max_bytes: int | None = None
    if "maxbytespertrigger" in opts:
        max_bytes = _int_value("maxBytesPerTrigger", opts["maxbytespertrigger"], 1, INT64_MAX)

    return ReadOptions(
        mode=mode or "batch",
        cluster=cluster,
        subscription=sub,
        starting=starting,
        ending=ending,
        group_id=group_id,
        fail_on_data_loss=_bool(opts, "failOnDataLoss", True),
        min_partitions=min_partitions,
        fetch_size=fetch,
        max_fetch_size=max_fetch,
        verify_checksums=_bool(opts, "verifyChecksums", True),
        max_decompressed_size=_int(
            opts, "max.decompressed.size", defaults.MAX_DECOMPRESSED_SIZE, 1, INT64_MAX
        ),
        max_bytes_per_trigger=max_bytes,
        commit_to_group=commit,
        zk_outage_max_ms=_int(opts, "zk.outage.max.ms", defaults.ZK_OUTAGE_MAX_MS, 0, INT64_MAX),
    )
