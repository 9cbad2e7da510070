"""``kafka07 lag`` and ``group-offsets`` against a real ZooKeeper, the nodes as 0.7's consumer
writes them; ``produce`` against a broker that never answers; hostile registry values."""

from __future__ import annotations

import io
import json
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest
from _cluster import THREE, kazoo_client, produce_direct, unanswering_broker

from kafka_pyspark._cluster import Registry
from kafka_pyspark.cli import main

if TYPE_CHECKING:
    from kafka_pyspark.testing.broker import EmbeddedBroker

pytestmark = pytest.mark.zk


@pytest.fixture
def topic_t(broker: EmbeddedBroker) -> EmbeddedBroker:
    """Topic ``t`` on broker 0: partition 0 holds 51 bytes, partition 1 17."""
    produce_direct(broker, "t", 0, THREE)
    produce_direct(broker, "t", 1, THREE[:1])
    broker.wait_for_topic("t")
    return broker


def test_lag_shows_every_row_around_malformed_offset_nodes(
    topic_t: EmbeddedBroker, zk_connect: str, kz: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    base = "/consumers/g/offsets/t"
    kz.create(f"{base}/0-0", b"17", makepath=True)
    for name, value in (("0-1", b"abc"), ("3-0", b""), ("4-0", b"-5"), ("x-y", b"1")):
        kz.create(f"{base}/{name}", value)
    assert main(["lag", "--zk", zk_connect, "--group", "g", "--topic", "t"]) == 1
    lines = capsys.readouterr().out.splitlines()
    where = f"ZooKeeper {zk_connect}: node {base}"
    bad = "bad-offset-node: " + where
    assert lines[:6] == [
        "group  topic  broker-partition  offset  latest  lag  owner  status",
        "g      t      0-0               17      51      34   -      ok",
        f"g      t      0-1               -       17      -    -      {bad}/0-1: offset must be "
        "a non-negative decimal integer, got b'abc'",
        f"g      t      3-0               -       -       -    -      {bad}/3-0: offset must be "
        "a non-negative decimal integer, got b''",
        f"g      t      4-0               -       -       -    -      {bad}/4-0: offset must be "
        "a non-negative decimal integer, got b'-5'",
        f"g      t      x-y               -       -       -    -      {bad}/x-y: node name 'x-y' "
        "is not 'brokerId-partition' (e.g. '0-1', as 0.7 names broker-partitions)",
    ]
    assert lines[6:] == [
        "",
        "group  topic  lag  partitions  owned  problems  not-committed  not-committed-bytes",
        "g      t      34   5           0      4         0              0",
        "g      (all)  34   5           0      4         0              0",
    ]


def test_lag_shows_owners_and_totals_per_topic_and_group(
    topic_t: EmbeddedBroker, zk_connect: str, kz: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    produce_direct(topic_t, "u", 0, THREE[:2])
    produce_direct(topic_t, "u", 1, THREE[:1])  # never committed: 17 bytes not in the lag
    topic_t.wait_for_topic("u")
    with Registry(zk_connect) as reg:
        reg.commit_group_offsets("g", "t", {(0, 0): 17, (0, 1): 0}, creator="test")
        reg.commit_group_offsets("g", "u", {(0, 0): 0}, creator="test")
    kz.create("/consumers/g/owners/t/0-0", b"g_host-1-0", makepath=True, ephemeral=True)
    assert main(["lag", "--zk", zk_connect, "--group", "g"]) == 0
    out = capsys.readouterr()
    assert out.out.splitlines() == [
        "group  topic  broker-partition  offset  latest  lag  owner       status",
        "g      t      0-0               17      51      34   g_host-1-0  ok",
        "g      t      0-1               0       17      17   -           ok",
        "g      u      0-0               0       34      34   -           ok",
        "g      u      0-1               -       17      -    -           not-committed",
        "",
        "group  topic  lag  partitions  owned  problems  not-committed  not-committed-bytes",
        "g      t      51   2           1      0         0              0",
        "g      u      34   2           0      0         1              17",
        "g      (all)  85   4           1      0         1              17",
    ]
    assert out.err == ("group 'g': lag 85 bytes over 4 broker-partitions, 0 problems; "
                       "1 broker-partition not committed, holding 17 bytes (not in the lag)\n")
    assert main(["lag", "--zk", zk_connect, "--group", "g", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["partitions"][0]["owner"] == "g_host-1-0"
    assert doc["totals"][-1] == {"topic": "(all)", "lag": 85, "partitions": 4, "owned": 1,
                                 "problems": 0, "not_committed": 1, "not_committed_bytes": 17}


def _node(kz: Any, path: str) -> tuple[bytes, int]:
    value, stat = kz.get(path)
    return value, stat.ephemeralOwner


def test_group_offsets_earliest_latest_json_and_dry_run(
    topic_t: EmbeddedBroker, zk_connect: str, kz: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["group-offsets", "--zk", zk_connect, "--group", "g", "--topic", "t"]
    assert main([*argv, "--to", "latest", "--dry-run"]) == 0
    out = capsys.readouterr()
    assert out.out.splitlines() == [
        "broker-partition  current  new  change  earliest  latest",
        "0-0               -        51   -       0         51",
        "0-1               -        17   -       0         17",
    ]
    assert out.err == "would set 2 offsets of group 'g' topic 't' (2 changed): dry run, " \
        "nothing written\n"
    assert kz.exists("/consumers/g") is None  # nothing written
    assert main([*argv, "--to", "latest"]) == 0
    assert capsys.readouterr().err == "set 2 offsets of group 'g' topic 't' (2 changed)\n"
    # exactly 0.7's consumer's nodes: decimal ASCII, persistent, parents created
    assert _node(kz, "/consumers/g/offsets/t/0-0") == (b"51", 0)
    assert _node(kz, "/consumers/g/offsets/t/0-1") == (b"17", 0)
    assert sorted(kz.get_children("/consumers/g/offsets/t")) == ["0-0", "0-1"]
    assert main([*argv, "--offsets", '{"0-0": 34}', "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["partitions"] == [{"broker": 0, "partition": 0, "current": 51, "new": 34,
                                  "earliest": 0, "latest": 51, "current_error": None}]
    assert _node(kz, "/consumers/g/offsets/t/0-0") == (b"34", 0)
    assert _node(kz, "/consumers/g/offsets/t/0-1") == (b"17", 0)  # not named: unchanged
    assert main([*argv, "--to", "earliest"]) == 0
    assert capsys.readouterr().out.splitlines()[1:] == [
        "0-0               34       0    -34     0         51",
        "0-1               17       0    -17     0         17",
    ]
    with Registry(zk_connect) as reg:  # read back as the connector's consumer reads it
        assert reg.group_offsets("g", "t") == {(0, 0): 0, (0, 1): 0}


def test_group_offsets_by_time_and_refusals(
    topic_t: EmbeddedBroker, zk_connect: str, kz: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["group-offsets", "--zk", zk_connect, "--group", "g", "--topic", "t"]
    # a time before every segment: no segment that old, so the earliest offset
    assert main([*argv, "--to", "1"]) == 0
    assert capsys.readouterr().out.splitlines()[1] == "0-0               -        0    -       0" \
        "         51"
    # a time after every write: the log end (0.7 answers it for any time past the last write)
    assert main([*argv, "--to", str(2**62)]) == 0
    assert _node(kz, "/consumers/g/offsets/t/0-0") == (b"51", 0)
    assert main([*argv, "--offsets", '{"0-0": 52}']) == 1  # past the log end
    assert "0-0: offset 52 is outside the log [0, 51] (--force sets it anyway)" in \
        capsys.readouterr().err
    assert main([*argv, "--offsets", '{"0-0": -1}']) == 2
    assert "--offsets: 0-0: -1 is not a byte offset" in capsys.readouterr().err
    assert main([*argv, "--to", "latest", "--offsets", '{"0-0": 1}']) == 2
    assert main([*argv, "--to", "soon"]) == 2
    capsys.readouterr()
    # a live consumer: refused (a dry run says so), written with --force
    kz.create("/consumers/g/ids/g_host-1", b'{ "t": 1 }', makepath=True, ephemeral=True)
    kz.create("/consumers/g/owners/t/0-1", b"g_host-1-0", makepath=True, ephemeral=True)
    assert main([*argv, "--to", "earliest"]) == 1
    err = capsys.readouterr().err
    assert err == ("kafka07: group 'g' has live consumers (consumer g_host-1; owner of 0-1: "
                   "g_host-1-0): they would overwrite the new offsets on their next commit. "
                   "Stop them first, or --force\n")
    assert _node(kz, "/consumers/g/offsets/t/0-0") == (b"51", 0)
    assert main([*argv, "--to", "earliest", "--dry-run"]) == 1
    assert capsys.readouterr().err.endswith(err)
    assert main([*argv, "--to", "earliest", "--force"]) == 0
    assert capsys.readouterr().err.splitlines()[-1] == (
        "kafka07: group 'g' has live consumers (consumer g_host-1; owner of 0-1: g_host-1-0): "
        "they would overwrite the new offsets on their next commit; was written anyway "
        "(--force)")
    assert _node(kz, "/consumers/g/offsets/t/0-0") == (b"0", 0)


def test_group_offsets_refuses_what_it_cannot_check_unless_forced(
    topic_t: EmbeddedBroker, zk_connect: str, kz: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["group-offsets", "--zk", zk_connect, "--group", "g", "--topic", "t", "--offsets"]
    # inside the log but inside a message: 0.7's consumer would fail there
    assert main([*argv, '{"0-0": 5}']) == 1
    err = capsys.readouterr().err
    assert err.startswith("kafka07: 0-0: offset 5 is not where a message starts (")
    assert err.endswith("); 0.7's consumer would fail there (--force sets it anyway)\n")
    assert kz.exists("/consumers/g") is None
    assert main([*argv, '{"0-0": 17, "0-1": 17}']) == 0  # a message's start; the log end
    assert capsys.readouterr().err == "set 2 offsets of group 'g' topic 't' (2 changed)\n"
    assert _node(kz, "/consumers/g/offsets/t/0-0") == (b"17", 0)
    live = "(live partitions: 0-0, 0-1), so the offset cannot be checked against its log " \
        "(--force sets it anyway)\n"
    assert main([*argv, '{"0-7": 0}']) == 1
    assert capsys.readouterr().err == (
        f"kafka07: 0-7: topic 't' has no partition 0-7 registered in ZooKeeper {live}"
    )
    assert main([*argv, '{"5-0": 0}']) == 1
    assert capsys.readouterr().err == f"kafka07: 5-0: broker 5 is not live {live}"
    assert sorted(kz.get_children("/consumers/g/offsets/t")) == ["0-0", "0-1"]
    assert main([*argv, '{"0-0": 5, "5-0": 3}', "--force"]) == 0
    assert _node(kz, "/consumers/g/offsets/t/0-0") == (b"5", 0)
    assert _node(kz, "/consumers/g/offsets/t/5-0") == (b"3", 0)
    # past int64: refused before anything is asked
    assert main([*argv, f'{{"0-0": {2**63}}}', "--force"]) == 2
    assert main([*argv[:-1], "--to", str(2**63)]) == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"kafka07: argument --to: '{2**63}' is not earliest, latest or a time in epoch "
        f"milliseconds (0..{2**63 - 1})"
    )
    assert _node(kz, "/consumers/g/offsets/t/0-0") == (b"5", 0)


def test_group_offsets_shows_and_replaces_a_node_not_in_0_7_format(
    topic_t: EmbeddedBroker, zk_connect: str, kz: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    kz.create("/consumers/g/offsets/t/0-0", b"abc", makepath=True)
    argv = ["group-offsets", "--zk", zk_connect, "--group", "g", "--topic", "t", "--to",
            "earliest"]
    node = f"ZooKeeper {zk_connect}: node /consumers/g/offsets/t/0-0: offset must be a " \
        "non-negative decimal integer, got b'abc'"
    assert main([*argv, "--dry-run"]) == 0
    out = capsys.readouterr()
    assert out.out.splitlines() == [
        "broker-partition  current  new  change  earliest  latest",
        "0-0               bad      0    -       0         51",
        "0-1               -        0    -       0         17",
    ]
    assert out.err.splitlines() == [
        f"kafka07: {node}: would be overwritten",
        "would set 2 offsets of group 'g' topic 't' (2 changed): dry run, nothing written",
    ]
    assert main([*argv, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["partitions"][0] == {"broker": 0, "partition": 0, "current": None, "new": 0,
                                    "earliest": 0, "latest": 51, "current_error": node}
    assert _node(kz, "/consumers/g/offsets/t/0-0") == (b"0", 0)


@pytest.fixture
def hung_broker(zk_connect: str) -> Iterator[int]:
    """Broker 0 registered with topic ``t`` at a port that never answers."""
    with unanswering_broker(zk_connect, 0) as port:
        yield port


def test_produce_to_a_hung_broker_makes_one_attempt_and_no_spark_advice(
    zk_connect: str, hung_broker: int, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"one\n")))
    assert main(["produce", "--zk", zk_connect, "--topic", "t", "--timeout-ms", "300"]) == 2
    err = capsys.readouterr().err
    assert f"127.0.0.1:{hung_broker}" in err
    assert "Spark" not in err and "attempts" not in err
    assert err.rstrip().endswith(
        "Nothing was retried: running the command again sends every line again (duplicates "
        "possible for the lines not confirmed as written)"
    )


def test_a_registered_host_with_a_64_character_label_is_one_error_line(
    zk_connect: str, kz: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    host = "h" * 64 + ".example"
    kz.create("/brokers/ids/0", f"c:{host}:9092".encode(), makepath=True)
    assert main(["topics", "--zk", zk_connect]) == 2
    assert capsys.readouterr().err == (
        f"kafka07: ZooKeeper {zk_connect}: node /brokers/ids/0: host '{host}' is not a valid "
        "host name (a dot-separated label is empty or longer than 63 characters)\n"
    )


PASSWORD = "Pw-cli-9f2e-not-shown"


def test_an_acl_protected_zookeeper_with_credentials_from_a_file_or_the_environment(
    topic_t: EmbeddedBroker, zk_connect: str, tmp_path: Any, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from kazoo.security import make_digest_acl

    admin = kazoo_client(zk_connect, auth_data=[("digest", "admin:adminpw")])
    try:
        acl = [make_digest_acl("ops", PASSWORD, all=True),
               make_digest_acl("admin", "adminpw", all=True)]
        for path in ("/brokers/ids", "/brokers/topics", "/brokers/topics/t"):
            admin.set_acls(path, acl)
        admin.create("/consumers/g", b"admin", acl=acl, makepath=True)
    finally:
        admin.stop()
        admin.close()
    monkeypatch.delenv("KAFKA07_ZK_AUTH", raising=False)
    assert main(["topics", "--zk", zk_connect]) == 2
    assert capsys.readouterr().err == (
        f"kafka07: ZooKeeper {zk_connect}: listing /brokers/ids: permission denied by the "
        "node's ACL (no credentials were given: kafka07 takes them from --zk-auth-file PATH or "
        "the environment variable KAFKA07_ZK_AUTH, one line 'user:password')\n"
    )
    auth = tmp_path / "zk.auth"
    auth.write_text(f"ops:{PASSWORD}\n")
    assert main(["topics", "--zk", zk_connect, "--zk-auth-file", str(auth)]) == 0
    assert capsys.readouterr().out.splitlines()[-1].startswith("t ")
    argv = ["group-offsets", "--zk", zk_connect, "--group", "g", "--topic", "t", "--to", "latest"]
    monkeypatch.setenv("KAFKA07_ZK_AUTH", f"digest:ops:{PASSWORD}")
    assert main(argv) == 0  # the nodes under the locked group are written, locked as it is
    admin = kazoo_client(zk_connect, auth_data=[("digest", "admin:adminpw")])
    try:
        for node in ("/consumers/g/offsets", "/consumers/g/offsets/t/0-0"):
            assert admin.get_acls(node)[0] == acl
        assert admin.get("/consumers/g/offsets/t/0-0")[0] == b"51"
    finally:
        admin.stop()
        admin.close()
    assert main(["lag", "--zk", zk_connect, "--group", "g"]) == 0
    assert "0-0               51      51      0" in capsys.readouterr().out
    monkeypatch.setenv("KAFKA07_ZK_AUTH", "ops:wrong")
    assert main(["lag", "--zk", zk_connect, "--group", "g"]) == 2
    err = capsys.readouterr().err
    assert err.endswith("permission denied by the node's ACL (the credentials given lack that "
                        "permission)\n")
    auth.write_text("no separator\n")  # the file wins over the environment
    assert main(["topics", "--zk", zk_connect, "--zk-auth-file", str(auth)]) == 2
    err += capsys.readouterr().err
    assert f"file {auth}" in err and "no separator" not in err and PASSWORD not in err
