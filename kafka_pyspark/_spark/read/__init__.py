"""Reading: the batch reader, and what batch and stream reads share to plan one
(discovery, the logs' bounds, start and end offsets, input partitions)."""
