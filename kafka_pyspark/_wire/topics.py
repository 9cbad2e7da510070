"""Topic name rules.

A 0.7 broker turns the topic into a directory name (``<log.dir>/<topic>-<partition>``), so a
name must be a safe, single path component. 0.7.2 itself did not check; we refuse names that
would escape the log directory or that no filesystem accepts, and non-ASCII names (the 0.7 driver
documentation: "Topic name, ASCII"; 0.7 sizes topic strings by characters, so non-ASCII would
mis-frame).
"""

from __future__ import annotations

from kafka_pyspark.errors import TopicNameError

MAX_TOPIC_BYTES = 249  # the directory is "<topic>-<partition>": room for the suffix


def validate_topic_name(topic: str) -> str:
    """Return ``topic`` if it is a legal 0.7 topic name, else raise :class:`TopicNameError`."""
    if not isinstance(topic, str):
        raise TopicNameError(f"topic name must be a string, got {type(topic).__name__}")
    if topic == "":
        raise TopicNameError("topic name is empty")
    if topic in (".", ".."):
        raise TopicNameError(f"topic name {topic!r} is not a legal directory name")
    if not topic.isascii():
        raise TopicNameError(f"topic name {topic!r} is not ASCII")
    if len(topic) > MAX_TOPIC_BYTES:
        raise TopicNameError(
            f"topic name is {len(topic)} bytes, over the limit of {MAX_TOPIC_BYTES}"
        )
    for ch in topic:
        if ch in "/\\" or ord(ch) < 0x20 or ord(ch) == 0x7F:
            raise TopicNameError(
                f"topic name {topic!r} contains {ch!r}, not allowed in a directory name"
            )
    return topic
