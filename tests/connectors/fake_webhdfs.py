"""A tiny WebHDFS NameNode (and DataNode) in a thread, for unit tests of the retry loop:
an in-memory file system behind the WebHDFS JSON answers, and a script of failures to
answer first (standby, safe mode, startup, 503, permission, a dropped connection).

Not a model of HDFS: just the requests ``connectors/storage/_webhdfs.py`` sends (GETFILESTATUS,
LISTSTATUS, MKDIRS, CREATE and OPEN with their DataNode redirect, RENAME, DELETE).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

__all__ = ["DROP", "FakeNameNode", "fake_namenode", "remote"]

DROP = "drop"  # close the connection without an answer (after doing the operation)


def remote(status: int, exception: str, message: str) -> tuple[int, dict[str, object]]:
    return status, {"RemoteException": {"exception": exception, "javaClassName": f"org.apache.hadoop.{exception}",
                                        "message": message}}


STANDBY = remote(403, "StandbyException", "Operation category READ is not supported in state standby")
STARTUP = remote(403, "RetriableException", "Namenode is in startup mode")
SAFE_MODE = remote(403, "SafeModeException", "Cannot create directory. Name node is in safe mode.")
DENIED = remote(403, "AccessControlException", "Permission denied: user=alice, access=WRITE")
UNAVAILABLE = (503, "<html>Service Unavailable</html>")


@dataclass
class FakeNameNode:
    """What the server holds and saw. ``script``: answers to give, in order, before serving
    normally (a tuple (status, body), or DROP); ``requests``: (method, op, path) seen."""

    files: dict[str, bytes] = field(default_factory=dict)
    dirs: set[str] = field(default_factory=lambda: {"/"})
    script: list[object] = field(default_factory=list)
    requests: list[tuple[str, str, str]] = field(default_factory=list)
    drop_after: set[str] = field(default_factory=set)  # ops done, then the connection dropped (once each)
    authorizations: list[tuple[str, str | None]] = field(default_factory=list)  # (op, Authorization header)
    url: str = ""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def ops(self) -> list[str]:
        return [op for _, op, _ in self.requests]


def _handler(nn: FakeNameNode) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def _answer(self, status: int, body: object = None, headers: dict[str, str] | None = None) -> None:
            data = (json.dumps(body) if not isinstance(body, str) else body).encode() if body is not None else b""
            self.send_response(status)
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Content-Type", "application/json" if not isinstance(body, str) else "text/html")
            self.end_headers()
            self.wfile.write(data)

        def _serve(self, method: str) -> None:
            parts = urlsplit(self.path)
            query = {k: v[0] for k, v in parse_qs(parts.query).items()}
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            with nn.lock:
                op_seen = ("DATA-" if parts.path.startswith("/data") else "") + query.get("op", "")
                nn.authorizations.append((op_seen, self.headers.get("Authorization")))
            if parts.path.startswith("/data"):  # the "DataNode"
                path = parts.path[len("/data"):]
                with nn.lock:
                    nn.requests.append((method, "DATA-" + query.get("op", ""), path))
                    if method == "PUT":
                        nn.files[path] = body
                        return self._answer(201)
                    return self._answer(200, None) if path not in nn.files else self._raw(nn.files[path])
            path = parts.path[len("/webhdfs/v1"):] or "/"
            op = query.get("op", "")
            with nn.lock:
                nn.requests.append((method, op, path))
                step = nn.script.pop(0) if nn.script else None
            if step == DROP:
                self.close_connection = True
                return
            if step is not None:
                status, answer = step  # type: ignore[misc]
                return self._answer(status, answer)
            with nn.lock:
                result = self._operate(op, path, query)
                drop = op in nn.drop_after
                nn.drop_after.discard(op)
            if drop:
                self.close_connection = True
                return
            self._answer(*result)

        def _raw(self, data: bytes) -> None:
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _operate(self, op: str, path: str, query: dict[str, str]) -> tuple[object, ...]:
            missing = remote(404, "FileNotFoundException", f"File does not exist: {path}")
            if op == "GETFILESTATUS":
                if path in nn.files:
                    return 200, {"FileStatus": {"type": "FILE", "length": len(nn.files[path]), "pathSuffix": ""}}
                return (200, {"FileStatus": {"type": "DIRECTORY", "length": 0, "pathSuffix": ""}}) \
                    if path in nn.dirs else missing
            if op == "LISTSTATUS":
                if path not in nn.dirs:
                    return missing
                prefix = path.rstrip("/") + "/"
                names = {p[len(prefix):].split("/")[0] for p in (*nn.files, *nn.dirs) if p.startswith(prefix)}
                return 200, {"FileStatuses": {"FileStatus": [
                    {"pathSuffix": n, "type": "FILE", "length": 0} for n in sorted(names) if n]}}
            if op == "MKDIRS":
                parts = path.strip("/").split("/")
                nn.dirs.update("/" + "/".join(parts[:i]) for i in range(1, len(parts) + 1))
                return 200, {"boolean": True}
            if op in ("CREATE", "OPEN"):
                if op == "OPEN" and path not in nn.files:
                    return missing
                return 307, None, {"Location": f"{nn.url}/data{path}?op={op}"}
            if op == "RENAME":
                target = query["destination"]
                if path not in nn.files or target in nn.files:
                    return 200, {"boolean": False}
                nn.files[target] = nn.files.pop(path)
                return 200, {"boolean": True}
            if op == "DELETE":
                return 200, {"boolean": nn.files.pop(path, None) is not None}
            return remote(400, "IllegalArgumentException", f"unknown op {op}")

        def do_GET(self) -> None:
            self._serve("GET")

        def do_PUT(self) -> None:
            self._serve("PUT")

        def do_DELETE(self) -> None:
            self._serve("DELETE")

    return Handler


@contextmanager
def fake_namenode(**kwargs: object) -> Iterator[FakeNameNode]:
    """A FakeNameNode serving on a free 127.0.0.1 port while the block runs."""
    nn = FakeNameNode(**kwargs)  # type: ignore[arg-type]
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(nn))
    nn.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield nn
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
