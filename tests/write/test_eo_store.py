"""The exactly-once records in a real ZooKeeper (:class:`ZkStore`), request by request: what a
task's claim, intents and finish and the driver's cleanup send, and what they leave, with
``multi`` (3.4+) and as against a 3.3 server (one node per request) alike."""

from __future__ import annotations

import threading
import time
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
#: a test's ZooKeeper as it is (``multi``, 3.4+) or as a 3.3 server (one node per request)
MULTI_OR_NOT = [pytest.param(True, marks=NEEDS_MULTI, id="multi"),
                pytest.param(False, id="one-per-node")]
ONLY_MULTI = pytest.mark.parametrize(
    "multi", [pytest.param(True, marks=NEEDS_MULTI, id="multi")], indirect=True)

ROOT = "/eo-root"
IDENT = TaskIdentity("query-1", 7, 3)
BASE = f"{ROOT}/query-1/7/3"


@pytest.fixture(params=MULTI_OR_NOT)
def multi(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    """Whether the sessions use ``multi``: without it, as against a 3.3 server."""
    if not request.param:
        monkeypatch.setattr(ZkSession, "has_multi", lambda self: False)
    return bool(request.param)


def new_store(zk_connect: str) -> ZkStore:
    return ZkStore(ClusterOptions(zk_connect, None), ROOT)


@pytest.fixture
def s(zk_connect: str, multi: bool) -> ZkStore:
    """A store whose session has connected (and asked the server about ``multi``)."""
    store = new_store(zk_connect)
    store._zk.children("/")
    store._zk.has_multi()
    return store


def test_a_first_claim_creates_the_lock_and_reads_nothing(
    s: ZkStore, kz: KazooClient, requests_sent: list[str], multi: bool,
) -> None:
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


@ONLY_MULTI
def test_the_first_claims_of_a_batch_not_prepared_make_its_parents(
    s: ZkStore, zk_connect: str, kz: KazooClient, requests_sent: list[str],
) -> None:
    requests_sent.clear()
    assert s.claim(IDENT, 1.0) == (None, [])
    # the multi fails (no parent), then the parents and the multi again in one round
    assert requests_sent == ["Transaction", "Create", "Create", "Create", "Transaction"]
    assert kz.get_children(BASE) == ["lock"]
    other = new_store(zk_connect)
    requests_sent.clear()
    assert other.claim(TaskIdentity("query-1", 7, 4), 1.0) == (None, [])
    assert requests_sent == ["Transaction"]  # the batch's node exists now


def test_a_retry_finds_the_records_of_the_attempt_before(
    s: ZkStore, zk_connect: str, kz: KazooClient, requests_sent: list[str],
    multi: bool,
) -> None:
    s.claim(IDENT, 1.0)
    for i, data in enumerate([b"window-0", b"window-1"]):
        s.start_intent(IDENT, i, data)()
    s.release(IDENT)  # as a lost attempt's lock goes with its session
    assert sorted(kz.get_children(BASE)) == ["intent-00000", "intent-00001"]
    retry = new_store(zk_connect)
    requests_sent.clear()
    claim = retry.claim(IDENT, 1.0)
    sent = list(requests_sent)
    assert claim.done is None and claim.intents == [b"window-0", b"window-1"]
    assert retry.holds() and kz.get(f"{BASE}/lock")[0] == retry._token
    # with multi the fresh claim's transaction fails first: the node exists
    assert (sent[0] == "Transaction") is multi


def test_an_intent_says_when_zookeeper_has_answered_it(
    s: ZkStore, kz: KazooClient, requests_sent: list[str], multi: bool,
) -> None:
    """ready() turns true once the answer is in (the writer then sends the window without
    waiting); calling it then returns at once. The intent goes on the worker's thread-free
    line, not the kazoo session, so it is no proof of the lock's life: verify() asks."""
    s.claim(IDENT, 1.0)
    s._alive_at = 0.0
    requests_sent.clear()
    recording = s.start_intent(IDENT, 0, b"window-0")
    deadline = time.monotonic() + 10
    while not recording.ready():
        assert time.monotonic() < deadline, "ZooKeeper's answer never showed"
        time.sleep(0.001)
    recording()
    assert requests_sent == []  # not through kazoo
    assert kz.get(f"{BASE}/intent-00000")[0] == b"window-0"
    requests_sent.clear()
    assert s.verify(IDENT) and requests_sent == ["GetData"]  # the lease ran out: asked
    requests_sent.clear()
    assert s.verify(IDENT) and requests_sent == []  # alive within the lease: not asked


def test_an_intent_the_line_cannot_write_goes_through_kazoo(
    s: ZkStore, kz: KazooClient, requests_sent: list[str], multi: bool,
) -> None:
    """An intent whose node exists (the line answers an error code) is sent again through
    the kazoo session, which tolerates the node as before; so is one the line cannot send."""
    from kafka_pyspark._write import store as store_module

    s.claim(IDENT, 1.0)
    s.start_intent(IDENT, 0, b"window-0")()
    requests_sent.clear()
    s.start_intent(IDENT, 0, b"again")()
    assert requests_sent == ["Create"]  # NODEEXISTS on the line, then kazoo's create
    assert kz.get(f"{BASE}/intent-00000")[0] == b"window-0"
    store_module.close_sessions()  # the line closed: the next intent reconnects it
    fresh = new_store(s._zk.zk_connect)
    fresh.claim(TaskIdentity("query-1", 7, 4), 1.0)
    line = store_module._line(fresh._copts)
    line._servers = [("127.0.0.1", 1)]  # nothing listens there: the line cannot connect
    requests_sent.clear()
    fresh.start_intent(TaskIdentity("query-1", 7, 4), 0, b"w")()
    assert requests_sent == ["Create"]  # the line's connect failed: kazoo's create
    assert kz.get(f"{ROOT}/query-1/7/4/intent-00000")[0] == b"w"


def test_a_claim_waits_for_a_live_holder_and_finds_its_done(
    s: ZkStore, zk_connect: str, kz: KazooClient,
) -> None:
    s.prepare("query-1", 7)
    s.claim(IDENT, 1.0)
    s.start_intent(IDENT, 0, b"window-0")()
    threading.Timer(0.3, s.finish, args=(IDENT, b"the-done-record")).start()
    claim = new_store(zk_connect).claim(IDENT, 10.0)
    assert claim.done == b"the-done-record" and claim.intents == []
    assert sorted(kz.get_children(BASE)) == ["done", "intent-00000"]


def test_finish_writes_done_and_deletes_the_lock(
    s: ZkStore, kz: KazooClient, requests_sent: list[str], multi: bool,
) -> None:
    s.claim(IDENT, 1.0)
    requests_sent.clear()
    s.finish(IDENT, b"done-1")
    sent = list(requests_sent)
    # with multi, on the worker's line (not kazoo); without, one by one through kazoo
    assert sent == ([] if multi else ["Create", "Delete"])
    assert kz.get(f"{BASE}/done")[0] == b"done-1" and kz.get_children(BASE) == ["done"]
    assert not s.holds()
    # a finish whose lock is gone (deleted under it) still writes done: the line's multi
    # fails (no lock), then kazoo's, then both one by one
    again = TaskIdentity("query-1", 7, 4)
    s.claim(again, 1.0)
    kz.delete(f"{ROOT}/query-1/7/4/lock")
    requests_sent.clear()
    s.finish(again, b"done-2")
    sent = list(requests_sent)
    assert kz.get(f"{ROOT}/query-1/7/4/done")[0] == b"done-2"
    assert sent == (["Transaction", "Create", "Delete"] if multi else ["Create", "Delete"])


def test_the_driver_deletes_the_named_records_in_one_request(
    s: ZkStore, kz: KazooClient, requests_sent: list[str], multi: bool,
) -> None:
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


@ONLY_MULTI
def test_a_record_already_gone_does_not_stop_the_cleanup(s: ZkStore, kz: KazooClient) -> None:
    s.claim(IDENT, 1.0)
    s.finish(IDENT, b"d")
    kz.delete(f"{BASE}/done")  # the multi fails on it: every node again, one by one
    s.forget_records("query-1", ["7/3/done"])
    assert kz.exists(f"{ROOT}/query-1") is None


def test_a_stream_commit_keeps_its_batch_and_the_next_one_prepared(
    s: ZkStore, kz: KazooClient,
) -> None:
    for batch in (5, 6, 7):
        ident = TaskIdentity("query-1", batch, 0)
        s.claim(ident, 1.0)
        s.finish(ident, b"d")
    s.forget("query-1", below=7)
    s.prepare("query-1", 8)
    assert sorted(kz.get_children(f"{ROOT}/query-1")) == ["7", "8"]
    assert kz.get_children(f"{ROOT}/query-1/7/0") == ["done"]
