"""ZooKeeper credentials in every form they take (Spark options, a file, an environment
variable, the Python API): parsed to ``("digest", "user:password")``; every error says what is
wrong and where, and never quotes the password."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from kafka_pyspark._cluster import Cluster, cluster_options, parse_cluster_options
from kafka_pyspark._cluster.zk_auth import (
    PASSWORD_STATEMENT_REGEX,
    ZK_AUTH_ENV,
    credentials_from_environment,
    credentials_from_file,
    credentials_from_options,
    credentials_from_text,
)
from kafka_pyspark._options import parse_read_options
from kafka_pyspark._options.write_options import parse_write_options
from kafka_pyspark.errors import CredentialsError, OptionError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

SECRET = "s3cr3t-Pa55"
ZK = {"zk.connect": "127.0.0.1:2181"}
CREDS = {"zk.auth.user": "spark", "zk.auth.password": SECRET}


# --- Spark options -----------------------------------------------------------------------------


def test_options_give_the_digest_pair_never_shown() -> None:
    c = parse_cluster_options({**ZK, **CREDS})
    assert c.zk_auth == ("digest", f"spark:{SECRET}")
    assert SECRET not in repr(c)
    with Cluster(c) as cluster:  # handed on to the registry, never shown there either
        assert SECRET not in repr(cluster) and SECRET not in repr(cluster.registry())
    o = parse_read_options({**ZK, "subscribe": "t", **CREDS})
    assert SECRET not in repr(o)
    # a password may hold ':' (ZooKeeper's digest splits at the first one)
    assert parse_cluster_options({**ZK, **CREDS, "zk.auth.password": "a:b:c"}).zk_auth == (
        "digest", "spark:a:b:c")
    assert parse_cluster_options(ZK).zk_auth is None


@pytest.mark.parametrize(
    "options",
    [
        {"zk.auth": f"digest:spark:{SECRET}"},
        {"ZK.AUTH": f"digest:spark:{SECRET}"},
        {"zk.auth": f"digest:spark:{SECRET}", **CREDS},
    ],
)
def test_the_former_zk_auth_option_is_refused_never_quoted(options: dict[str, str]) -> None:
    for parse in (
        lambda: parse_cluster_options({**ZK, **options}),
        lambda: parse_read_options({**ZK, "subscribe": "t", **options}),
        lambda: parse_read_options({**ZK, "subscribe": "t", **options}, "stream"),
        lambda: parse_write_options({**ZK, "topic": "t", **options}),
    ):
        with pytest.raises(OptionError) as info:
            parse()
        text = str(info.value)
        assert info.value.option == "zk.auth"
        assert "zk.auth.user" in text and "zk.auth.password" in text
        assert SECRET not in text


@pytest.mark.parametrize(
    ("options", "option", "says"),
    [
        ({"zk.auth.password": SECRET}, "zk.auth.user", "is required with zk.auth.password"),
        ({"zk.auth.user": "spark"}, "zk.auth.password", "is required with zk.auth.user"),
        ({"zk.auth.user": "", "zk.auth.password": SECRET}, "zk.auth.user", "is empty"),
        ({"zk.auth.user": "spark", "zk.auth.password": ""}, "zk.auth.password", "is empty"),
        ({"zk.auth.user": "sp:ark", "zk.auth.password": SECRET}, "zk.auth.user", "holds ':'"),
        ({"zk.auth.user": " spark", "zk.auth.password": SECRET}, "zk.auth.user", "whitespace"),
    ],
)
def test_malformed_credentials_options(options: dict[str, str], option: str, says: str) -> None:
    with pytest.raises(OptionError) as info:
        parse_cluster_options({**ZK, **options})
    assert info.value.option == option
    assert says in str(info.value)
    assert SECRET not in str(info.value)


def test_credentials_need_zookeeper() -> None:
    with pytest.raises(OptionError, match=r"zk\.auth\.user.*needs zk\.connect") as info:
        parse_cluster_options({"broker.list": "0:h:1", **CREDS})
    assert SECRET not in str(info.value)


@pytest.mark.parametrize(
    "connect",
    [
        f"spark:{SECRET}@127.0.0.1:2181",
        f"spark:{SECRET}@127.0.0.1:2181/kafka",
        f"127.0.0.1:2181,spark:{SECRET}@h2:2181",
        f"spark:a/{SECRET}@127.0.0.1:2181",  # a '/' in the password is not the chroot's
        f"spark@{SECRET}:2181",
    ],
)
def test_zk_connect_user_info_is_refused_never_repeated(connect: str) -> None:
    for parse in (
        lambda: parse_cluster_options({"zk.connect": connect}),
        lambda: parse_read_options({"zk.connect": connect, "subscribe": "t"}),
        lambda: cluster_options(zk_connect=connect),
    ):
        with pytest.raises(OptionError) as info:
            parse()
        assert info.value.option == "zk.connect"
        assert "user info" in str(info.value) and "zk.auth.password" in str(info.value)
        assert SECRET not in str(info.value) and "spark" not in str(info.value)


def test_an_at_sign_in_a_chroot_is_refused_saying_why() -> None:
    """A chroot ``/kafka@dc1`` cannot be told from user info whose password holds '/'
    (``spark:a/b@h:2181``): the error says a chroot cannot hold '@' either."""
    with pytest.raises(OptionError) as info:
        parse_cluster_options({"zk.connect": "127.0.0.1:2181/kafka@dc1"})
    assert "nor an '@' in a chroot (a password holding '/' would pass for one)" in str(
        info.value)
    assert "dc1" not in str(info.value)


def test_python_api_takes_the_parsed_pair() -> None:
    c = cluster_options(zk_connect="h:1", zk_auth=("digest", f"spark:{SECRET}"))
    assert c.zk_auth == ("digest", f"spark:{SECRET}")
    for bad in (("sasl", f"spark:{SECRET}"), ("digest", SECRET), ("digest", f":{SECRET}")):
        with pytest.raises(OptionError) as info:
            cluster_options(zk_connect="h:1", zk_auth=bad)
        assert SECRET not in str(info.value)


# --- a line of text: file, environment variable ------------------------------------------------


@pytest.mark.parametrize(
    ("text", "pair"),
    [
        (f"spark:{SECRET}", ("digest", f"spark:{SECRET}")),
        (f"digest:spark:{SECRET}", ("digest", f"spark:{SECRET}")),
        (f"DIGEST:spark:{SECRET}\n", ("digest", f"spark:{SECRET}")),
        (f"  spark:{SECRET}  \r\n", ("digest", f"spark:{SECRET}")),
        ("digest:pw", ("digest", "digest:pw")),  # a user called digest
        ("spark:a:b", ("digest", "spark:a:b")),
        ("digest:digest:a:b", ("digest", "digest:a:b")),
    ],
)
def test_credentials_from_text(text: str, pair: tuple[str, str]) -> None:
    assert credentials_from_text(text, "test") == pair


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("", "is empty"),
        ("  \n", "is empty"),
        (SECRET, "no password"),
        (f"spark:{SECRET}\nother:{SECRET}", "more than one line"),
        (f":{SECRET}", "user is empty"),
        ("spark:", "no password"),
        (f"digest::{SECRET}", "user is empty"),
        (f"sp\x00ark:{SECRET}", "unprintable"),
    ],
)
def test_malformed_text_is_described_never_quoted(text: str, says: str) -> None:
    with pytest.raises(CredentialsError) as info:
        credentials_from_text(text, "file /etc/k07.auth")
    assert str(info.value).startswith("ZooKeeper credentials from file /etc/k07.auth: ")
    assert says in str(info.value)
    assert SECRET not in str(info.value)
    assert isinstance(info.value, OptionError)


def test_credentials_from_file(tmp_path: Path) -> None:
    f = tmp_path / "auth"
    f.write_text(f"digest:spark:{SECRET}\n")
    assert credentials_from_file(str(f)) == ("digest", f"spark:{SECRET}")


def test_unreadable_files_are_named(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)  # opening it for reading would block: it is refused, not waited on
    big = tmp_path / "big"
    big.write_bytes(b"spark:" + b"x" * (64 * 1024))
    binary = tmp_path / "binary"
    binary.write_bytes(b"spark:\xff\xfe" + SECRET.encode())
    cases = [
        (tmp_path / "missing", "cannot be opened: No such file or directory"),
        (tmp_path, "is not a regular file"),
        (fifo, "is not a regular file"),
        (Path("/dev/zero"), "is not a regular file"),
        (big, "is longer than 65536 bytes"),
        (binary, "is not UTF-8 text"),
    ]
    for path, says in cases:
        with pytest.raises(CredentialsError) as info:
            credentials_from_file(str(path))
        assert str(info.value).startswith(f"ZooKeeper credentials from file {path}: "), path
        assert says in str(info.value), path
        assert SECRET not in str(info.value)


def test_credentials_from_environment() -> None:
    assert credentials_from_environment({}) is None
    assert credentials_from_environment({ZK_AUTH_ENV: "  "}) is None
    assert credentials_from_environment({ZK_AUTH_ENV: f"spark:{SECRET}"}) == (
        "digest", f"spark:{SECRET}")
    with pytest.raises(CredentialsError, match=f"environment variable {ZK_AUTH_ENV}: ") as info:
        credentials_from_environment({ZK_AUTH_ENV: SECRET})
    assert SECRET not in str(info.value)


def test_options_reject_what_the_text_form_rejects() -> None:
    assert credentials_from_options({}) is None
    assert credentials_from_options(CREDS) == credentials_from_text(f"spark:{SECRET}", "t")


#: texts holding SECRET as Spark shows them (a Python ``re`` and a Java regex read each alike)
STATEMENT_TEXTS = [
    # a Spark Connect plan's options, as text (protobuf text format escapes quotes)
    f'options {{\n  key: "zk.auth.password"\n  value: "{SECRET}"\n}}',
    f'options {{\n  key: "ZK.AUTH.PASSWORD"\n  value: "{SECRET}\\"x"\n}}',
    # SQL as typed: quoted or dotted key, with or without '=', any string literal
    f"OPTIONS ('zk.auth.password' '{SECRET}', 'subscribe' 't')",
    f"OPTIONS (zk.auth.password '{SECRET}', subscribe 't')",
    f"OPTIONS (zk.auth.password = '{SECRET}')",
    f"OPTIONS (`zk.auth.password` '{SECRET}')",
    f'OPTIONS (zk.auth.password "{SECRET}", subscribe "t")',
    f"OPTIONS (zk.auth.password r'{SECRET}', subscribe 't')",
    f"OPTIONS (zk.auth.password\n  'x\\'{SECRET}', subscribe 't')",
    # SQL inside a Spark Connect plan's text: its quotes, backslashes and line breaks escaped
    f"query: \"CREATE TEMP VIEW v USING kafka07 OPTIONS (zk.auth.password \\'{SECRET}\\', "
    "\\'subscribe\\' \\'t\\')\"",
    f'query: "CREATE TEMP VIEW v USING kafka07 OPTIONS (zk.auth.password \\"{SECRET}\\", '
    'subscribe \\"t\\")"',
    f"query: \"... OPTIONS (zk.auth.password \\'x\\\\\\'{SECRET}\\', subscribe \\'t\\')\"",
    f'query: "... OPTIONS (zk.auth.password \\"x\\\\\\"{SECRET}\\", subscribe \\"t\\")"',
    f"query: \"... OPTIONS (\\n  zk.auth.password\\n  \\'{SECRET}\\',\\n  subscribe \\'t\\')\"",
    f"query: \"... OPTIONS (\\'zk.auth.password\\' = \\'{SECRET}\\\\\\\\\\', subscribe \\'t\\')\"",
]


@pytest.mark.parametrize("text", STATEMENT_TEXTS)
def test_the_statement_redaction_pattern_hides_the_password(text: str) -> None:
    """The pattern register() gives spark.sql.redaction.string.regex (a Java regex; this one
    means the same in Python's re): the password's value goes, what follows stays."""
    redacted = re.sub(PASSWORD_STATEMENT_REGEX, "*********(redacted)", text)
    assert SECRET not in redacted
    assert "*********(redacted)" in redacted
    assert ("subscribe" in redacted) == ("subscribe" in text)


@pytest.mark.spark
def test_the_statement_redaction_pattern_means_the_same_in_java(spark: SparkSession) -> None:
    """Spark compiles the pattern with java.util.regex: it hides the password in every text."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    pattern = jvm.java.util.regex.Pattern.compile(PASSWORD_STATEMENT_REGEX)
    for text in STATEMENT_TEXTS:
        redacted = pattern.matcher(text).replaceAll("*********(redacted)")
        assert redacted == re.sub(PASSWORD_STATEMENT_REGEX, "*********(redacted)", text), text
        assert SECRET not in redacted, text
