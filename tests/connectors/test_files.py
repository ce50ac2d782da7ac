"""The checkpoint-location layer (``connectors/storage/_files.py``) without a server: local folders,
the ledger's generations, and how an hdfs:// location finds its WebHDFS address.
(Against a real NameNode and DataNode: tests/integration/test_hdfs_checkpoints.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from sparkbarrier._exceptions import CorruptStateError
from sparkbarrier.connectors.storage._files import WEBHDFS_ENV, Folder, folder, is_local
from sparkbarrier.state import PendingCheckpoints
from sparkbarrier.state._pending import LEDGER_STEM


def test_local_paths_and_file_uris_stay_on_the_standard_library(tmp_path: Path) -> None:
    assert is_local(str(tmp_path)) and is_local(f"file://{tmp_path}") and not is_local("hdfs://nn:8020/x")
    f = folder(f"file://{tmp_path}").child("a", "b")
    assert f.names() == [] and not f.exists() and f.read("x") is None
    f.create("x", b"1")
    assert (tmp_path / "a" / "b" / "x").read_bytes() == b"1" and f.names() == ["x"] and f.exists()


def test_create_never_replaces_a_file(tmp_path: Path) -> None:
    f = Folder(str(tmp_path))
    f.create("x", b"first")
    with pytest.raises(FileExistsError):
        f.create("x", b"second")
    assert f.read("x") == b"first" and f.names() == ["x"]  # no temp file left behind
    f.delete("x")
    f.delete("x")
    assert f.names() == []


def test_the_ledger_on_a_folder_saves_a_new_generation_each_time_and_keeps_the_last_three(tmp_path: Path) -> None:
    store = Folder(str(tmp_path / "ledger"))
    ledger = PendingCheckpoints(identity={"sink": "s"})
    for batch in range(5):
        ledger.add(batch, {"t:0": batch * 10}, 0)
        ledger.complete(batch)
        ledger.save(store)
    assert store.names() == [f"{LEDGER_STEM}-{g:012d}.json" for g in (3, 4, 5)]
    restored = PendingCheckpoints.restore(store, identity={"sink": "s"})
    assert restored.newest_id == 4
    restored.add(5, {"t:0": 50}, 0)
    restored.save(store)  # continues after the restored generation
    assert store.names()[-1] == f"{LEDGER_STEM}-{6:012d}.json"


def test_a_corrupt_newest_generation_is_an_error_not_a_silent_step_back(tmp_path: Path) -> None:
    store = Folder(str(tmp_path))
    ledger = PendingCheckpoints(identity={"sink": "s"})
    ledger.add(0, {}, 0)
    ledger.save(store)
    store.create(f"{LEDGER_STEM}-{2:012d}.json", b"{not json")
    with pytest.raises(CorruptStateError):
        PendingCheckpoints.restore(store, identity={"sink": "s"})


def _conf(directory: Path, **props: str) -> None:
    body = "".join(f"<property><name>{k}</name><value>{v}</value></property>" for k, v in props.items())
    (directory / "hdfs-site.xml").write_text(f"<configuration>{body}</configuration>")


def test_hdfs_finds_webhdfs_from_the_hadoop_configuration(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv(WEBHDFS_ENV, raising=False)
    monkeypatch.setenv("HADOOP_CONF_DIR", str(tmp_path))
    _conf(tmp_path, **{"dfs.namenode.http-address": "nn-http.example:50070"})
    fs = folder("hdfs://nn.example:8020/ckpt")._fs
    assert "nn-http.example:50070" in fs.url
    # An HA nameservice: the first NameNode's address.
    _conf(tmp_path, **{"dfs.ha.namenodes.prod": "nn1,nn2",
                       "dfs.namenode.http-address.prod.nn1": "a.example:9871",
                       "dfs.namenode.http-address.prod.nn2": "b.example:9871"})
    assert "a.example:9871" in folder("hdfs://prod/ckpt")._fs.url


def test_hdfs_takes_an_explicit_webhdfs_address_first_and_defaults_to_port_9870(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("HADOOP_CONF_DIR", str(tmp_path))
    monkeypatch.setenv(WEBHDFS_ENV, "http://127.0.0.1:19870")
    assert "127.0.0.1:19870" in folder("hdfs://nn.example:8020/ckpt")._fs.url
    monkeypatch.delenv(WEBHDFS_ENV)
    assert "nn.example:9870" in folder("hdfs://nn.example:8020/ckpt")._fs.url
