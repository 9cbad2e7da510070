"""What ``kafka07 dump`` reads: messages as stored, with 0.7's per-message facts.

A reader yields every message in order and ends with exactly one :class:`DumpStop` saying
where and why it stopped (the end, a torn tail, or a fault in the framing). A stored message
is shown with the facts 0.7's ``DumpLogSegments`` prints (offset, payload size, magic, codec,
CRC, valid); a message whose CRC does not match is shown with ``valid`` false and reading
goes on (its length is intact), as ``DumpLogSegments`` does. The messages inside a
compressed wrapper are shown one by one, each with its wrapper's facts.

:data:`FILE_READERS` maps a file-name suffix to a reader ``(path, verify_crc) ->
Iterator[DumpItem]``: the seam other formats plug into. Fields a later format has and 0.7
does not (key, timestamp, headers) go into :attr:`DumpMessage.extra`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from kafka_pyspark.errors import MessageError, raise_for_code

if TYPE_CHECKING:
    from kafka_pyspark.client import BrokerConnection

#: bytes read from a segment file (or fetched from a broker) at a time; a larger message is
#: read whole, in more chunks
CHUNK = 8 << 20

StopKind = Literal["end", "torn-tail", "corrupt"]


@dataclass(frozen=True)
class DumpMessage:
    """One message; an inner message of a compressed wrapper is one too."""

    offset: int
    next_offset: int
    inner_index: int
    compression: str
    value: bytes
    extra: Mapping[str, Any] = field(default_factory=dict)
    #: the stored (outer) message's MAGIC and CRC32; None where the format has none
    magic: int | None = None
    crc: int | None = None
    #: its CRC checked and right (True), wrong (False), or not checked (None)
    valid: bool | None = None
    #: why it is not valid (shown, and the dump exits 1)
    error: str | None = None


@dataclass(frozen=True)
class DumpStop:
    """Where reading stopped: ``offset`` is the first byte not shown as part of a message."""

    kind: StopKind
    offset: int
    error: str | None = None


DumpItem = DumpMessage | DumpStop
FileReader = Callable[[Path, bool], Iterator[DumpItem]]


def segment_base_offset(path: Path) -> int:
    """A segment file is named after its first offset (``%020d.kafka``); else 0."""
    stem = path.name.split(".", 1)[0]
    return int(stem) if stem.isdigit() else 0


# --- stored messages ---------------------------------------------------------------------------


@dataclass
class _Walk:
    """The stored messages of ``buf`` (starting at log offset ``base``): ``items`` found,
    ``used`` bytes they span, and the fault in the framing after them, if any."""

    items: list[DumpMessage]
    used: int
    fault: str | None
    wanted: int | None  # the size of a message that continues past ``buf``


def walk_stored(buf: bytes, base: int, verify: bool) -> _Walk:
    """Every complete stored message of ``buf`` up to the first incomplete or malformed one."""
    from kafka_pyspark._messages import walk
    from kafka_pyspark._messages.layout import LENGTH_SIZE

    mv = memoryview(buf)
    sc = walk.scan(mv, 0, len(buf), len(buf))
    items: list[DumpMessage] = []
    for rec in sc.recs:
        start, length = int(rec["start"]), int(rec["length"])
        items.extend(_stored(buf, base, start, start + LENGTH_SIZE + length, rec, verify))
    fault = None
    if sc.status not in (walk.END, walk.SHORT, walk.PARTIAL):
        fault = _framing_fault(buf[sc.end:], base + sc.end)
    wanted = LENGTH_SIZE + sc.value if sc.status == walk.PARTIAL else None
    return _Walk(items, sc.end, fault, wanted)


def _stored(buf: bytes, base: int, start: int, end: int, rec: Any, verify: bool
            ) -> list[DumpMessage]:
    from kafka_pyspark._messages import CODEC_NAMES, decode_message_set
    from kafka_pyspark._messages.crc import crc32
    from kafka_pyspark._messages.layout import HEADER_V0_SIZE

    magic, codec, crc = int(rec["magic"]), int(rec["codec"]), int(rec["crc"])
    payload = buf[start + HEADER_V0_SIZE + magic : end]
    facts: dict[str, Any] = {"magic": magic, "crc": crc}
    offset, nxt, name = base + start, base + end, CODEC_NAMES[codec]
    computed = crc32(payload) & 0xFFFFFFFF if verify else None
    if computed is not None and computed != crc:
        why = f"CRC mismatch: stored {crc}, computed {computed} over the payload"
        return [DumpMessage(offset, nxt, 0, name, payload, valid=False, error=why, **facts)]
    valid = None if computed is None else True
    if codec == 0:
        return [DumpMessage(offset, nxt, 0, name, payload, valid=valid, **facts)]
    try:
        res = decode_message_set(buf[start:end], offset, verify_crc=verify)
    except MessageError as e:
        return [DumpMessage(offset, nxt, 0, name, payload, valid=False,
                            error=f"its {name} contents: {e}", **facts)]
    cols = res.batch.to_pydict()
    return [DumpMessage(offset, nxt, i, name, v, valid=valid, **facts)
            for i, v in enumerate(cols["value"])]


def _framing_fault(rest: bytes, offset: int) -> str:
    """The decoder's own words for a framing fault at the start of ``rest``."""
    from kafka_pyspark._messages import decode_message_set

    try:
        decode_message_set(rest, offset)
    except MessageError as e:
        return str(e)
    return f"malformed message at offset {offset}"  # pragma: no cover - the scan said so


