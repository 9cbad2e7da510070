"""What to read: ``subscribe``, ``subscribePattern`` or ``assign`` (exactly one), parsed.

Also the ``brokerId-partition`` keys these options and the JSON offsets name
(:func:`partition_key_value`; the format itself is :mod:`kafka_pyspark._shared.partition_key`).
Pure.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from kafka_pyspark._shared.option_values import json_value, topic_value
from kafka_pyspark._shared.partition_key import (
    TopicPartition,
    is_decimal,
    not_a_partition_key,
    parse_partition_key,
)
from kafka_pyspark._wire.protocol import INT32_MAX
from kafka_pyspark.errors import OptionError

__all__ = [
    "Assign",
    "Subscribe",
    "SubscribePattern",
    "Subscription",
    "java_regex_to_python",
    "parse_assign",
    "parse_pattern",
    "parse_subscribe",
    "partition_key_value",
]


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

    partitions: tuple[TopicPartition, ...]

    @property
    def topics(self) -> tuple[str, ...]:
        return tuple(sorted({t for t, _, _ in self.partitions}))

    def allows(self, topic: str) -> bool:
        return any(t == topic for t, _, _ in self.partitions)


Subscription = Subscribe | SubscribePattern | Assign

_BARE_PARTITION = (
    "; a bare partition number is how Spark's Kafka 0.10+ source names a partition, but 0.7 "
    "numbers partitions per broker"
)


def partition_key_value(option: str, topic: str, key: Any) -> tuple[int, int]:
    """A ``brokerId-partition`` key of ``topic`` in ``option`` -> ``(broker, partition)``."""
    parsed = parse_partition_key(key)
    if parsed is None:
        bare = (isinstance(key, int) and not isinstance(key, bool)) or (
            isinstance(key, str) and is_decimal(key)
        )
        raise OptionError(
            option,
            f"topic {topic!r}: {not_a_partition_key(key)}{_BARE_PARTITION if bare else ''}",
        )
    broker, partition = parsed
    if broker > INT32_MAX or partition > INT32_MAX:
        raise OptionError(option, f"topic {topic!r}: {key!r} is out of the int32 range")
    return broker, partition


def parse_assign(raw: str) -> Assign:
    doc = json_value("assign", raw)
    if not isinstance(doc, dict) or not doc:
        raise OptionError(
            "assign", f'must be a non-empty JSON object {{"topic": ["0-0", "0-1"]}}, got {raw!r}'
        )
    found: set[TopicPartition] = set()
    for topic, keys in doc.items():
        topic_value("assign", topic)
        if not isinstance(keys, list) or not keys:
            raise OptionError(
                "assign",
                f'topic {topic!r}: expected a non-empty list of "brokerId-partition" strings, '
                f"got {json.dumps(keys)}",
            )
        for key in keys:
            broker, partition = partition_key_value("assign", topic, key)
            found.add((topic, broker, partition))
    return Assign(tuple(sorted(found)))


def parse_subscribe(raw: str) -> Subscribe:
    topics: list[str] = []
    for part in raw.split(","):
        name = part.strip()
        if name and name not in topics:
            topics.append(topic_value("subscribe", name))
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


def parse_pattern(raw: str) -> SubscribePattern:
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
