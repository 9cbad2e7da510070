"""The streaming reader: policy (admission, checkpointed offsets, group commits,
ZooKeeper outages) over the read path of :mod:`..read`."""
