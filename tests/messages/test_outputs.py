"""The compiled encoder's reused output buffers: a buffer is reused only once no view of it is
alive, so sets waiting to be sent are never overwritten."""

from __future__ import annotations

import gc

import numpy as np
import pyarrow as pa
import pytest
from _encoded import assert_same_sets

from kafka_pyspark._messages import encode
from kafka_pyspark._messages.outputs import OutputPool


def test_a_buffer_in_use_is_not_handed_out_again() -> None:
    pool = OutputPool(keep=2, max_pooled=1 << 20)
    a = pool.take(1000)
    assert len(a) >= 1000
    view = a.data[10:20]
    del a
    b = pool.take(1000)
    assert not np.shares_memory(np.frombuffer(view, np.uint8), b)
    del b
    c = pool.take(500)  # b is unused again: reused
    assert pool.held == 2 * len(c)
    d = pool.take(100)  # the pool is full, both in use (view, c): a buffer of its own
    assert pool.held == 2 * len(c)
    del view, c, d
    gc.collect()
    e = pool.take(3 << 20)  # over max_pooled: its own buffer, not kept
    assert len(e) == 3 << 20 and pool.held < 3 << 20
    f = pool.take(600_000)  # larger than both kept ones: replaces an unused one
    assert len(f) >= 600_000 and pool.held >= len(f)


@pytest.mark.skipif(encode.ENGINE != "kernel", reason="the encode kernel is not built")
@pytest.mark.parametrize("codec", ["none", "snappy", "gzip"])
def test_sets_held_stay_intact_while_later_sets_are_encoded(codec: str) -> None:
    rnd = np.random.default_rng(3)
    batches = [pa.array([rnd.bytes(int(n)) for n in rnd.integers(0, 400, 500)])
               for _ in range(40)]
    held = []
    for batch in batches:
        sets = encode.encode_message_sets_arrow(batch, [0, 200, 500], compression=codec)
        assert all(isinstance(s, memoryview) for s in sets)  # views of a pooled buffer
        held.append((batch, sets))
        if len(held) > 5:
            held.pop(0)  # dropped: its buffer is free again
        for old_batch, old_sets in held:
            want = [encode.encode_message_set(old_batch.slice(0, 200).to_pylist(),
                                              compression=codec),
                    encode.encode_message_set(old_batch.slice(200).to_pylist(),
                                              compression=codec)]
            assert_same_sets(old_sets, want, codec)
