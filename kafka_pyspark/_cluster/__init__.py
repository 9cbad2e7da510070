"""The cluster layer: who holds what, from ZooKeeper (0.7's registry) or ``broker.list``.

- ``options``: the cluster options, parsed and checked once (:class:`ClusterOptions`);
- ``cluster``: :class:`Cluster`, one driver-side view of the cluster (ZooKeeper or
  ``broker.list``, partition counts probed from the brokers);
- ``registry``: :class:`Registry`, 0.7's nodes (brokers, topics, partitions), with
  ``groups`` (consumer-group offsets read and committed) and ``nodes`` (the session and the
  node values both share) beside it;
- ``zk_session``: the one kazoo session (bounded, typed calls), ``zk_requests`` (the requests
  it sends, cut to a size), ``zk_reads`` (``multiRead`` and the server's capabilities),
  ``zk_auth`` (ZooKeeper credentials);
- ``chroot_hints``: what an error says when the registry holds nothing (a wrong chroot).

Other layers import the names below from this package; the rest is the modules' own.
"""

from kafka_pyspark._cluster.chroot_hints import no_brokers_error, topic_elsewhere
from kafka_pyspark._cluster.cluster import BrokerAddress, Cluster
from kafka_pyspark._cluster.options import (
    CLUSTER_NAMES,
    ClusterOptions,
    cluster_options,
    parse_broker_list,
    parse_cluster_options,
)
from kafka_pyspark._cluster.registry import BrokerInfo, Registry

__all__ = [
    "CLUSTER_NAMES",
    "BrokerAddress",
    "BrokerInfo",
    "Cluster",
    "ClusterOptions",
    "Registry",
    "cluster_options",
    "no_brokers_error",
    "parse_broker_list",
    "parse_cluster_options",
    "topic_elsewhere",
]
