"""Types of the compiled fetcher (``_rdkafka_arrow.c``): the C code's contract for mypy.

Kept beside the C source's method table; a change to a ``Py_BuildValue`` there changes
this file too. Buffers are raw little-endian Arrow buffers (``_native_reader.take``).
"""

# (validity bitmap or None, int32 offsets, data) of one variable-width column
_VarCol = tuple[bytes | None, bytes, bytes]

ERR_ALL_BROKERS_DOWN: int
ERR_AUTHENTICATION: int
ERR_AUTO_OFFSET_RESET: int
ERR_CLUSTER_AUTHORIZATION_FAILED: int
ERR_FATAL: int
ERR_OFFSET_OUT_OF_RANGE: int
ERR_PARTITION_EOF: int
ERR_SASL_AUTHENTICATION_FAILED: int
ERR_SSL: int
ERR_TIMED_OUT: int
ERR_TOPIC_AUTHORIZATION_FAILED: int
ERR_TRANSPORT: int
ERR_UNKNOWN_PARTITION: int
ERR_UNKNOWN_TOPIC: int
ERR_UNKNOWN_TOPIC_OR_PART: int
librdkafka_version: str
librdkafka_version_int: int
min_librdkafka_version_int: int

def _fail_allocation(n: int, /) -> None: ...

class Fetcher:
    def __init__(self, config: list[tuple[str, str]], topic: str, partition: int, headers: bool,
                 max_bytes: int = ...) -> None: ...
    @property
    def rows(self) -> int: ...
    def watermarks(self, timeout_ms: int, /) -> tuple[int, int, int, str]: ...
    def topic_error(self, timeout_ms: int, /) -> tuple[int, str]: ...
    def leader(self) -> tuple[int, str]: ...
    def serve(self, timeout_ms: int, /) -> None: ...
    def assign(self, offset: int, /) -> None: ...
    def stop(self) -> None: ...
    def position(self) -> int: ...
    # (added, next_offset, hit_end, full, [(code, offset, text)]); ``full`` is a C int, 0 or 1
    def fetch(self, want: int, end: int, timeout_ms: int, /
              ) -> tuple[int, int, bool, int, list[tuple[int, int, str]]]: ...
    # (rows, key, value, offsets, timestamps, timestamp types, header offsets or None,
    #  header keys or None, header values or None, header count)
    def take(self) -> tuple[int, _VarCol, _VarCol, bytes, bytes, bytes, bytes | None,
                            _VarCol | None, _VarCol | None, int]: ...
    # [(kind "error" or "log", error code or syslog level, text)]
    def client_events(self) -> list[tuple[str, int, str]]: ...
    def close(self) -> None: ...