def read_07_segment(path: Path, verify_crc: bool = True) -> Iterator[DumpItem]:
    """A Kafka 0.7 segment file (``%020d.kafka``): offsets are base offset + file position."""
    pos = segment_base_offset(path)
    left = path.stat().st_size
    carry = b""
    with open(path, "rb") as f:
        while True:
            data = f.read(CHUNK)
            left -= len(data)
            buf = carry + data
            w = walk_stored(buf, pos, verify_crc)
            yield from w.items
            pos, carry = pos + w.used, buf[w.used :]
            if w.fault is not None:
                yield DumpStop("corrupt", pos, w.fault)
                return
            past_end = w.wanted is not None and w.wanted > len(carry) + max(left, 0)
            if carry and (not data or past_end):
                yield DumpStop(
                    "torn-tail", pos, f"{len(carry) + max(left, 0)} bytes at offset {pos} are "
                    "not a whole message (a torn tail: 0.7 recovery truncates it)",
                )
                return
            if not data:
                break
    yield DumpStop("end", pos)


def read_live_range(
    conn: BrokerConnection, topic: str, partition: int, start: int, end: int,
    *, verify_crc: bool = True,
) -> Iterator[DumpItem]:
    """Every stored message in ``[start, end)`` of a live broker-partition, then a stop."""
    from kafka_pyspark._messages import MAX_MESSAGE_LENGTH

    pos, size = start, min(CHUNK, max(end - start, 1))
    while pos < end:
        resp = conn.fetch(topic, partition, pos, size)
        raise_for_code(resp.error, f"FETCH {topic} partition {partition} offset {pos}")
        w = walk_stored(bytes(resp.messages), pos, verify_crc)
        kept = [m for m in w.items if m.offset < end]
        yield from kept
        pos = kept[-1].next_offset if kept else pos
        if pos >= end or len(kept) < len(w.items):
            break
        if w.fault is not None:
            yield DumpStop("corrupt", pos, w.fault)
            return
        if not kept:
            if w.wanted is None or size > MAX_MESSAGE_LENGTH:
                yield DumpStop("corrupt", pos, f"the broker sent no whole message at offset "
                               f"{pos}, before the end {end} (not flushed yet?)")
                return
            size = max(2 * size, w.wanted)  # a message larger than one fetch
    yield DumpStop("end", pos)


# --- later formats ---------------------------------------------------------------------------


def _log_extra(row: Mapping[str, Any]) -> dict[str, Any]:
    """The later formats' fields of a row, JSON-ready (bytes as UTF-8 text, else repr)."""
    def text(b: bytes | None) -> str | None:
        return None if b is None else b.decode("utf-8", "backslashreplace")

    ts = row["timestamp"]
    extra: dict[str, Any] = {
        "key": text(row["key"]),
        "timestamp": None if ts is None else int(ts.timestamp() * 1000),
        "timestamp_type": row["timestamp_type"],
    }
    if row["headers"] is not None:
        extra["headers"] = [[h["key"], text(h["value"])] for h in row["headers"]]
    if row["value"] is None:
        extra["value_null"] = True
    return extra


def read_log_segment(path: Path, verify_crc: bool = True) -> Iterator[DumpItem]:
    """A later Kafka segment file (``%020d.log``: message sets v0/v1, record batches v2) read
    as the ``path`` reader reads it (control batches and aborted transactions left out);
    offsets are logical, the stop's ``offset`` is a byte position in the file."""
    import pyarrow.fs as pafs

    from kafka_pyspark._segments.files import SegmentFile
    from kafka_pyspark._segments.reading import ReadSettings, ReadStop, SegmentSplit, iter_split

    size = path.stat().st_size
    f = SegmentFile("", 0, segment_base_offset(path), str(path.resolve()), size, "log")
    items = iter_split(pafs.LocalFileSystem(), SegmentSplit(f, 0, size),
                       ReadSettings(verify_crc=verify_crc))
    for item in items:
        if isinstance(item, ReadStop):
            yield DumpStop(item.kind, item.position,
                           None if item.error is None else f"byte {item.position}: {item.error}")
            return
        for row in item.to_pylist():
            yield DumpMessage(row["offset"], row["next_offset"], row["inner_index"],
                              row["compression"], row["value"] or b"", _log_extra(row))


#: file-name suffix -> reader; a file named on the command line with no known suffix is read
#: as a 0.7 segment (in a directory, only these suffixes are read)
FILE_READERS: dict[str, FileReader] = {".kafka": read_07_segment, ".log": read_log_segment}


def read_segment_file(path: str | Path, *, verify_crc: bool = True) -> Iterator[DumpItem]:
    """Every message of a segment file, then one :class:`DumpStop`."""
    p = Path(path)
    reader = FILE_READERS.get(p.suffix, read_07_segment)
    return reader(p, verify_crc)
