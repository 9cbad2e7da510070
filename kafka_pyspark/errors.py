"""One exception hierarchy for the whole connector.

Every error a user can see derives from :class:`KafkaError`. Kafka 0.7 wire error codes map to
typed :class:`BrokerError` subclasses through :func:`for_code`, with :class:`UnknownCodeError`
as the fallback for any code 0.7.2's ``ErrorMapping`` does not define.

Translation point: code that parses untrusted bytes catches ``struct.error``/``ValueError``/
``IndexError`` in one place and re-raises a domain error ``from`` the original.
"""

from __future__ import annotations

from typing import Any, TypeVar


class KafkaError(Exception):
    """Base class of every error raised by kafka_pyspark.

    Pickles whole (class, message and attributes such as ``offset`` or ``unconfirmed``),
    whatever a subclass's constructor takes: a write task's error reaches the driver intact.
    """

    def __reduce__(self) -> tuple[Any, ...]:
        return (_remade, (type(self), self.args, dict(self.__dict__)))


E = TypeVar("E", bound=KafkaError)


def _remade(cls: type[E], args: tuple[Any, ...], state: dict[str, Any]) -> E:
    new = cls.__new__(cls)
    new.args = args
    new.__dict__.update(state)
    return new


def with_context(error: E, context: str = "", *, then: str = "") -> E:
    """``error`` again with context added to its message, ``"<context>: <message><then>"``.

    The one way to add context to an error: same class and attributes (``offset``, ``code``,
    ``option``, ...) whatever the class's constructor takes. Raise it ``from`` the original.
    """
    text = f"{context}: {error}" if context else str(error)
    return _remade(type(error), (text + then,), dict(error.__dict__))


# --- configuration / user input -------------------------------------------------------------


class OptionError(KafkaError, ValueError):
    """A data source option is unknown, malformed, out of range or conflicts with another."""

    def __init__(self, option: str, message: str) -> None:
        self.option = option
        super().__init__(f"option '{option}': {message}")


class CredentialsError(OptionError):
    """ZooKeeper credentials read from a file or an environment variable are malformed or
    unreadable. ``option`` names the source (``"file /etc/k07.auth"``); the message never
    quotes the credentials."""

    def __init__(self, source: str, message: str) -> None:
        self.option = source
        KafkaError.__init__(self, f"ZooKeeper credentials from {source}: {message}")


class SegmentPathError(OptionError):
    """What the ``path`` option names cannot be read as one log per partition: a segment file
    or partition directory whose name is outside the legal ranges, both 0.7 ``.kafka`` and
    ``.log`` files in one partition, or one partition in two directories. ``path`` names the
    file or directory at fault (the first of two)."""

    def __init__(self, path: str, message: str) -> None:
        self.option = "path"
        self.path = path
        KafkaError.__init__(self, f"option 'path': {path}: {message}")


class OffsetFormatError(KafkaError, ValueError):
    """A stream offset (from Spark's checkpoint) is not ``{topic: {"brokerId-partition": n}}``."""


class TopicNameError(KafkaError, ValueError):
    """A topic name is not a legal 0.7 topic (directory) name."""


class SchemaError(KafkaError, ValueError):
    """A DataFrame handed to the writer does not have the columns/types the contract requires."""


# --- wire protocol -------------------------------------------------------------------------


class ProtocolError(KafkaError):
    """Bytes on the wire do not follow the 0.7 request/response layout."""


class BrokerError(KafkaError):
    """A broker answered with a non-zero 0.7 error code."""

    code: int = -1
    name: str = "Unknown"

    def __init__(self, message: str = "", *, code: int | None = None) -> None:
        if code is not None:
            self.code = code
        text = f"{self.name} (error code {self.code})"
        super().__init__(f"{text}: {message}" if message else text)


class UnknownError(BrokerError):
    code = -1
    name = "Unknown"


class OffsetOutOfRangeError(BrokerError):
    code = 1
    name = "OffsetOutOfRange"


class InvalidMessageError(BrokerError):
    code = 2
    name = "InvalidMessage"


class WrongPartitionError(BrokerError):
    code = 3
    name = "WrongPartition"


class InvalidFetchSizeError(BrokerError):
    code = 4
    name = "InvalidFetchSize"


class UnknownCodeError(BrokerError):
    """Fallback for an error code 0.7.2 does not define."""

    name = "UnknownErrorCode"


