"""``kafka07 group-offsets --export`` / ``--import``: a group's offsets across topics in one
JSON shape (the one ``lag --json`` includes), against a real ZooKeeper and an embedded broker;
an import is checked as ``--offsets`` is, every topic before anything is written."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from _cluster import THREE, produce_direct

from kafka_pyspark._admin.group_offsets import parse_offsets_document
from kafka_pyspark._cluster import Registry
from kafka_pyspark.cli import main
from kafka_pyspark.errors import OffsetFormatError

if TYPE_CHECKING:
    from kafka_pyspark.testing.broker import EmbeddedBroker

pytestmark = pytest.mark.zk


@pytest.fixture
def two_topics(broker: EmbeddedBroker, zk_connect: str) -> str:
    """Topics ``t`` (0-0: 51 bytes, 0-1: 17) and ``u`` (0-0: 34); group ``g`` committed
    t 0-0 = 17, t 0-1 = 0, u 0-0 = 34."""
    produce_direct(broker, "t", 0, THREE)
    produce_direct(broker, "t", 1, THREE[:1])
    produce_direct(broker, "u", 0, THREE[:2])
    broker.wait_for_topic("t")
    broker.wait_for_topic("u")
    with Registry(zk_connect) as reg:
        reg.commit_group_offsets_of("g", {"t": {(0, 0): 17, (0, 1): 0}, "u": {(0, 0): 34}},
                                    creator="test")
    return zk_connect


def _export(zk: str, group: str, capsys: pytest.CaptureFixture[str]) -> Any:
    assert main(["group-offsets", "--zk", zk, "--group", group, "--export"]) == 0
    return json.loads(capsys.readouterr().out)


def test_export_every_topic_then_import_into_another_group(
    two_topics: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    zk = two_topics
    doc = _export(zk, "g", capsys)
    assert doc == {"group": "g", "offsets": {"t": {"0-0": 17, "0-1": 0}, "u": {"0-0": 34}}}
    # lag --json holds the same shape
    assert main(["lag", "--zk", zk, "--group", "g", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["offsets"] == doc["offsets"]
    path = tmp_path / "g.json"
    path.write_text(json.dumps(doc))
    base = ["group-offsets", "--zk", zk, "--import", str(path), "--group", "h"]
    assert main([*base, "--dry-run"]) == 0
    err = capsys.readouterr().err
    assert "would set 2 offsets of group 'h' topic 't' (2 changed): dry run" in err
    with Registry(zk) as reg:
        assert reg.group_topics("h") == []  # a dry run writes nothing
    assert main([*base, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert [(t["topic"], [(p["broker"], p["partition"], p["current"], p["new"])
                          for p in t["partitions"]]) for t in shown["topics"]] == [
        ("t", [(0, 0, None, 17), (0, 1, None, 0)]), ("u", [(0, 0, None, 34)])]
    assert _export(zk, "h", capsys) == {**doc, "group": "h"}


def test_import_checks_every_topic_before_writing_any(
    two_topics: str, tmp_path: Path, kz: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    zk = two_topics
    path = tmp_path / "bad.json"
    # t is fine; u 0-0 = 40 is past its log's end (34)
    path.write_text(json.dumps({"group": "g", "offsets": {"t": {"0-0": 51}, "u": {"0-0": 40}}}))
    assert main(["group-offsets", "--zk", zk, "--import", str(path)]) == 1
    assert "0-0: offset 40 is outside the log [0, 34] (--force sets it anyway)" in \
        capsys.readouterr().err
    assert _export(zk, "g", capsys)["offsets"]["t"] == {"0-0": 17, "0-1": 0}  # nothing written
    # a running group is refused as with --offsets, unless --force
    path.write_text(json.dumps({"group": "g", "offsets": {"u": {"0-0": 17}}}))
    kz.create("/consumers/g/owners/u/0-0", b"g_host-1-0", makepath=True, ephemeral=True)
    assert main(["group-offsets", "--zk", zk, "--import", str(path)]) == 1
    assert "group 'g' has live consumers (owner of 0-0: g_host-1-0)" in capsys.readouterr().err
    assert main(["group-offsets", "--zk", zk, "--import", str(path), "--force"]) == 0
    assert "was written anyway (--force)" in capsys.readouterr().err
    assert _export(zk, "g", capsys)["offsets"]["u"] == {"0-0": 17}


def test_export_reports_a_node_not_in_0_7_format_and_leaves_it_out(
    two_topics: str, kz: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    kz.set("/consumers/g/offsets/u/0-0", b"abc")
    assert main(["group-offsets", "--zk", two_topics, "--group", "g", "--export"]) == 1
    out = capsys.readouterr()
    assert json.loads(out.out)["offsets"] == {"t": {"0-0": 17, "0-1": 0}}
    assert out.err.splitlines()[0] == (
        f"kafka07: ZooKeeper {two_topics}: node /consumers/g/offsets/u/0-0: offset must be a "
        "non-negative decimal integer, got b'abc': not exported")
    assert main(["group-offsets", "--zk", two_topics, "--group", "nobody", "--export"]) == 1
    assert capsys.readouterr().err == "kafka07: group 'nobody' has no committed offsets\n"


@pytest.mark.parametrize(("text", "message"), [
    ("[1]", '--import x must be a JSON object {"group": ..., "offsets": '),
    ('{"group": "g", "offsets": {}}', "--import x: offsets must be a JSON object of topics"),
    ('{"group": "g", "offsets": {"t": {"0-0": -1}}}',
     "--import x: topic 't': 0-0: -1 is not a byte offset"),
    ('{"group": "g", "offsets": {"t": {"a-b": 1}}}',
     "--import x: topic 't': 'a-b' is not brokerId-partition"),
    ('{"group": 7, "offsets": {"t": {"0-0": 1}}}', "--import x: group must be a group id"),
])
def test_a_malformed_document_names_what_and_where(text: str, message: str) -> None:
    with pytest.raises(OffsetFormatError) as e:
        parse_offsets_document(text, "--import x")
    assert str(e.value).startswith(message)


def test_import_into_an_acl_protected_group_as_group_offsets_writes(
    two_topics: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from _cluster import kazoo_client
    from kazoo.security import make_digest_acl

    zk = two_topics
    acl = [make_digest_acl("ops", "s3cret-pw", all=True),
           make_digest_acl("admin", "adminpw", all=True)]
    admin = kazoo_client(zk, auth_data=[("digest", "admin:adminpw")])
    try:
        admin.create("/consumers/locked", b"admin", acl=acl, makepath=True)
    finally:
        admin.stop()
        admin.close()
    path = tmp_path / "g.json"
    path.write_text(json.dumps(_export(zk, "g", capsys)))
    argv = ["group-offsets", "--zk", zk, "--import", str(path), "--group", "locked"]
    monkeypatch.delenv("KAFKA07_ZK_AUTH", raising=False)
    assert main(argv) == 2
    assert "permission denied by the node's ACL (no credentials were given: kafka07 takes " \
        "them from --zk-auth-file PATH" in capsys.readouterr().err
    monkeypatch.setenv("KAFKA07_ZK_AUTH", "ops:s3cret-pw")
    assert main(argv) == 0
    capsys.readouterr()
    admin = kazoo_client(zk, auth_data=[("digest", "admin:adminpw")])
    try:  # the new nodes are locked as the group's node is
        for node in ("/consumers/locked/offsets", "/consumers/locked/offsets/u/0-0"):
            assert admin.get_acls(node)[0] == acl
        assert admin.get("/consumers/locked/offsets/u/0-0")[0] == b"34"
    finally:
        admin.stop()
        admin.close()
    assert _export(zk, "locked", capsys)["offsets"] == {"t": {"0-0": 17, "0-1": 0},
                                                        "u": {"0-0": 34}}
