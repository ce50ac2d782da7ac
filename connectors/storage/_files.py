"""Spark's checkpoint location and what we keep beside it, on whatever file system it is on.

Why. Production keeps ``checkpointLocation`` on HDFS (or an object store) and
reschedules a dead driver on another node with an empty disk. Spark reads that location
through Hadoop's ``FileSystem`` in the JVM; our driver-side code runs in Python workers
without py4j (a sink's commit worker cannot reach the JVM), so it needs a file-system
client of its own. That is fsspec: one maintained layer for local files, HDFS (through
WebHDFS, pure Python: no libhdfs, JNI or Hadoop install on the node), S3, GCS and ABFS
(``s3fs``, ``gcsfs``, ``adlfs``, installed by whoever uses them), with one interface.
Local paths (and ``file:``) keep going through the standard library, as before.

How ``hdfs://nameservice-or-host:port/path`` reaches WebHDFS, first match wins:

1. ``SPARKBARRIER_WEBHDFS`` (``http[s]://host:port``, or several, comma-separated, for an
   HA pair): explicit NameNode HTTP addresses (the devstack's ``env`` prints one);
2. the Hadoop configuration a Spark node has (``$HADOOP_CONF_DIR``, else
   ``$HADOOP_HOME/etc/hadoop``): ``dfs.namenode.http-address`` (or ``https-address``
   under ``dfs.http.policy=HTTPS_ONLY``); for an HA nameservice (``dfs.ha.namenodes.<ns>``)
   every NameNode's ``dfs.namenode.http-address.<ns>.<nn>``, in that order;
3. the URI's host on Hadoop's default HTTP port, 9870.

Every call goes through one bounded retry loop (``_webhdfs_retry.py``, bound
``SPARKBARRIER_WEBHDFS_RETRY_SECONDS``, default 60 s) that rides through a NameNode
restart and follows the active NameNode of an HA pair (``_webhdfs.py``); errors name
every address tried and where it came from.

WebHDFS authenticates as ``HADOOP_USER_NAME`` (else the OS user, as Hadoop's client) on a
cluster without Kerberos, and with SPNEGO as the ticket cache's principal (``kinit``;
``_webhdfs_spnego.py``, on the ``kerberos`` extra's ``gssapi``) where
``hadoop.security.authentication`` is ``kerberos`` in that configuration.

:class:`Folder` is the one handle the rest of the package uses: read a file, list a
folder, and *create* a file atomically, never replacing one (the only write HDFS,
WebHDFS and object stores all make atomic: a rename onto a free name, a PUT).
"""

from __future__ import annotations

import contextlib
import getpass
import os
import uuid
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ..._exceptions import ConfigError
from ._webhdfs_retry import NameNode, RetryPolicy

__all__ = ["WEBHDFS_ENV", "Folder", "folder", "is_local"]

WEBHDFS_ENV = "SPARKBARRIER_WEBHDFS"
_DEFAULT_HTTP_PORT = 9870


def is_local(location: str) -> bool:
    return location.startswith("file:") or "://" not in location


def _local_path(location: str) -> Path:
    if location.startswith("file:"):
        return Path("/" + location[len("file:"):].lstrip("/"))
    return Path(location)


