"""ZooKeeper with digest ACLs: credentials (``zk.auth.user`` + ``zk.auth.password``) let the
connector read the registry and read and commit group offsets; without them (or with a wrong
password) the first refused call is a :class:`RegistryPermissionError` naming the node. The
password never shows: not in errors, logs (at DEBUG, kazoo's included), reprs, Spark's plans,
temp views, UI, event log or checkpoint.

The nodes are protected the way an operator would (``setAcl`` with a digest ACL, made by an
admin session), on the shared test ZooKeeper in a chroot of the test's own.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _cluster import kazoo_client
from rel_support import Recorder, produce, values

from kafka_pyspark._cluster import Registry
from kafka_pyspark.errors import RegistryPermissionError
from kafka_pyspark.testing.broker import EmbeddedBroker

pytestmark = [pytest.mark.zk]

PASSWORD = "Pw-7c1d-not-in-any-log"
#: a user name found nowhere else: where it shows, Spark showed the options
USER = "acluser7c1d"
AUTH = ("digest", f"{USER}:{PASSWORD}")
#: the same credentials as Spark options
CREDENTIALS = {"zk.auth.user": USER, "zk.auth.password": PASSWORD}
DRIVER = Path(__file__).with_name("secrets_driver.py")


def _admin(zk_connect: str) -> Any:
    return kazoo_client(zk_connect, auth_data=[("digest", "admin:adminpw")])


@pytest.fixture
def locked(
    zk_connect: str, tmp_path: Path
) -> Iterator[tuple[str, EmbeddedBroker, str, str]]:
    """A broker with a topic of 5 + 4 messages; then the registry is made readable only by
    the test user (and ``admin``) and group G's offsets writable only by them."""
    from kazoo.security import make_digest_acl

    topic = f"acl{uuid.uuid4().hex[:6]}"
    group = f"g{uuid.uuid4().hex[:6]}"
    with EmbeddedBroker(
        broker_id=0, log_dir=tmp_path / "b0", zk_connect=zk_connect, num_partitions=2
    ) as broker:
        produce(broker, topic, {0: values("p0", 5), 1: values("p1", 4)})
        broker.wait_for_topic(topic)
        admin = _admin(zk_connect)
        try:
            acl = [make_digest_acl(USER, PASSWORD, all=True),
                   make_digest_acl("admin", "adminpw", all=True)]
            for path in ("/brokers/ids", "/brokers/topics", f"/brokers/topics/{topic}"):
                admin.set_acls(path, acl)
            admin.create(f"/consumers/{group}", b"admin", acl=acl, makepath=True)
            yield zk_connect, broker, topic, group
        finally:
            admin.stop()
            admin.close()


def test_registry_with_and_without_credentials(
    locked: tuple[str, EmbeddedBroker, str, str], caplog: pytest.LogCaptureFixture,
    record: Recorder,
) -> None:
    zk, _broker, topic, group = locked
    caplog.set_level(logging.DEBUG)
    with Registry(zk, auth=AUTH) as r:
        assert set(r.brokers()) == {0}
        assert r.topic_partitions(topic) == {0: 2}
        r.commit_group_offsets(group, topic, {(0, 0): 10, (0, 1): 20}, creator="me")
        assert r.group_offsets(group, topic) == {(0, 0): 10, (0, 1): 20}
        assert PASSWORD not in repr(r)
    # the nodes created under the locked group carry its ACL, not an open one
    admin = _admin(zk)
    try:
        for path in (f"/consumers/{group}/offsets", f"/consumers/{group}/offsets/{topic}/0-0"):
            acls, _ = admin.get_acls(path)
            assert {a.id.id.split(":")[0] for a in acls} == {USER, "admin"}, path
    finally:
        admin.stop()
        admin.close()

    errors: list[str] = []
    with Registry(zk) as r:  # no credentials
        with pytest.raises(RegistryPermissionError) as info:
            r.brokers()
        errors.append(str(info.value))
        assert "listing /brokers/ids: permission denied" in errors[-1]
        assert "no ZooKeeper credentials were given" in errors[-1]
        with pytest.raises(RegistryPermissionError) as info:
            r.commit_group_offsets(group, topic, {(0, 0): 30}, creator="me")
        errors.append(str(info.value))
        assert f"/consumers/{group}/offsets/{topic}/0-0" in errors[-1]
    with Registry(zk, auth=("digest", f"{USER}:wrong-{PASSWORD}")) as r:  # a wrong password
        with pytest.raises(RegistryPermissionError) as info:
            r.group_offsets(group, topic)
        errors.append(str(info.value))
        assert "the ZooKeeper credentials given lack that permission" in errors[-1]
        assert f"/consumers/{group}/offsets/{topic}" in errors[-1]
    for text in [*errors, *(rec.getMessage() for rec in caplog.records)]:
        assert PASSWORD not in text
    with Registry(zk, auth=AUTH) as r:  # the refused commit changed nothing
        assert r.group_offsets(group, topic) == {(0, 0): 10, (0, 1): 20}
    record("ZooKeeper digest ACL: registry, commit with/without credentials", expected=3,
           got=len(errors), detail="RegistryPermissionError x3")


# --- the password in everything Spark shows or keeps ----------------------------------------------

