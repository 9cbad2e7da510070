"""What ``kafka07`` prints: tables and JSON on stdout; errors, summaries and progress on stderr.

Progress (:class:`Progress`) is shown only when stderr is a terminal and stdout is not (the
data goes to a file or a pipe, and nothing else would show that the command is working): one
line, rewritten in place at most :data:`PROGRESS_EVERY_S` apart and erased before anything
else is printed on stderr, so that a redirected stderr holds the errors and the one-line
summary only.
"""

from __future__ import annotations

import base64
import json
import re
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

#: seconds between two progress lines (the first one after as long)
PROGRESS_EVERY_S = 0.25


def json_line(doc: Mapping[str, Any]) -> None:
    sys.stdout.write(json.dumps(doc, separators=(",", ":")) + "\n")


def json_document(doc: Any) -> None:
    sys.stdout.write(json.dumps(doc, indent=2) + "\n")


def payload_fields(value: bytes) -> dict[str, str]:
    """A payload for JSON: ``{"value": text}`` if it is UTF-8, else ``{"value_base64": ...}``."""
    try:
        return {"value": value.decode("utf-8")}
    except UnicodeDecodeError:
        return {"value_base64": base64.b64encode(value).decode("ascii")}


def table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    """Left-aligned columns, two spaces apart; the last column is not padded."""
    cells = [[str(c) for c in header], *([str(c) for c in r] for r in rows)]
    widths = [max(len(r[i]) for r in cells if i < len(r)) for i in range(len(header))]
    for r in cells:
        line = "  ".join(c.ljust(widths[i]) for i, c in enumerate(r[:-1]))
        print(((line + "  " + r[-1]) if len(r) > 1 else r[0]).rstrip())


#: the connector's options the commands set from their arguments: a message naming one (the
#: Spark paths' text, from below the command) names the argument the user typed instead
FLAG_OF_OPTION = {
    "zk.connect": "--zk",
    "broker.list": "--broker-list",
    "zk.connectiontimeout.ms": "--timeout-ms",
    "socket.timeout.ms": "--timeout-ms",
    "topic": "--topic",
    "group.id": "--group",
    "compression.codec": "--codec",
    "batch.size": "--batch-size",
}
#: ``option 'zk.connect': ...`` (an OptionError), anywhere in a message
_OPTION_PREFIX = re.compile("option '(" + "|".join(map(re.escape, FLAG_OF_OPTION)) + ")': ")
#: a dotted option name standing alone (not inside a word, a path, a quoted value or a longer
#: dotted name)
_OPTION_WORD = re.compile(
    r"(?<![\w.'\"/-])("
    + "|".join(re.escape(n) for n in sorted(FLAG_OF_OPTION, key=len, reverse=True) if "." in n)
    + r")(?![\w.'\"/-])")


def flag_words(message: str) -> str:
    """``message`` with every option the command set from an argument named as that argument
    (``--zk: ...``, not ``option 'zk.connect': ...``; ``(--timeout-ms)``, not
    ``(zk.connectiontimeout.ms)``): the one place a command's message is put in its words."""
    message = _OPTION_PREFIX.sub(lambda m: f"{FLAG_OF_OPTION[m.group(1)]}: ", message)
    return _OPTION_WORD.sub(lambda m: FLAG_OF_OPTION[m.group(1)], message)


def error(message: str) -> None:
    """One message on stderr, in the command's words (:func:`flag_words`)."""
    print(f"kafka07: {flag_words(message)}", file=sys.stderr)


def summary(message: str) -> None:
    """The one line a long command ends with, on stderr (stdout stays data only)."""
    print(message, file=sys.stderr)


def plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


class Progress:
    """``<what>: N messages, B bytes`` on stderr, rewritten in place (see the module)."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.messages = 0
        self.nbytes = 0
        self.on = sys.stderr.isatty() and not sys.stdout.isatty()
        self._next = time.monotonic() + PROGRESS_EVERY_S
        self._shown = False

    def add(self, messages: int, nbytes: int) -> None:
        self.messages += messages
        self.nbytes += nbytes
        if self.on and time.monotonic() >= self._next:
            self._next = time.monotonic() + PROGRESS_EVERY_S
            sys.stderr.write(f"\r\x1b[K{self.what}: {plural(self.messages, 'message')}, "
                             f"{plural(self.nbytes, 'byte')}")
            sys.stderr.flush()
            self._shown = True

    def clear(self) -> None:
        """Erase the progress line (before an error or the summary is printed)."""
        if self._shown:
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()
            self._shown = False
