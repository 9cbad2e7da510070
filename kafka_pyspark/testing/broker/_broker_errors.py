"""The embedded broker's errors: the public one, and the internal connection-drop signal."""

from __future__ import annotations

from kafka_pyspark.errors import KafkaError

JOIN_TIMEOUT = 5.0  # seconds to wait for a broker thread to end


class EmbeddedBrokerError(KafkaError, RuntimeError):
    """The embedded broker could not start (port, log directory, ZooKeeper registration)."""


class CloseConnection(Exception):
    """Internal: drop the connection (0.7.2 closes it when a request handler throws)."""


# --- request framing -----------------------------------------------------------------------
