"""Where ``dump`` and ``consume`` stopped, written so that ``--start`` resumes exactly there.

A position is a byte offset, ``N``, where the next message to show starts; or ``N+K``: the
first ``K`` messages inside the compressed wrapper stored at ``N`` were shown already (0.7
addresses a wrapper as a whole, so a reader resumes at the wrapper and skips those ``K``).
``consume`` takes one per broker-partition, ``B-P=N[+K],...``, as its Ctrl-C line prints them.

Exact: a message's line is written and its position noted together (:class:`Interrupts` holds
Ctrl-C meanwhile; the lines go into a buffer with room for them, :func:`line_writer`, which
is written out where Ctrl-C may cut it: the lines it holds are written at exit).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import signal
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, BinaryIO, cast

from kafka_pyspark._shared.partition_key import not_a_partition_key, parse_partition_key

__all__ = ["Interrupts", "Position", "after_row", "format_position", "format_positions",
           "line_writer", "parse_position", "parse_positions"]

#: (offset, messages of the wrapper stored at that offset shown already)
Position = tuple[int, int]


def parse_position(text: str) -> Position:
    """``"N"`` or ``"N+K"`` -> (N, K); anything else is an ``ArgumentTypeError``."""
    if text.strip().startswith("-") and text.strip()[1:].isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is negative (byte offsets start at 0)")
    offset, plus, skip = text.strip().partition("+")
    try:
        n, k = int(offset), int(skip) if plus else 0
    except ValueError:
        n = k = -1
    if n < 0 or k < 0 or not offset.strip().isdigit() or (plus and not skip.strip().isdigit()):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a byte offset N or N+K (K messages of the wrapper at N shown)")
    return n, k


def parse_positions(text: str) -> dict[tuple[int, int], Position]:
    """``"0-0=51,0-1=17+2"`` -> {(0, 0): (51, 0), (0, 1): (17, 2)}."""
    out: dict[tuple[int, int], Position] = {}
    for item in (i for i in text.split(",") if i.strip()):
        name, eq, where = item.partition("=")
        key = parse_partition_key(name.strip())
        if key is None or not eq:
            raise argparse.ArgumentTypeError(
                f"{item.strip()!r} is not brokerId-partition=N[+K]"
                + ("" if key is not None else f": {not_a_partition_key(name.strip())}"))
        if key in out:
            raise argparse.ArgumentTypeError(f"{name.strip()} is given twice")
        out[key] = parse_position(where)
    if not out:
        raise argparse.ArgumentTypeError("no brokerId-partition=N[+K] given")
    return out


def format_position(at: Position) -> str:
    return str(at[0]) if at[1] == 0 else f"{at[0]}+{at[1]}"


def format_positions(at: Mapping[tuple[int, int], Position]) -> str:
    """The inverse of :func:`parse_positions`, sorted by broker-partition."""
    return ",".join(f"{b}-{p}={format_position(at[(b, p)])}" for b, p in sorted(at))


def after_row(offsets: Sequence[int], next_offsets: Sequence[int], inner: Sequence[int],
              i: int) -> Position:
    """The position after row ``i`` of a decoded stretch (rows in log order, ending at a
    stored message's end): the next stored message, or inside the same wrapper."""
    if i + 1 < len(offsets) and offsets[i + 1] == offsets[i]:
        return offsets[i], inner[i] + 1
    return next_offsets[i], 0


class Interrupts:
    """Ctrl-C while a command shows messages: SIGINT raises :class:`KeyboardInterrupt` as
    usual, except inside :meth:`held`, where a message is written and its position noted
    (the two must go together), until the region ends. A context manager installing the
    handler (in the main thread; elsewhere it does nothing)."""

    def __init__(self) -> None:
        self._held = 0
        self._pending = False
        self._saved: Any = None

    def __enter__(self) -> Interrupts:
        if threading.current_thread() is threading.main_thread():
            self._saved = signal.signal(signal.SIGINT, self._on_sigint)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._saved is not None:
            signal.signal(signal.SIGINT, self._saved)
            self._saved = None

    def _on_sigint(self, signum: int, frame: object) -> None:
        if self._held:
            self._pending = True
            return
        raise KeyboardInterrupt

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        """A region Ctrl-C does not cut: it is raised when the region ends."""
        self._held += 1
        try:
            yield
        finally:
            self._held -= 1
        if not self._held and self._pending:
            self._pending = False
            raise KeyboardInterrupt


def line_writer(buffer: int) -> BinaryIO:
    """stdout for message lines, buffered by ``buffer`` bytes, so that writing a line never
    blocks while the buffer has room (stdout's own buffer when it is not a file, as when
    captured). Flushed by the caller outside :meth:`Interrupts.held`."""
    try:
        fd = sys.stdout.fileno()
    except (OSError, ValueError):
        binary = getattr(sys.stdout, "buffer", None)
        return cast(BinaryIO, binary if binary is not None else _TextOut())
    sys.stdout.flush()
    return open(fd, "wb", buffering=buffer, closefd=False)


class _TextOut(io.RawIOBase):
    """A text-only stdout (one replaced in a test) taking bytes."""

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        sys.stdout.write(bytes(data).decode())
        return len(data)

    def flush(self) -> None:
        sys.stdout.flush()