_BY_CODE: dict[int, type[BrokerError]] = {
    cls.code: cls
    for cls in (
        UnknownError,
        OffsetOutOfRangeError,
        InvalidMessageError,
        WrongPartitionError,
        InvalidFetchSizeError,
    )
}


def for_code(code: int) -> type[BrokerError]:
    """The exception class for a 0.7 error code (``UnknownCodeError`` for unknown codes).

    Code 0 (NoError) is not an error; asking for it raises ``ValueError``.
    """
    if code == 0:
        raise ValueError("error code 0 is NoError, not an error")
    return _BY_CODE.get(code, UnknownCodeError)


def raise_for_code(code: int, message: str = "") -> None:
    """Raise the typed error for ``code``; return quietly for 0 (NoError)."""
    if code == 0:
        return
    cls = for_code(code)
    if cls is UnknownCodeError:
        raise UnknownCodeError(message, code=code)
    raise cls(message)


# --- message sets (codec) ------------------------------------------------------------------


class MessageError(KafkaError):
    """A message set could not be decoded or encoded.

    ``offset`` is the absolute byte offset of the offending (outer) message when known.
    """

    def __init__(self, message: str, *, offset: int | None = None) -> None:
        self.offset = offset
        super().__init__(message if offset is None else f"{message} (at offset {offset})")


class CorruptMessageError(MessageError):
    """CRC32 mismatch."""


class InvalidMessageSizeError(MessageError):
    """A message length field is negative, too small for its header, or absurd."""


class UnknownMagicError(MessageError):
    """A message has a magic byte this codec does not understand."""


class UnknownCodecError(MessageError):
    """A message's compression attribute names a codec this codec does not know."""


class DecompressionError(MessageError):
    """A compressed payload could not be decompressed."""


class DecompressedSizeError(MessageError):
    """A compressed wrapper decompresses past ``max.decompressed.size``."""


class MessageTooLargeError(MessageError):
    """Writing: a message or compressed wrapper is larger than ``max.message.size``."""


class CodecUnavailableError(MessageError):
    """A compression library needed for a codec is not installed."""


# --- I/O -----------------------------------------------------------------------------------


class SegmentFileError(KafkaError):
    """A log segment file read directly (the ``path`` option) is corrupt or unreadable.

    ``path`` names the file and ``position`` the byte position in it of the entry at fault.
    """

    def __init__(self, path: str, position: int | None, message: str) -> None:
        self.path = path
        self.position = position
        where = f"segment file {path}" + ("" if position is None else f", byte {position}")
        super().__init__(f"{where}: {message}")


class BrokerConnectionError(KafkaError, ConnectionError):
    """A broker could not be reached, or closed/reset the connection."""


class BrokerTimeoutError(BrokerConnectionError, TimeoutError):
    """A broker did not answer within ``socket.timeout.ms``."""


class FetchSizeTooSmallError(KafkaError):
    """A single message is larger than ``max.fetch.size``."""


class DataLossError(KafkaError):
    """Requested offsets are no longer on the broker and ``failOnDataLoss`` is true."""


def data_loss_hint(remedy: str) -> str:
    """The one wording of the way past lost data: ``Set failOnDataLoss=false to <remedy>``."""
    return f"Set failOnDataLoss=false to {remedy}"


def data_loss_error(what: str, remedy: str) -> DataLossError:
    """``failOnDataLoss=true``: ``<what>. Set failOnDataLoss=false to <remedy>.``"""
    return DataLossError(f"{what}. {data_loss_hint(remedy)}.")


#: how to get pyspark where it is missing (the data source's import error, ``kafka07 produce``)
INSTALL_SPARK = "pip install 'pyspark>=4.0'"


def data_loss_skipped(what: str, action: str) -> str:
    """``failOnDataLoss=false``: the warning text, ``<what>; failOnDataLoss=false: <action>``."""
    return f"{what}; failOnDataLoss=false: {action}"


class RegistryError(KafkaError):
    """ZooKeeper was unreachable, timed out, or holds data not in 0.7's registry format."""


class RegistryUnavailableError(RegistryError):
    """ZooKeeper could not be reached, or did not answer within the registry's time bound.

    Transient by nature (a ZooKeeper restart, a network partition): a stream keeps going on
    what it last saw for up to ``zk.outage.max.ms`` (docs/streaming.md)."""


