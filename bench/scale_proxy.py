"""A delaying TCP proxy for the scale benchmark (not a benchmark: no ``run``).

This kernel has no ``netem``, and delay must never be added to the machine's own loopback
(other work uses it), so the benchmark puts this proxy between the driver and each server
(ZooKeeper, every broker; the brokers advertise the proxy's address in ZooKeeper). Every chunk
read from one side is held ``hold`` seconds from the moment it arrived, then written to the
other side: a request and its answer each cross once, so a round trip gains ``2 * hold``.
Chunks are held in parallel (a delay, not a bandwidth limit), and their order is kept.

One process per server (``python -m bench.scale_proxy --hold-us 250 --to HOST:PORT``), so the
driver measured in the benchmark shares no interpreter with it; it listens on a free loopback
port, prints that port on a line of its own, and runs until SIGTERM. Per connection, each
direction has a reader thread (stamps each chunk with its arrival time) and a writer thread
(sleeps until the chunk is due, writes it): ``time.sleep`` is exact to tens of microseconds,
where an event loop's ``epoll`` timeout is rounded up to a whole millisecond.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import queue
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence

CHUNK = 256 * 1024
#: a thread woken from its sleep waits for the GIL at most this long (CPython's default, 5 ms,
#: would dwarf the hold whenever another thread of the proxy is busy)
SWITCH_INTERVAL = 50e-6
#: Linux's prctl option and the slack asked for (ns): by default a sleep may end up to 50 us
#: late, a fifth of the hold
PR_SET_TIMERSLACK = 29
TIMER_SLACK_NS = 1

_Chunk = tuple[float, bytes] | None


def _read(src: socket.socket, chunks: queue.SimpleQueue[_Chunk]) -> None:
    try:
        while data := src.recv(CHUNK):
            chunks.put((time.perf_counter(), data))
    except OSError:
        pass
    chunks.put(None)


def _write(dst: socket.socket, chunks: queue.SimpleQueue[_Chunk], hold: float,
           peer: socket.socket) -> None:
    try:
        while (item := chunks.get()) is not None:
            arrived, data = item
            wait = arrived + hold - time.perf_counter()
            if wait > 0:
                time.sleep(wait)
            dst.sendall(data)
        dst.shutdown(socket.SHUT_WR)  # the other side's end of stream, passed on
    except OSError:  # one side is gone: so is the connection
        for s in (dst, peer):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)


def _pipe(src: socket.socket, dst: socket.socket, hold: float) -> list[threading.Thread]:
    chunks: queue.SimpleQueue[_Chunk] = queue.SimpleQueue()
    threads = [threading.Thread(target=_read, args=(src, chunks), daemon=True),
               threading.Thread(target=_write, args=(dst, chunks, hold, src), daemon=True)]
    for t in threads:
        t.start()
    return threads


def _serve(client: socket.socket, target: tuple[str, int], hold: float) -> None:
    try:
        server = socket.create_connection(target, timeout=10.0)
    except OSError:
        client.close()
        return
    server.settimeout(None)
    for s in (client, server):
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    threads = _pipe(client, server, hold) + _pipe(server, client, hold)
    for t in threads:
        t.join()
    client.close()
    server.close()


def serve_forever(listener: socket.socket, target: tuple[str, int], hold: float) -> None:
    """Accept connections on ``listener`` and proxy each to ``target`` with ``hold``."""
    while True:
        client, _ = listener.accept()
        threading.Thread(target=_serve, args=(client, target, hold), daemon=True).start()


def _address(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit():
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}")
    return host, int(port)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.scale_proxy",
                                     description="A TCP proxy holding every chunk a while.")
    parser.add_argument("--to", type=_address, required=True, help="HOST:PORT to proxy to")
    parser.add_argument("--hold-us", type=float, required=True,
                        help="microseconds each chunk is held, each direction")
    args = parser.parse_args(argv)
    sys.setswitchinterval(SWITCH_INTERVAL)
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_TIMERSLACK, TIMER_SLACK_NS, 0, 0, 0)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    listener = socket.create_server(("127.0.0.1", 0))
    print(listener.getsockname()[1], flush=True)
    serve_forever(listener, args.to, args.hold_us / 1e6)
    return 0


@contextlib.contextmanager
def delay_proxy(target: tuple[str, int], hold: float) -> Iterator[int]:
    """A proxy process to ``target`` holding each chunk ``hold`` seconds; yields its port."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "bench.scale_proxy", "--to", f"{target[0]}:{target[1]}",
         "--hold-us", str(hold * 1e6)],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()  # the proxy prints its port at once, or dies
        if not line.isdigit():
            raise RuntimeError(f"the delaying proxy to {target} did not start: {line!r}")
        yield int(line)
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextlib.contextmanager
def _echo_server() -> Iterator[int]:
    listener = socket.create_server(("127.0.0.1", 0))

    def echo() -> None:
        with contextlib.suppress(OSError):
            conn, _ = listener.accept()
            with conn:
                conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                while data := conn.recv(CHUNK):
                    conn.sendall(data)

    thread = threading.Thread(target=echo, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        listener.close()
        thread.join(10)


def ping_pong_rtt(hold: float | None, rounds: int = 200) -> float:
    """Median round trip (seconds) of a 64-byte ping-pong with an echo server on loopback,
    through a :func:`delay_proxy` holding ``hold`` (``None``: direct)."""
    with contextlib.ExitStack() as stack:
        port = stack.enter_context(_echo_server())
        if hold is not None:
            port = stack.enter_context(delay_proxy(("127.0.0.1", port), hold))
        sock = stack.enter_context(socket.create_connection(("127.0.0.1", port), timeout=10.0))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        ping = b"p" * 64
        times = []
        for _ in range(rounds):
            start = time.perf_counter()
            sock.sendall(ping)
            got = 0
            while got < len(ping):
                n = len(sock.recv(CHUNK))
                if not n:
                    raise ConnectionError("the echo server closed the connection")
                got += n
            times.append(time.perf_counter() - start)
        return statistics.median(times)


if __name__ == "__main__":
    sys.exit(main())
