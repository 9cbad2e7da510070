"""Reused output buffers for the compiled encoder's message sets.

The encode pass writes each byte of a set once (uncompressed: header, payload, CRC; compressed:
the wrapper and its compressed payload). When that write lands in memory the process has just
been given by the system (a fresh allocation of a few megabytes, returned to the system when
freed), the page faults cost more than the copy itself (docs/writing.md, "What moved it"). So
the sets are written into buffers kept here (the kernel asks for the room the sets need: for
compressed ones, their bound), and handed out as memoryviews of them; a buffer is taken again
only once nothing refers to it (no view of it is alive: CPython's reference count says so), so a
set waiting in the Producer's buffer is never overwritten.

At most :data:`KEEP` buffers of at most :data:`MAX_POOLED` bytes each are kept (a bound on
the memory held: 64 MiB); a larger output gets a buffer of its own, freed with its views.
"""

from __future__ import annotations

import sys
import threading

import numpy as np
import numpy.typing as npt

KEEP = 16
MAX_POOLED = 4 << 20
_MIN_BUFFER = 256 << 10
# references a buffer nobody uses has while it is tested: the pool's list, getrefcount's argument
_UNUSED = 2

Buffer = npt.NDArray[np.uint8]


class OutputPool:
    """Buffers of at least the size asked for, reused once no view of them is alive."""

    def __init__(self, keep: int = KEEP, max_pooled: int = MAX_POOLED) -> None:
        self._keep = keep
        self._max_pooled = max_pooled
        self._buffers: list[Buffer] = []
        self._lock = threading.Lock()

    def take(self, size: int) -> Buffer:
        """A buffer of at least ``size`` bytes that nothing else refers to (its content is
        undefined); the caller's views of it keep it from being handed out again."""
        if size > self._max_pooled:
            return np.empty(size, dtype=np.uint8)
        with self._lock:
            buffers = self._buffers
            too_small = -1
            for i in range(len(buffers)):
                if sys.getrefcount(buffers[i]) == _UNUSED:
                    if len(buffers[i]) >= size:
                        return buffers[i]
                    too_small = i
            fresh = np.empty(max(_MIN_BUFFER, 1 << (size - 1).bit_length()), dtype=np.uint8)
            if len(buffers) < self._keep:
                buffers.append(fresh)
            elif too_small >= 0:
                buffers[too_small] = fresh  # an unused buffer too small for today's sets
            return fresh

    @property
    def held(self) -> int:
        """Bytes of the buffers kept (in use or not)."""
        return sum(len(b) for b in self._buffers)