class RegistryPermissionError(RegistryError, PermissionError):
    """ZooKeeper refused an operation on a node: its ACL does not allow this session
    (no ZooKeeper credentials, or credentials without the needed permission). Names the node.

    ``denied`` is the refusal alone (ZooKeeper, operation, node) and ``credentials_given``
    whether the session had credentials: a caller that takes credentials its own way (the
    ``kafka07`` command) words its own advice from them."""

    denied: str = ""
    credentials_given: bool = False


class NoBrokersRegisteredError(RegistryError):
    """The ZooKeeper registry (under the given chroot) has no ``/brokers/ids`` node, or no
    broker registered in it: a wrong chroot, usually. The message names the path and any
    chroot where a registry was found."""


class TopicNotFoundError(KafkaError):
    """A topic asked for by name is not in the registry / on any broker."""


# --- client (sockets) ----------------------------------------------------------------------


class DataNotAvailableError(KafkaError):
    """A broker keeps answering a FETCH before a range's end with no (complete) message.

    A 0.7 broker serves only flushed bytes, so this means the data is not flushed yet, or the
    range's end lies beyond the partition's log end.
    """


class RequestTooLargeError(KafkaError, ValueError):
    """A request would exceed the broker's ``max.socket.request.bytes`` (it would close the
    connection and drop the request)."""


class DeliveryError(BrokerConnectionError):
    """Produced data could not be confirmed by the delivery barrier.

    ``unconfirmed`` and ``confirmed`` map ``(topic, broker, partition)`` to ``(message_sets,
    bytes)``: what may be lost and what the broker is known to have appended.
    """

    def __init__(
        self,
        message: str,
        *,
        unconfirmed: dict[tuple[str, int, int], tuple[int, int]] | None = None,
        confirmed: dict[tuple[str, int, int], tuple[int, int]] | None = None,
    ) -> None:
        self.unconfirmed = dict(unconfirmed or {})
        self.confirmed = dict(confirmed or {})
        super().__init__(message)


class AppendShortfallError(DeliveryError):
    """The delivery barrier answered, but a partition's log grew by fewer bytes than were
    produced to it: the broker dropped data without an answer (a 0.7 broker does that to a
    message set holding a message over its ``max.message.size``). ``unconfirmed`` holds the
    short partitions (the bytes sent), ``confirmed`` the others."""


# --- writing -------------------------------------------------------------------------------


class InvalidPartitionError(KafkaError, ValueError):
    """Writing: a row has no valid target broker-partition (0.7's ``InvalidPartitionException``):
    the key's Java hash is ``Integer.MIN_VALUE`` and ``Math.abs`` left it negative, or an
    explicit ``broker``/``partition`` names a broker or partition the cluster does not have."""


class NonDeterministicInputError(KafkaError):
    """Exactly-once writing: a retry or re-run of a task produced other message sets than the
    earlier attempt recorded (other rows, other order, more or fewer): its input is not
    replayable. The task fails rather than duplicate or drop rows; the error names the batch,
    partition and broker-partition."""


class DeliveryLockError(KafkaError, TimeoutError):
    """Exactly-once writing: another attempt of the same task held its lock for longer than
    ``delivery.lock.timeout.ms``, or this attempt lost its lock (its ZooKeeper session ended)
    before it finished sending."""


__all__ = [
    "AppendShortfallError",
    "BrokerConnectionError",
    "BrokerError",
    "BrokerTimeoutError",
    "CodecUnavailableError",
    "CorruptMessageError",
    "CredentialsError",
    "DataLossError",
    "DataNotAvailableError",
    "DecompressedSizeError",
    "DecompressionError",
    "DeliveryError",
    "DeliveryLockError",
    "FetchSizeTooSmallError",
    "InvalidFetchSizeError",
    "InvalidMessageError",
    "InvalidMessageSizeError",
    "InvalidPartitionError",
    "KafkaError",
    "MessageError",
    "MessageTooLargeError",
    "NoBrokersRegisteredError",
    "NonDeterministicInputError",
    "OffsetFormatError",
    "OffsetOutOfRangeError",
    "OptionError",
    "ProtocolError",
    "RegistryError",
    "RegistryPermissionError",
    "RegistryUnavailableError",
    "RequestTooLargeError",
    "SchemaError",
    "SegmentFileError",
    "SegmentPathError",
    "TopicNameError",
    "TopicNotFoundError",
    "UnknownCodeError",
    "UnknownCodecError",
    "UnknownError",
    "UnknownMagicError",
    "WrongPartitionError",
]