#: Spark's mark for a redacted value (Utils.REDACTION_REPLACEMENT_TEXT)
REDACTED = "*********(redacted)"
#: Python logging in every Python process of the driver's application (driver, Spark's Python
#: workers), each to a file of its own: the connector's and kazoo's loggers at DEBUG, the rest at
#: INFO (py4j's DEBUG log prints every command sent to the JVM, the user's option values too)
_SITECUSTOMIZE = """
import logging, os
logging.basicConfig(
    level=logging.INFO, format="%(name)s %(levelname)s %(message)s",
    filename=os.path.join(os.environ["KAFKA07_TEST_LOG_DIR"], f"py-{os.getpid()}.log"),
)
for name in ("kafka_pyspark", "kazoo"):
    logging.getLogger(name).setLevel(logging.DEBUG)
"""


def run_secrets_driver(config: dict[str, Any], out: Path) -> tuple[dict[str, Any], str]:
    """Run ``secrets_driver.py`` with ``config``; its texts.json and its stdout+stderr."""
    import json
    import os
    import subprocess
    import sys

    site = out / "site"
    (out / "logs").mkdir(parents=True)
    site.mkdir()
    (site / "sitecustomize.py").write_text(_SITECUSTOMIZE)
    (out / "config.json").write_text(json.dumps({**config, "out": str(out)}))
    env = dict(os.environ, KAFKA07_TEST_LOG_DIR=str(out / "logs"))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(site), env.get("PYTHONPATH")) if p)
    done = subprocess.run(
        [sys.executable, str(DRIVER), str(out / "config.json")], stdin=subprocess.DEVNULL,
        capture_output=True, text=True, env=env, timeout=900, check=False,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-5000:]
    return json.loads((out / "texts.json").read_text()), output


def files_under(*roots: Path) -> dict[str, bytes]:
    """Every file under ``roots`` (hidden ones included), by path."""
    return {str(p): p.read_bytes() for root in roots for p in sorted(root.rglob("*"))
            if p.is_file()}


@pytest.mark.spark
@pytest.mark.own_spark
def test_password_appears_nowhere_spark_shows_or_keeps(
    locked: tuple[str, EmbeddedBroker, str, str], tmp_path: Path, record: Recorder,
) -> None:
    """A Spark application of its own (UI and event log on) reads, makes temp views of,
    streams (``availableNow``, ``commitToGroup``) and writes through the ACLs with
    ``zk.auth.user`` + ``zk.auth.password``, with exact rows and group offsets, and meets every
    credentials error (none, a wrong password, ...); the password is in none of its plans,
    views, progress reports, errors, REST answers, event log, checkpoint files, DEBUG logs or
    console output, where the user name shows that the options themselves were shown. (One
    JVM for all of it: a Spark start is most of this test's time.)"""
    zk, broker, topic, group = locked
    ends = {(0, p): broker.log_end(topic, p) for p in range(2)}  # the stream's end
    out = tmp_path / "app"
    got, console = run_secrets_driver(
        {"zk": zk, "topic": topic, "group": group, "user": USER, "password": PASSWORD}, out
    )
    texts: dict[str, str] = got["texts"]
    assert got["counts"] == {
        "batch": 9, "secrets_df_view": 9, "secrets_sql_view": 9, "stream": 9, "after write": 14,
    }
    expected = sorted(v.decode() for v in values("p0", 5) + values("p1", 4))
    assert got["values"] == {"batch": expected, "stream": expected}
    with Registry(zk, auth=AUTH) as r:
        assert r.group_offsets(group, topic) == ends
    # the errors are the ones provoked (the wrong password holds the right one: it is checked too)
    errors = {k.removeprefix("error: "): v for k, v in texts.items() if k.startswith("error: ")}
    assert "RegistryPermissionError" in errors["read, no credentials"]
    assert "listing /brokers/ids: permission denied" in errors["read, no credentials"]
    assert "no ZooKeeper credentials were given" in errors["read, no credentials"]
    assert "RegistryPermissionError" in errors["read, wrong password"]
    assert "RegistryPermissionError" in errors["write, wrong password"]
    assert "RegistryPermissionError" in errors["stream, wrong password"]
    assert "option 'zk.auth.user': is required with zk.auth.password" in errors[
        "read, password without user"]
    assert "option 'zk.auth': is not taken" in errors["read, zk.auth"]
    assert "option 'zk.connect': holds '@': user info" in errors["read, user info in zk.connect"]

    places = {**texts, "console": console}
    kept = files_under(out / "events", out / "cp", out / "logs")
    assert any("/events/" in p for p in kept) and any("/cp/offsets/" in p for p in kept)
    logs = b"".join(v for p, v in kept.items() if "/logs/" in p).decode()
    assert "Sending request: Auth(<credentials not logged>)" in logs  # kazoo's DEBUG lines
    assert "kafka_pyspark." in logs
    leaks = [name for name, text in places.items() if PASSWORD in text]
    leaks += [path for path, data in kept.items() if PASSWORD.encode() in data]
    # the UI and the event log show the views' option maps: the password redacted, the user not
    sql = texts["rest: sql?details=true&planDescription=true"]
    events = b"".join(v for p, v in kept.items() if "/events/" in p).decode()
    for shown in (sql, events):
        assert f"zk.auth.user={USER}" in shown and f"zk.auth.user -> {USER}" in shown
        assert f"zk.auth.password={REDACTED}" in shown  # the DataFrame's view
        assert f"zk.auth.password -> {REDACTED}" in shown  # CREATE TEMP VIEW ... USING
    checked = len(places) + len(kept)
    record("ZooKeeper digest ACL: Spark batch read with credentials", expected=expected,
           got=got["values"]["batch"])
    record("ZooKeeper digest ACL: availableNow stream, commitToGroup", expected=expected,
           got=got["values"]["stream"])
    record("secrets: Spark's plans, views, UI, event log, checkpoint, errors, logs",
           expected=checked, got=checked - len(leaks), detail="places without the password")
    assert leaks == []
