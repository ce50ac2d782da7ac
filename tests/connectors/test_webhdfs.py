"""The WebHDFS retry loop and NameNode failover (``connectors/storage/_webhdfs.py``,
``_webhdfs_retry.py``) against a fake NameNode speaking WebHDFS's JSON answers
(``fake_webhdfs.py``): which answers are retried, on which NameNode, for how long, and
the one error at the end. The same against a real NameNode, restarted and absent:
tests/integration/test_hdfs_checkpoints.py."""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_webhdfs import DENIED, DROP, SAFE_MODE, STANDBY, STARTUP, UNAVAILABLE, fake_namenode

from sparkbarrier import ConfigError, FileSystemError
from sparkbarrier.connectors.storage._files import WEBHDFS_ENV, Folder, folder
from sparkbarrier.connectors.storage._webhdfs_retry import RETRY_ENV, Attempt, RetryPolicy, Transient, Unusable, run


@pytest.fixture(autouse=True)
def _environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HADOOP_CONF_DIR", raising=False)
    monkeypatch.delenv("HADOOP_HOME", raising=False)
    monkeypatch.setenv("HADOOP_USER_NAME", "alice")
    monkeypatch.setenv(RETRY_ENV, "20")


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _hdfs(monkeypatch: pytest.MonkeyPatch, *urls: str) -> Folder:
    monkeypatch.setenv(WEBHDFS_ENV, ",".join(urls))
    return folder("hdfs://prod/ckpt")


def _ha_conf(directory: Path, *addresses: str) -> None:
    ids = [f"nn{i}" for i in range(1, len(addresses) + 1)]
    props = {"dfs.nameservices": "prod", "dfs.ha.namenodes.prod": ",".join(ids),
             **{f"dfs.namenode.http-address.prod.{nn}": a for nn, a in zip(ids, addresses, strict=True)}}
    body = "".join(f"<property><name>{k}</name><value>{v}</value></property>" for k, v in props.items())
    (directory / "hdfs-site.xml").write_text(f"<configuration>{body}</configuration>")


@pytest.fixture
def nn() -> Iterator:
    with fake_namenode() as server:
        yield server


@pytest.mark.parametrize("answer", [STARTUP, SAFE_MODE, UNAVAILABLE, DROP], ids=["startup", "safemode", "503", "drop"])
def test_a_namenode_not_ready_yet_is_asked_again_until_it_serves(answer, nn, monkeypatch) -> None:
    f = _hdfs(monkeypatch, nn.url)
    nn.script = [answer, answer]
    f.create("x", b"one")
    assert f.read("x") == b"one" and f.names() == ["x"]
    assert nn.ops()[:3] == ["GETFILESTATUS"] * 3  # two answers retried, then served


def test_standby_moves_to_the_next_namenode_and_the_active_one_is_asked_first_next_time(monkeypatch) -> None:
    with fake_namenode(script=[STANDBY] * 100) as standby, fake_namenode() as active:
        f = _hdfs(monkeypatch, standby.url, active.url)
        started = time.monotonic()
        f.create("x", b"one")
        assert f.read("x") == b"one"
        assert time.monotonic() - started < 2  # the first failover does not sleep
        assert len(standby.requests) == 1  # once, then the active one served every call
        assert active.files == {"/ckpt/x": b"one"}


