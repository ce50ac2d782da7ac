"""WebHDFS for ``hdfs://`` and ``webhdfs://`` checkpoint locations: fsspec's client, with every
call through the one retry loop (``_webhdfs_retry.run``) and across the nameservice's NameNodes.

Why a subclass of fsspec's ``WebHDFS`` and not a client of our own: fsspec keeps the
authentication by ``user.name`` and delegation tokens, and the session; SPNEGO is ours
(``_webhdfs_spnego.py``: a header from the login the Kafka and HBase hops share, not
fsspec's ``requests-kerberos``, which was never installed). What fsspec lacks is what a
restart or a failover needs. Its ``_call`` sends one request to one NameNode, with no
timeout, and turns every WebHDFS exception into ``RuntimeError`` or ``PermissionError`` by
HTTP status, where a NameNode answers 403 both for "permission denied" and for "I am the
standby". So:

* ``_request`` is one attempt at one NameNode (``NameNode.url``), with a timeout no
  longer than the call has left. It classifies the answer by the WebHDFS exception name
  (``RemoteException.exception``: the contract; messages change between releases) and
  the HTTP status, in :func:`_check`, and network errors by their type, in :meth:`_send`;
* ``_call`` (every fsspec operation: info, ls, mkdir, rm) and the compound operations
  below run their attempts through :func:`run`, starting at the NameNode that served
  last;
* compound operations are one attempt each, so a retry repeats all their steps:
  ``cat_file`` (OPEN, then the DataNode's bytes, whose status fsspec never checks),
  ``pipe_file`` (CREATE with overwrite, then the bytes: one PUT, not fsspec's empty
  CREATE + APPEND, which is not safe to repeat) and ``mv`` (RENAME, which is not
  idempotent: a retry first looks whether the earlier try renamed already);
* ``exists`` and ``isdir`` say False only for "not found": fsspec's swallow every
  exception, which turns "NameNode down" into "no such file".

What a retry is for, by answer: a refused, reset or timed-out connection, a
``StandbyException`` and an HTTP 5xx move to the next NameNode (Hadoop's failover);
``RetriableException`` (the NameNode "is in startup mode") and ``SafeModeException`` wait
on the same one. A permission refusal, "not found", a bad request and a TLS failure are
answers: they raise at once. An address with no NameNode behind it at all (unknown host,
an HTTP answer that is not WebHDFS) is skipped; when all are, a :class:`ConfigError`
names each address and where it came from.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar
from urllib.parse import quote, urlsplit

import requests
from fsspec.implementations.webhdfs import WebHDFS

from ..._exceptions import ConfigError, FileSystemError
from ._webhdfs_retry import RETRY_ENV, Attempt, NameNode, RetryPolicy, Transient, Unusable, run
from ._webhdfs_spnego import check_gssapi, negotiate

__all__ = ["WebHdfs"]

T = TypeVar("T")

_CONNECT_TIMEOUT_S = 10.0
_READ_TIMEOUT_S = 60.0  # Hadoop's dfs.webhdfs.socket.read-timeout
_MIN_TIMEOUT_S = 1.0

# WebHDFS exception names (RemoteException.exception) by what a client does about them.
_NEXT_NAMENODE = frozenset({"StandbyException"})
_NOT_READY = frozenset({"RetriableException", "SafeModeException", "ObserverRetryOnActiveException",
                        "ConnectException", "ConnectTimeoutException", "SocketTimeoutException", "SocketException",
                        "EOFException", "NoRouteToHostException", "ClosedChannelException"})
_NO_DATANODE = frozenset({"IOException"})
_DENIED = frozenset({"AccessControlException", "SecurityException", "AuthorizationException",
                     "AuthenticationException"})


class WebHdfs(WebHDFS):
    """fsspec's WebHDFS across ``namenodes`` (one for a plain NameNode, two or more for an
    HA nameservice), each call retried within ``retry_s`` seconds.

    ``authority`` (``hdfs://nameservice``) prefixes the paths errors name. Safe to share
    between threads: the only state beyond fsspec's session is the index of the NameNode
    that served last, a hint.
    """

    def __init__(self, namenodes: tuple[NameNode, ...], *, authority: str, retry_s: float,
                 kerberos: bool = False, user: str | None = None, **kwargs: Any) -> None:
        if self._cached:
            return
        first = urlsplit(namenodes[0].url)
        if kerberos:
            check_gssapi()
        super().__init__(host=first.hostname, port=first.port, kerberos=False, user=user,
                         use_https=first.scheme == "https", **kwargs)
        self.spnego = kerberos
        self.namenodes = namenodes
        self.authority = authority
        self.policy = RetryPolicy(total_s=retry_s)
        self._active = 0

    # ------------------------------------------------------------------ the loop
    def _retrying(self, op: str, path: str | None, attempt: Callable[[Attempt], T]) -> T:
        def answered(at: Attempt) -> T:
            try:
                return attempt(at)
            except (Transient, Unusable):
                raise
            except Exception:
                self._active = at.node  # an answer ("not found" too): this NameNode serves
                raise

        result, self._active = run(answered, nodes=len(self.namenodes), start=self._active, policy=self.policy,
                                   give_up=self._give_up(op, path), what=f"{op} {self._location(path)}")
        return result

    def _give_up(self, op: str, path: str | None) -> Callable[[Sequence[str | None], bool], Exception]:
        location = self._location(path)

        def error(reasons: Sequence[str | None], unusable: bool) -> Exception:
            tried = "; ".join(f"{node}: {reason or 'not tried'}"
                              for node, reason in zip(self.namenodes, reasons, strict=True))
            if unusable:
                return ConfigError(
                    f"{location}: no NameNode's WebHDFS at the address tried ({tried}); set the NameNode's "
                    "HTTP address: HADOOP_CONF_DIR with the cluster's hdfs-site.xml (dfs.namenode.http-address), "
                    "or SPARKBARRIER_WEBHDFS=http://namenode:9870", option=self.namenodes[0].option)
            return FileSystemError(
                f"{location}: {op} failed: no NameNode served it within {self.policy.total_s:g} s ({RETRY_ENV}); "
                f"tried {tried}", location=location, namenodes=tuple(map(str, self.namenodes)),
                user=self.user, transient=True)
        return error

    def _location(self, path: str | None) -> str:
        return f"{self.authority}{self._strip_protocol(path) if path else '/'}"

    # ------------------------------------------------------------------ one attempt
    def _request(self, at: Attempt, op: str, method: str = "get", path: str | None = None, data: Any = None,
                 redirect: bool = True, **params: Any) -> requests.Response:
        """One WebHDFS request to the attempt's NameNode; raises what :func:`_check` decides.

        Asked for a DataNode to redirect to (CREATE, OPEN without following), a NameNode
        answers a bare ``IOException`` only when it has none ("Failed to find datanode",
        right after a restart, before the DataNodes report): not ready, so retried. So
        does a DataNode whose own call to the NameNode failed (it is the client that
        writes and reads the blocks): :meth:`_send` retries every DataNode answer that is
        not one of the answers (permission, not found, bad request), within the bound."""
        not_ready = _NO_DATANODE if not redirect and op in ("CREATE", "OPEN") else frozenset()
        stripped = self._strip_protocol(path) if path is not None else ""
        url = self._apply_proxy(f"{self.namenodes[at.node].url}/webhdfs/v1{quote(stripped, safe='/=')}")
        headers = {"Authorization": negotiate(urlsplit(url).hostname or "")} if self.spnego else {}
        return self._send(at, method, url, path, params={**params, **self.pars, "op": op.upper()}, data=data,
                          allow_redirects=redirect, not_ready=not_ready, headers=headers)

    def _send(self, at: Attempt, method: str, url: str, path: str | None, *, datanode: bool = False,
              not_ready: frozenset[str] = frozenset(), **kwargs: Any) -> requests.Response:
        read = max(_MIN_TIMEOUT_S, min(_READ_TIMEOUT_S, at.remaining_s))
        where = "{0.scheme}://{0.netloc}".format(urlsplit(url))
        # Reasons are listed after the NameNode they belong to; a DataNode's names itself.
        prefix = f"DataNode {where}: " if datanode else ""
        try:
            response: requests.Response = self.session.request(
                method.upper(), url, timeout=(min(_CONNECT_TIMEOUT_S, read), read), **kwargs)
        except requests.exceptions.SSLError as exc:  # a certificate does not heal by waiting
            raise FileSystemError(f"{self._location(path)}: TLS with {where} failed: {exc}",
                                  location=self._location(path), namenodes=tuple(map(str, self.namenodes)),
                                  user=self.user) from exc
        except requests.exceptions.ConnectionError as exc:
            if _unresolvable(exc) and not datanode:
                raise Unusable("unknown host") from exc
            raise Transient(prefix + _network_reason(exc), failover=not datanode) from exc
        except (requests.exceptions.Timeout, requests.exceptions.ChunkedEncodingError) as exc:
            raise Transient(prefix + _network_reason(exc), failover=not datanode) from exc
        try:
            _check(response, prefix, not_ready, unknown_not_ready=datanode)
        except Unusable as exc:
            if datanode:  # the NameNode named it: not an address the operator gave
                raise Transient(exc.reason, failover=False) from exc
            raise
        except PermissionError as exc:
            raise self._denied(path, str(exc)) from exc
        except _Refused as exc:
            raise FileSystemError(f"{self._location(path)}: {where} {exc}", location=self._location(path),
                                  namenodes=tuple(map(str, self.namenodes)), user=self.user) from exc
        return response

    def _denied(self, path: str | None, reason: str) -> FileSystemError:
        location = self._location(path)
        who = f"user {self.user!r}" if self.user else "the Kerberos principal of the ticket cache (kinit)"
        return FileSystemError(f"{location}: HDFS refused {who}: {reason}; give {who} access to the path, or run "
                               "as a user who has it (HADOOP_USER_NAME, or kinit on a Kerberos cluster)",
                               location=location, namenodes=tuple(map(str, self.namenodes)), user=self.user)

    # ------------------------------------------------------------------ fsspec's operations
    def _call(self, op: str, method: str = "get", path: str | None = None, data: Any = None, redirect: bool = True,
              **kwargs: Any) -> requests.Response:
        """Every fsspec operation's request (info, ls, mkdir, rm, ...), retried."""
        return self._retrying(op, path, lambda at: self._request(at, op, method, path, data, redirect, **kwargs))

    def cat_file(self, path: str, start: int | None = None, end: int | None = None, **kwargs: Any) -> bytes:  # noqa: ARG002 -- fsspec's signature
        """The file's bytes (``start``/``end``: a range): OPEN, then the DataNode, as one attempt."""
        params: dict[str, Any] = {} if start is None else {"offset": start}
        if end is not None:
            params["length"] = end - (start or 0)

        def attempt(at: Attempt) -> bytes:
            first = self._request(at, "OPEN", "get", path, None, False, **params)
            location = first.headers.get("Location")
            if location is None:
                return bytes(first.content)
            return bytes(self._send(at, "get", self._apply_proxy(location), path, datanode=True).content)
        return self._retrying("OPEN", path, attempt)

    def pipe_file(self, path: str, value: bytes, mode: str = "overwrite", **kwargs: Any) -> None:  # noqa: ARG002
        """Write (replace) a file in one PUT to the DataNode the NameNode names; repeatable."""
        if mode != "overwrite":
            raise ValueError(f"WebHDFS pipe_file writes with mode='overwrite' only, not {mode!r}")

        def attempt(at: Attempt) -> None:
            first = self._request(at, "CREATE", "put", path, redirect=False, overwrite="true")
            location = first.headers.get("Location")
            if location is None:
                raise Transient(f"CREATE {path} answered {first.status_code} without a DataNode", failover=False)
            self._send(at, "put", self._apply_proxy(location), path, datanode=True, data=value,
                       headers={"content-type": "application/octet-stream"})
        self._retrying("CREATE", path, attempt)

    def mv(self, path1: str, path2: str, **kwargs: Any) -> None:  # noqa: ARG002
        """RENAME ``path1`` onto ``path2`` (WebHDFS refuses an existing target: the call
        returns and ``path1`` stays). A retry whose earlier try may have renamed counts
        it as done when ``path1`` is gone and ``path2`` is there: true for this package's
        renames, whose sources are temporary names no one else uses."""
        destination = self._strip_protocol(path2)

        def attempt(at: Attempt) -> None:
            if at.retried and not self._exists_at(at, path1):
                if self._exists_at(at, path2):
                    return
                raise FileNotFoundError(f"{self._location(path1)} vanished while it was renamed")
            self._request(at, "RENAME", "put", path1, destination=destination)
        self._retrying("RENAME", path1, attempt)

    def _exists_at(self, at: Attempt, path: str) -> bool:
        try:
            self._request(at, "GETFILESTATUS", path=path)
        except FileNotFoundError:
            return False
        return True

    def exists(self, path: str, **kwargs: Any) -> bool:  # noqa: ARG002
        try:
            self.info(path)
        except FileNotFoundError:
            return False
        return True

    def isdir(self, path: str) -> bool:
        try:
            return bool(self.info(path)["type"] == "directory")
        except FileNotFoundError:
            return False


def _check(response: requests.Response, prefix: str, not_ready: frozenset[str] = frozenset(), *,
           unknown_not_ready: bool = False) -> None:
    """Return for a success (2xx, a redirect not followed); raise what the answer means.
    ``not_ready``: exception names that mean "not ready" for this request only;
    ``unknown_not_ready``: so does every name that is not a known answer (a DataNode's)."""
    status = response.status_code
    if status < 400:
        return
    try:
        remote = response.json()["RemoteException"]
        name = str(remote.get("exception") or str(remote.get("javaClassName", "")).rsplit(".", 1)[-1])
        message = str(remote.get("message", ""))
    except (ValueError, KeyError, TypeError, AttributeError):
        name = message = ""
    reason = f"{prefix}answered HTTP {status} {name}: {message}" if name else f"{prefix}answered HTTP {status}"
    if name in _NEXT_NAMENODE:
        raise Transient(reason, failover=True)
    if name in _NOT_READY or name in not_ready:
        raise Transient(reason, failover=False)
    if name in _DENIED or (not name and status in (401, 403)):
        raise PermissionError(f"{name or f'HTTP {status}'}: {message or response.reason}")
    if name == "FileNotFoundException":
        raise FileNotFoundError(message)
    if name == "FileAlreadyExistsException":
        raise FileExistsError(message)
    if name in ("IllegalArgumentException", "UnsupportedOperationException"):
        raise ValueError(message)
    if status >= 500:
        raise Transient(reason, failover=True)
    if name and unknown_not_ready:
        raise Transient(reason, failover=False)
    if not name:
        raise Unusable(f"{reason}, not a WebHDFS answer: is it the NameNode's HTTP address?")
    raise _Refused(reason)


class _Refused(OSError):
    """A WebHDFS exception that no retry heals (quota, a path that is not a directory, ...):
    :meth:`WebHdfs._send` raises it as a :class:`FileSystemError` naming the location."""


def _unresolvable(exc: requests.exceptions.ConnectionError) -> bool:
    """The host name does not resolve (urllib3's NameResolutionError inside requests' error)."""
    reason = getattr(exc.args[0], "reason", None) if exc.args else None
    return type(reason).__name__ == "NameResolutionError"


_REASONS: tuple[tuple[type[BaseException], str], ...] = (
    (ConnectionRefusedError, "connection refused"), (ConnectionResetError, "connection reset"),
    (TimeoutError, "timed out"), (requests.exceptions.Timeout, "timed out"))


def _network_reason(exc: BaseException) -> str:
    """A short reason for people, from the error's types (requests wraps urllib3's, which
    wraps the socket's): 'connection refused', 'timed out', else type and text."""
    seen: list[BaseException] = []
    pending: list[BaseException] = [exc]
    while pending and len(seen) < 20:
        e = pending.pop()
        seen.append(e)
        for kind, reason in _REASONS:
            if isinstance(e, kind):
                return reason
        pending += [x for x in (e.__cause__, e.__context__, getattr(e, "reason", None), *e.args)
                    if isinstance(x, BaseException) and x not in seen]
    return f"{type(exc).__name__}: {str(exc)[:300]}"