class Folder:
    """A folder on the checkpoint's file system (it need not exist yet).

    Every method is safe to call from any process: nothing is cached between calls
    except the file-system client.
    """

    def __init__(self, location: str, fs: Any = None, path: str | None = None) -> None:
        self.location = location.rstrip("/") or location
        self._fs = fs  # None: the local file system
        self._path = path if path is not None else str(_local_path(self.location))

    def __repr__(self) -> str:
        return f"Folder({self.location!r})"

    def child(self, *names: str) -> Folder:
        suffix = "/".join(names)
        return Folder(f"{self.location}/{suffix}", self._fs, f"{self._path.rstrip('/')}/{suffix}")

    def _join(self, name: str) -> str:
        return f"{self._path.rstrip('/')}/{name}"

    def read(self, name: str) -> bytes | None:
        """A file's bytes, or None when it does not exist."""
        if self._fs is None:
            try:
                return (Path(self._path) / name).read_bytes()
            except FileNotFoundError:
                return None
        try:
            return bytes(self._fs.cat_file(self._join(name)))
        except FileNotFoundError:
            return None

    def names(self) -> list[str]:
        """The names in the folder ([] when it does not exist)."""
        if self._fs is None:
            path = Path(self._path)
            return sorted(p.name for p in path.iterdir()) if path.is_dir() else []
        try:
            entries = self._fs.ls(self._path, detail=False)
        except FileNotFoundError:
            return []
        return sorted(str(e).rstrip("/").rsplit("/", 1)[-1] for e in entries)

    def exists(self) -> bool:
        if self._fs is None:
            return Path(self._path).is_dir()
        return bool(self._fs.isdir(self._path))

    def create(self, name: str, data: bytes) -> None:
        """Write a *new* file in one atomic step; :class:`FileExistsError` if ``name`` exists.

        A temporary name in the same folder, then a rename onto the free name (a link on
        a local disk): readers see the whole file or none, and two writers of one name
        cannot both succeed. Object stores have no rename; a PUT is atomic there.
        """
        tmp = f".{name}.{uuid.uuid4().hex}.tmp"
        if self._fs is None:
            directory = Path(self._path)
            directory.mkdir(parents=True, exist_ok=True)
            temp = directory / tmp
            with open(temp, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            try:
                os.link(temp, directory / name)  # fails if the name is taken
            finally:
                temp.unlink(missing_ok=True)
            return
        target = self._join(name)
        if self._fs.exists(target):
            raise FileExistsError(f"{self.location}/{name} exists")
        self._fs.makedirs(self._path, exist_ok=True)
        if not _renames_atomically(self._fs):
            self._fs.pipe_file(target, data)
            return
        temp_path = self._join(tmp)
        self._fs.pipe_file(temp_path, data)
        try:
            self._fs.mv(temp_path, target)
        finally:
            if self._fs.exists(temp_path):  # the rename was refused: the name was taken meanwhile
                self._fs.rm_file(temp_path)
                raise FileExistsError(f"{self.location}/{name} exists")

    def delete(self, name: str) -> None:
        """Remove a file; nothing when it is gone already."""
        if self._fs is None:
            (Path(self._path) / name).unlink(missing_ok=True)
            return
        with contextlib.suppress(FileNotFoundError):
            self._fs.rm_file(self._join(name))


def _renames_atomically(fs: Any) -> bool:
    protocol = fs.protocol if isinstance(fs.protocol, str) else fs.protocol[0]
    return protocol in {"webhdfs", "hdfs", "viewfs", "file", "local"}


def folder(location: str) -> Folder:
    """The folder at ``location``: a local path, ``file:``, ``hdfs://``, ``webhdfs://``, ``s3a://``, ...

    Raises :class:`ConfigError` naming the package to install when the scheme needs an
    fsspec implementation that is missing.
    """
    if is_local(location):
        return Folder(location)
    parts = urlsplit(location)
    scheme = parts.scheme.lower()
    try:
        import fsspec
    except ImportError as exc:  # a declared dependency; only a broken install lacks it
        raise ConfigError(f"reading {location!r} needs fsspec (pip install fsspec)", option="checkpointLocation") \
            from exc
    if scheme == "hdfs":
        return Folder(location, _webhdfs(parts.hostname or "", authority=f"hdfs://{parts.netloc}"), parts.path or "/")
    if scheme in ("webhdfs", "swebhdfs"):
        http = "https" if scheme == "swebhdfs" else "http"
        node = NameNode(f"{http}://{parts.hostname}:{parts.port or _DEFAULT_HTTP_PORT}", "the location's URL",
                        "checkpointLocation")
        return Folder(location, _webhdfs(parts.hostname or "", authority=f"{scheme}://{parts.netloc}",
                                         explicit=(node,)), parts.path or "/")
    protocol = {"s3a": "s3", "s3n": "s3", "abfss": "abfs", "wasbs": "abfs"}.get(scheme, scheme)
    try:
        fs = fsspec.filesystem(protocol)
    except (ImportError, ValueError) as exc:
        raise ConfigError(f"checkpoint location {location!r}: the {scheme}:// file system needs an fsspec "
                          f"implementation ({exc}); install it on the driver (s3fs, gcsfs or adlfs)",
                          option="checkpointLocation") from exc
    return Folder(location, fs, f"{parts.netloc}{parts.path}")


def _hadoop_user(kerberos: bool) -> str | None:
    """Whom WebHDFS acts for without Kerberos: ``HADOOP_USER_NAME``, else the OS user (as
    Hadoop's client); None under SPNEGO, where the ticket names the user."""
    if kerberos:
        return None
    return os.environ.get("HADOOP_USER_NAME") or getpass.getuser()


def _webhdfs(host: str, *, authority: str, explicit: tuple[NameNode, ...] = ()) -> Any:
    """The WebHDFS client of a ``hdfs://`` URL's nameservice or NameNode ``host`` (or of the
    ``explicit`` addresses of a ``webhdfs://`` URL), retrying within the bound of
    ``SPARKBARRIER_WEBHDFS_RETRY_SECONDS``."""
    from ._webhdfs import WebHdfs

    directory, conf = _hadoop_conf()
    kerberos = conf.get("hadoop.security.authentication", "").lower() == "kerberos"
    nodes = explicit or namenodes(host, directory, conf)
    return WebHdfs(nodes, authority=authority, retry_s=RetryPolicy.from_env().total_s, kerberos=kerberos,
                   user=_hadoop_user(kerberos))


def namenodes(host: str, directory: str, conf: dict[str, str]) -> tuple[NameNode, ...]:
    """The NameNode HTTP addresses of a ``hdfs://`` URL's ``host``, in the order to try them,
    each with its origin; see the module docstring for the order of the sources."""
    explicit = os.environ.get(WEBHDFS_ENV, "").strip()
    if explicit:
        return tuple(_explicit(address.strip()) for address in explicit.split(",") if address.strip())
    https = conf.get("dfs.http.policy", "HTTP_ONLY").upper() == "HTTPS_ONLY"
    scheme, key = ("https", "dfs.namenode.https-address") if https else ("http", "dfs.namenode.http-address")
    ids = [nn.strip() for nn in conf.get(f"dfs.ha.namenodes.{host}", "").split(",") if nn.strip()]
    keys = [f"{key}.{host}.{nn}" for nn in ids] or [f"{key}.{host}", key]
    found = [(k, conf[k]) for k in keys if conf.get(k)]
    if not found and ids:
        found = [(key, conf[key])] if conf.get(key) else []
    nodes = []
    for k, address in found:
        http_host, _, port = address.rpartition(":")
        if http_host in ("0.0.0.0", ""):  # bound to every interface: the RPC address's host names it
            rpc = conf.get(k.replace(key, "dfs.namenode.rpc-address", 1), "")
            http_host = rpc.rpartition(":")[0] or host
        nodes.append(NameNode(f"{scheme}://{http_host}:{port or _DEFAULT_HTTP_PORT}",
                              f"{k} in {directory}/hdfs-site.xml", "HADOOP_CONF_DIR"))
    return tuple(nodes) or (NameNode(f"{scheme}://{host}:{_DEFAULT_HTTP_PORT}",
                                     f"the hdfs:// URL's host on the default WebHDFS port {_DEFAULT_HTTP_PORT}"
                                     + (f"; {directory}/hdfs-site.xml names none" if directory else
                                        "; HADOOP_CONF_DIR is not set"), "HADOOP_CONF_DIR"),)


def _explicit(address: str) -> NameNode:
    url = urlsplit(address)
    if url.scheme not in ("http", "https") or not url.hostname:
        raise ConfigError(f"{WEBHDFS_ENV}={address!r}: give the NameNode's HTTP address(es) as "
                          "http[s]://host:port[,http[s]://host2:port]", option=WEBHDFS_ENV)
    return NameNode(f"{url.scheme}://{url.hostname}:{url.port or _DEFAULT_HTTP_PORT}", WEBHDFS_ENV, WEBHDFS_ENV)


def _hadoop_conf() -> tuple[str, dict[str, str]]:
    """(the folder, ``core-site.xml`` and ``hdfs-site.xml`` of the node's Hadoop configuration merged)."""
    directory = os.environ.get("HADOOP_CONF_DIR") or (
        os.path.join(os.environ["HADOOP_HOME"], "etc", "hadoop") if os.environ.get("HADOOP_HOME") else "")
    conf: dict[str, str] = {}
    for name in ("core-site.xml", "hdfs-site.xml"):
        path = Path(directory, name) if directory else None
        if path is None or not path.is_file():
            continue
        try:
            root = ET.parse(path).getroot()
        except ET.ParseError as exc:
            raise ConfigError(f"{path} is not valid XML: {exc}", option="HADOOP_CONF_DIR") from exc
        for prop in root.iter("property"):
            key, value = prop.findtext("name"), prop.findtext("value")
            if key and value is not None:
                conf[key.strip()] = value.strip()
    return directory, conf