def test_an_ha_nameservice_from_hdfs_site_fails_over_past_a_namenode_where_nothing_listens(
        nn, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv(WEBHDFS_ENV, raising=False)
    monkeypatch.setenv("HADOOP_CONF_DIR", str(tmp_path))
    _ha_conf(tmp_path, f"127.0.0.1:{_closed_port()}", nn.url.removeprefix("http://"))
    f = folder("hdfs://prod/ckpt")
    f.create("x", b"one")
    assert f.names() == ["x"]


def test_a_namenode_down_past_the_bound_is_one_error_naming_every_address_and_its_origin(
        tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv(RETRY_ENV, "1.5")
    monkeypatch.delenv(WEBHDFS_ENV, raising=False)
    monkeypatch.setenv("HADOOP_CONF_DIR", str(tmp_path))
    ports = _closed_port(), _closed_port()
    _ha_conf(tmp_path, *(f"127.0.0.1:{p}" for p in ports))
    started = time.monotonic()
    with pytest.raises(FileSystemError) as err:
        folder("hdfs://prod/ckpt").names()
    elapsed = time.monotonic() - started
    assert 1.0 < elapsed < 4, elapsed
    message = str(err.value)
    assert "hdfs://prod/ckpt" in message and "1.5 s (SPARKBARRIER_WEBHDFS_RETRY_SECONDS)" in message
    for nn_id, port in zip(("nn1", "nn2"), ports, strict=True):
        assert (f"http://127.0.0.1:{port} (from dfs.namenode.http-address.prod.{nn_id} in {tmp_path}/hdfs-site.xml)"
                f": connection refused") in message
    assert err.value.transient and err.value.location == "hdfs://prod/ckpt" and len(err.value.namenodes) == 2
    assert isinstance(err.value, OSError)  # what callers that handle "cannot reach" catch


def test_the_default_port_is_named_as_the_origin(monkeypatch) -> None:
    monkeypatch.delenv(WEBHDFS_ENV, raising=False)
    monkeypatch.setenv(RETRY_ENV, "0")
    # 127.0.0.9: a loopback host nothing listens on, whether or not the devstack's HDFS
    # (127.0.0.1:9870) runs.
    with pytest.raises(FileSystemError, match=r"http://127\.0\.0\.9:9870 \(from the hdfs:// URL's host on the "
                                              r"default WebHDFS port 9870; HADOOP_CONF_DIR is not set\)"):
        folder("hdfs://127.0.0.9:1/ckpt").exists()


def test_exists_says_false_only_for_not_found(nn, monkeypatch) -> None:
    monkeypatch.setenv(RETRY_ENV, "0")
    f = _hdfs(monkeypatch, nn.url)
    assert not f.exists()
    nn.script = [UNAVAILABLE]
    with pytest.raises(FileSystemError):  # fsspec's own exists() said False here
        f.exists()


def test_permission_is_refused_at_once_naming_the_user(nn, monkeypatch) -> None:
    nn.script = [DENIED]
    started = time.monotonic()
    with pytest.raises(FileSystemError, match="HDFS refused user 'alice': AccessControlException") as err:
        _hdfs(monkeypatch, nn.url).names()
    assert time.monotonic() - started < 1 and len(nn.requests) == 1
    assert err.value.user == "alice" and not err.value.transient


def test_an_address_that_is_not_webhdfs_is_a_config_error_at_once(monkeypatch) -> None:
    import http.server
    import threading

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        with pytest.raises(ConfigError, match=r"not a WebHDFS answer") as err:
            _hdfs(monkeypatch, url).names()
        assert f"{url} (from SPARKBARRIER_WEBHDFS): answered HTTP 404" in str(err.value)
        assert err.value.option == WEBHDFS_ENV
    finally:
        server.shutdown()
        server.server_close()


def test_an_unknown_host_is_a_config_error_at_once(monkeypatch) -> None:
    with pytest.raises(ConfigError, match="unknown host"):
        _hdfs(monkeypatch, "http://no-such-namenode.invalid:9870").names()


def test_a_rename_whose_answer_was_lost_is_not_mistaken_for_a_taken_name(nn, monkeypatch) -> None:
    nn.drop_after = {"RENAME"}  # renamed, then the connection dropped before the answer
    f = _hdfs(monkeypatch, nn.url)
    f.create("x", b"one")
    assert nn.files == {"/ckpt/x": b"one"}
    with pytest.raises(FileExistsError):
        f.create("x", b"two")


def test_the_warning_check_never_raises(caplog: pytest.LogCaptureFixture, monkeypatch) -> None:
    from pyspark.sql.types import LongType, StructField, StructType

    import sparkbarrier.connectors.storage._files as files
    from sparkbarrier.connectors.checkpointed._source import _warn_if_offsets_unrecordable

    class Broken:
        def names(self) -> list[str]:
            raise RuntimeError("Namenode is in startup mode")

    monkeypatch.setattr(files, "folder", lambda _location: Broken())
    with caplog.at_level(logging.WARNING):
        _warn_if_offsets_unrecordable("s", StructType([StructField("v", LongType())]), "hdfs://prod/ckpt")
    assert "RuntimeError: Namenode is in startup mode" in caplog.text


def test_the_loop_sleeps_only_after_every_namenode_failed_and_never_past_the_bound() -> None:
    now = [0.0]
    sleeps: list[float] = []
    tried: list[int] = []

    def attempt(at: Attempt) -> str:
        tried.append(at.node)
        raise Transient("down", failover=True)

    def sleep(s: float) -> None:
        sleeps.append(s)
        now[0] += s

    with pytest.raises(RuntimeError, match="gave up"):
        run(attempt, nodes=2, start=1, policy=RetryPolicy(total_s=10), clock=lambda: now[0], sleep=sleep,
            give_up=lambda reasons, unusable: RuntimeError(f"gave up {reasons} {unusable}"))
    assert tried[:4] == [1, 0, 1, 0] and len(tried) == 2 * len(sleeps) + 2 - (len(tried) % 2)
    assert sum(sleeps) == pytest.approx(10) and all(s <= 8 * 1.5 for s in sleeps)


def test_a_namenode_not_ready_is_asked_again_without_failing_over() -> None:
    tried: list[int] = []

    def attempt(at: Attempt) -> str:
        tried.append(at.node)
        if len(tried) < 3:
            raise Transient("safe mode", failover=False)
        return "ok"

    result = run(attempt, nodes=2, start=0, policy=RetryPolicy(total_s=10, first_sleep_s=0.01),
                 give_up=lambda _reasons, _unusable: RuntimeError("gave up"))
    assert result == ("ok", 0) and tried == [0, 0, 0]


def test_unusable_addresses_are_skipped_and_all_unusable_gives_up_at_once() -> None:
    def attempt(at: Attempt) -> str:
        raise Unusable(f"bad {at.node}")

    with pytest.raises(RuntimeError, match=r"\['bad 0', 'bad 1'\] True"):
        run(attempt, nodes=2, start=0, policy=RetryPolicy(total_s=60),
            give_up=lambda reasons, unusable: RuntimeError(f"{reasons} {unusable}"))


@pytest.mark.parametrize("raw", ["-1", "soon", "nan", "inf"])
def test_a_bad_retry_bound_is_a_config_error(raw: str) -> None:
    with pytest.raises(ConfigError, match=RETRY_ENV):
        RetryPolicy.from_env({RETRY_ENV: raw})
    assert RetryPolicy.from_env({}).total_s == 60 and RetryPolicy.from_env({RETRY_ENV: "0"}).total_s == 0
