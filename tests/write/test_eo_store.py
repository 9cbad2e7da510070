"""The exactly-once records in a real ZooKeeper (:class:`ZkStore`), request by request: what a
task's claim, intents and finish and the driver's cleanup send, and what they leave, with
``multi`` (3.4+) and as against a 3.3 server (one node per request) alike."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from kafka_pyspark._cluster import ClusterOptions
from kafka_pyspark._cluster.zk_session import ZkSession
from kafka_pyspark._write.identity import TaskIdentity
from kafka_pyspark._write.store import ZkStore

if TYPE_CHECKING:
    from kazoo.client import KazooClient

pytestmark = pytest.mark.zk
NEEDS_MULTI = pytest.mark.zk_needs("multi")
MULTI_OR_NOT = pytest.mark.parametrize(
    "multi", [pytest.param(True, marks=NEEDS_MULTI), False], ids=["multi", "one-per-node"])

ROOT = "/eo-root"
IDENT = TaskIdentity("query-1", 7, 3)
BASE = f"{ROOT}/query-1/7/3"


def store(zk_connect: str, multi: bool, monkeypatch: pytest.MonkeyPatch) -> ZkStore:
    """A store whose session has connected (and asked the server about ``multi``)."""
    if not multi:
        monkeypatch.setattr(ZkSession, "has_multi", lambda self: False)
    s = ZkStore(ClusterOptions(zk_connect, None), ROOT)
    s._zk.children("/")
    s._zk.has_multi()
    return s


@MULTI_OR_NOT
def test_a_first_claim_creates_the_lock_and_reads_nothing(
    zk_connect: str, kz: KazooClient, requests_sent: list[str], multi: bool,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    s = store(zk_connect, multi, monkeypatch)
    s.prepare("query-1", 7)  # the driver, at the commit of batch 6
    assert kz.get_children(f"{ROOT}/query-1/7") == []
    requests_sent.clear()
    claim = s.claim(IDENT, 1.0)
    sent = list(requests_sent)
    assert claim.done is None and claim.intents == []
    assert s.holds() and s.verify(IDENT)
    assert kz.get(f"{BASE}/lock")[0] == s._token
    assert kz.get(f"{BASE}/lock")[1].ephemeralOwner == s._zk.session_id
    if multi:  # the node and its lock in one multi: nothing is read
        assert sent == ["Transaction"]
    else:
        assert sent.count("Create") == 5 and "Transaction" not in sent


@NEEDS_MULTI
def test_the_first_claims_of_a_batch_not_prepared_make_its_parents(
    zk_connect: str, kz: KazooClient, requests_sent: list[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    s = store(zk_connect, True, monkeypatch)
    requests_sent.clear()
    assert s.claim(IDENT, 1.0) == (None, [])
    # the multi fails (no parent), then the parents and the multi again in one round
    assert requests_sent == ["Transaction", "Create", "Create", "Create", "Transaction"]
    assert kz.get_children(BASE) == ["lock"]
    other = ZkStore(ClusterOptions(zk_connect, None), ROOT)
    requests_sent.clear()
    assert other.claim(TaskIdentity("query-1", 7, 4), 1.0) == (None, [])
    assert requests_sent == ["Transaction"]  # the batch's node exists now


@MULTI_OR_NOT
def test_a_retry_finds_the_records_of_the_attempt_before(
    zk_connect: str, kz: KazooClient, requests_sent: list[str], multi: bool,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    first = store(zk_connect, multi, monkeypatch)
    first.claim(IDENT, 1.0)
    for i, data in enumerate([b"window-0", b"window-1"]):
        first.start_intent(IDENT, i, data)()
    first.release(IDENT)  # as a lost attempt's lock goes with its session
    assert sorted(kz.get_children(BASE)) == ["intent-00000", "intent-00001"]
    retry = ZkStore(ClusterOptions(zk_connect, None), ROOT)
    requests_sent.clear()
    claim = retry.claim(IDENT, 1.0)
    sent = list(requests_sent)
    assert claim.done is None and claim.intents == [b"window-0", b"window-1"]
    assert retry.holds() and kz.get(f"{BASE}/lock")[0] == retry._token
    # with multi the fresh claim's transaction fails first: the node exists
    assert (sent[0] == "Transaction") is multi


@MULTI_OR_NOT
def test_a_claim_waits_for_a_live_holder_and_finds_its_done(
    zk_connect: str, kz: KazooClient, multi: bool, monkeypatch: pytest.MonkeyPatch,
) -> None:
    holder = store(zk_connect, multi, monkeypatch)
    holder.prepare("query-1", 7)
    holder.claim(IDENT, 1.0)
    holder.start_intent(IDENT, 0, b"window-0")()
    import threading

    threading.Timer(0.3, holder.finish, args=(IDENT, b"the-done-record")).start()
    claim = ZkStore(ClusterOptions(zk_connect, None), ROOT).claim(IDENT, 10.0)
    assert claim.done == b"the-done-record" and claim.intents == []
    assert sorted(kz.get_children(BASE)) == ["done", "intent-00000"]


@MULTI_OR_NOT
def test_finish_writes_done_and_deletes_the_lock(
    zk_connect: str, kz: KazooClient, requests_sent: list[str], multi: bool,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    s = store(zk_connect, multi, monkeypatch)
    s.claim(IDENT, 1.0)
    requests_sent.clear()
    s.finish(IDENT, b"done-1")
    sent = list(requests_sent)
    assert sent == (["Transaction"] if multi else ["Create", "Delete"])
    assert kz.get(f"{BASE}/done")[0] == b"done-1" and kz.get_children(BASE) == ["done"]
    assert not s.holds()
    # a finish whose lock is gone (deleted under it) still writes done: one by one
    again = TaskIdentity("query-1", 7, 4)
    s.claim(again, 1.0)
    kz.delete(f"{ROOT}/query-1/7/4/lock")
    s.finish(again, b"done-2")
    assert kz.get(f"{ROOT}/query-1/7/4/done")[0] == b"done-2"


@MULTI_OR_NOT
def test_the_driver_deletes_the_named_records_in_one_request(
    zk_connect: str, kz: KazooClient, requests_sent: list[str], multi: bool,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    s = store(zk_connect, multi, monkeypatch)
    records = []
    for part in range(3):
        ident = TaskIdentity("query-1", 7, part)
        s.claim(ident, 1.0)
        s.start_intent(ident, 0, b"w")()
        s.finish(ident, b"d")
        records += [f"7/{part}/intent-00000", f"7/{part}/done"]
    requests_sent.clear()
    s.forget_records("query-1", records)
    sent = list(requests_sent)
    assert kz.exists(f"{ROOT}/query-1") is None
    # 6 records, 3 partitions, the batch and the sink: 11 nodes
    assert sent == (["Transaction"] if multi else ["Delete"] * 11)


@NEEDS_MULTI
def test_a_record_already_gone_does_not_stop_the_cleanup(
    zk_connect: str, kz: KazooClient, monkeypatch: pytest.MonkeyPatch,
) -> None:
    s = store(zk_connect, True, monkeypatch)
    s.claim(IDENT, 1.0)
    s.finish(IDENT, b"d")
    kz.delete(f"{BASE}/done")  # the multi fails on it: every node again, one by one
    s.forget_records("query-1", ["7/3/done"])
    assert kz.exists(f"{ROOT}/query-1") is None


@MULTI_OR_NOT
def test_a_stream_commit_keeps_its_batch_and_the_next_one_prepared(
    zk_connect: str, kz: KazooClient, multi: bool, monkeypatch: pytest.MonkeyPatch,
) -> None:
    s = store(zk_connect, multi, monkeypatch)
    for batch in (5, 6, 7):
        ident = TaskIdentity("query-1", batch, 0)
        s.claim(ident, 1.0)
        s.finish(ident, b"d")
    s.forget("query-1", below=7)
    s.prepare("query-1", 8)
    assert sorted(kz.get_children(f"{ROOT}/query-1")) == ["7", "8"]
    assert kz.get_children(f"{ROOT}/query-1/7/0") == ["done"]
