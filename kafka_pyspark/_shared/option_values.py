"""Option values: the small parsers every option parser shares (one wording for each mistake).

Pure. Spark hands options over as strings with lower-cased names; :func:`lower_options` gives
that view of any mapping, the others read one value and raise :class:`OptionError` naming the
option as the user documentation spells it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any

from kafka_pyspark._wire.topics import validate_topic_name
from kafka_pyspark.errors import OptionError, TopicNameError

__all__ = [
    "bool_option",
    "int_option",
    "int_value",
    "json_value",
    "lower_options",
    "topic_value",
]

_INTEGER = re.compile(r"[+-]?[0-9]+\Z")


def lower_options(
    options: Mapping[str, Any], canonical: Callable[[str], str] = str
) -> dict[str, str]:
    """``{lower-cased name: str(value)}``; a value of None is an error (naming ``canonical``'s
    spelling of the option)."""
    out: dict[str, str] = {}
    for k, v in options.items():
        key = str(k).lower()
        if v is None:
            raise OptionError(canonical(key), "has no value")
        out[key] = str(v)
    return out


def int_option(opts: Mapping[str, str], name: str, default: int, low: int, high: int) -> int:
    """Option ``name`` (looked up lower-cased) as an integer in ``low..high``, else ``default``."""
    raw = opts.get(name.lower())
    if raw is None:
        return default
    return int_value(name, raw, low, high)


def int_value(name: str, raw: str, low: int, high: int) -> int:
    """``raw`` as an integer in ``low..high`` (surrounding whitespace allowed)."""
    text = raw.strip()
    if not _INTEGER.match(text):
        raise OptionError(name, f"must be an integer, got {raw!r}")
    value = int(text)
    if not low <= value <= high:
        raise OptionError(name, f"must be between {low} and {high}, got {value}")
    return value


def bool_option(opts: Mapping[str, str], name: str, default: bool) -> bool:
    """Option ``name`` as ``true``/``false`` (any case), else ``default``."""
    raw = opts.get(name.lower())
    if raw is None:
        return default
    text = raw.strip().lower()
    if text == "true":
        return True
    if text == "false":
        return False
    raise OptionError(name, f"must be true or false, got {raw!r}")


def topic_value(option: str, name: str) -> str:
    """A topic name given in ``option``, checked as 0.7 checks it."""
    try:
        return validate_topic_name(name)
    except TopicNameError as e:
        raise OptionError(option, str(e)) from e


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


def json_value(option: str, raw: str) -> Any:
    """``raw`` parsed as JSON; a key repeated in one object is an error."""
    try:
        return json.loads(raw, object_pairs_hook=_unique_keys)
    except _DuplicateKey as e:
        raise OptionError(
            option,
            f"key {e.key!r} appears twice in one JSON object (which one is meant?): {raw!r}",
        ) from None
    except ValueError as e:  # json.JSONDecodeError is a ValueError
        raise OptionError(option, f"is not valid JSON ({e}): {raw!r}") from e
