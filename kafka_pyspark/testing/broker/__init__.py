"""An embedded, single-node Kafka 0.7.2 broker: real sockets, real segment files, ZooKeeper.

::

    with EmbeddedBroker(log_dir=tmp, zk_connect="127.0.0.1:2181/chroot", num_partitions=2) as b:
        ...  # b.host, b.port; PRODUCE/FETCH/MULTIFETCH/MULTIPRODUCE/OFFSETS as 0.7.2

CLI (runs until SIGINT/SIGTERM)::

    python -m kafka_pyspark.testing.broker --port 9092 --log-dir /tmp/kafka-logs \\
        --broker-id 0 --zk 127.0.0.1:2181/chroot --partitions 2

Behaviour follows what a real 0.7.2 broker answered (docs/dev/PROTOCOL.md "A real 0.7.2 broker,
measured") and 0.7.2's own request handling; ``docs/broker.md`` lists it, and every place this
broker differs and why. Requests are decoded with :mod:`kafka_pyspark._wire`, message sets validated
with :func:`kafka_pyspark._messages.decode_message_set`, data kept by :mod:`.log`. The broker does
not use :mod:`kafka_pyspark.client` (the code it is meant to test).

Threads: one accepting, one per connection (requests on a connection are answered in order),
one flushing on a timer (only when ``flush_interval > 1``), one ZooKeeper registrar.

Modules: :mod:`.core` (:class:`EmbeddedBroker`: lifecycle, connections, the log store),
:mod:`.handlers` (the 0.7.2 request handlers), :mod:`.transport` (request framing, ``sendfile``),
:mod:`.registration` (ZooKeeper), :mod:`.cli` (``python -m kafka_pyspark.testing.broker``).
"""

from kafka_pyspark.testing.broker._broker_errors import EmbeddedBrokerError
from kafka_pyspark.testing.broker._command_line import main
from kafka_pyspark.testing.broker._core import EmbeddedBroker

__all__ = ["EmbeddedBroker", "EmbeddedBrokerError", "main"]
