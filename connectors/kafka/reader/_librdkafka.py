"""The range loop of the two librdkafka read paths (compiled ``native``, ``confluent``).

Both paths drive one group-less librdkafka consumer of one partition; they differ only
in how records become Arrow columns (see :class:`Fetcher`). Everything a user can
observe -- where a range starts and ends, data loss, errors, secrets -- is decided
here once, so the two paths cannot drift. The contract is the one in
:mod:`._partition_reader`; how it is kept:

* start: the earliest retained offset is looked up and the data-loss policy applied
  before ``assign`` puts the consumer at the start;
* end: a fetch asks for at most ``end - position`` records, so a range without gaps
  ends without waiting; with gaps (compaction, ``read_committed`` control records and
  aborted records) the range ends when librdkafka's position reaches ``end``, a record
  at or past ``end`` arrives, or the end-of-partition event (``enable.partition.eof``)
  reports the log end at or past ``end``;
* offsets that vanish while reading arrive as an offset-reset error
  (``auto.offset.reset=error``) and go through the same data-loss policy;
* memory: at most ``arrowBatchSize`` records are buffered before a batch is handed to
  Spark; librdkafka's prefetch is capped by ``queued.max.messages.kbytes``
  (:data:`DEFAULTS`);
* a leader that died: a read that gets no record for :data:`_STALLED_S` asks the
  cluster for the partition's leader (a metadata request, which moves librdkafka's
  fetcher to the leader it names), once per :data:`_STALLED_S` while it gets none, and so
  does every lookup that found no answer. librdkafka alone (2.16, its topic scan)
  asks again once a second only while the leader's broker is down *and* a connection to
  another broker is up ("no usable brokers" skips it), and its lookups keep asking the
  cached leader (issue 44).

Secrets: librdkafka's log lines and every client error go through
:class:`SecretScrubber` before they reach a log or an exception.
"""

from __future__ import annotations

import enum
import logging
import time
from collections.abc import Callable, Iterator
from typing import Protocol

import pyarrow as pa

from ...._exceptions import DataLossError, SourceError
from .._options import KafkaSourceOptions
from ..client._failover import FAILOVER_OPTION, LIBRDKAFKA_RETRIABLE, ProblemLog
from ..client._secrets import SecretScrubber
from ..client._waits import Wait, begin, end, waiting
from ._offset_range import KafkaRangePartition, check_loss, gc_paused, gone, no_progress, until_no_progress

__all__ = ["DEFAULTS", "FORCED", "GONE", "NOT_YET", "UNREACHED", "ClientErrors", "Err", "Fetcher",
           "earliest", "gone_or_unauthorised", "leader_text", "permanent_error", "read_with",
           "settings"]

log = logging.getLogger(__name__)

# Throughput-oriented defaults; a mapped ``kafka.*`` option overrides them.
DEFAULTS = {
    "fetch.max.bytes": 32 * 1024 * 1024,
    "max.partition.fetch.bytes": 8 * 1024 * 1024,
    "fetch.wait.max.ms": 100,
    "socket.receive.buffer.bytes": 4 * 1024 * 1024,
    # Prefetched bytes librdkafka may hold per partition (its default is 64 MiB). Room
    # for several fetches keeps one in flight while Python drains the queue: measured
    # here, 8 MiB fetches into a 32 MiB queue read 2-2.5x faster than 16 into 16. The
    # message-count limit is lifted so the byte limit alone decides.
    "queued.max.messages.kbytes": 32 * 1024,
    "queued.min.messages": 1_000_000,
}
# Settings the reader depends on; users cannot reach them (no kafka-python counterpart).
# No ``group.id``: executors never join or commit, so they need no group rights. The
# compiled fetcher is a group-less simple consumer; confluent-kafka insists on a group id
# and adds one (:func:`._confluent_reader.executor_group_id`).
FORCED = {
    "enable.auto.commit": False,
    "enable.auto.offset.store": False,
    "auto.offset.reset": "error",
    "enable.partition.eof": True,
    "allow.auto.create.topics": False,
}
# How long one fetch waits for a full batch; bounds the wait at a range's end.
_WAIT_S = 0.1
# How long one lookup call waits before client errors are looked at.
_LOOKUP_SLICE_S = 0.5
# How long the metadata request that tells a deleted topic from a hidden one may take.
_METADATA_S = 10.0
# A read that got no record for this long asks for the partition's leader afresh, and
# again at this interval while it gets none: the Java consumer's pace (it refreshes
# metadata on every failed connection to a leader, reconnecting at most a second apart).
_STALLED_S = 1.0
# How long that metadata request may take before the read goes on fetching.
_REFRESH_S = 0.5


def settings(options: KafkaSourceOptions) -> dict[str, object]:
    """The consumer's librdkafka settings: defaults < mapped ``kafka.*`` < forced."""
    return {**DEFAULTS, **options.librdkafka_settings(), **FORCED}


class Err(enum.IntEnum):
    """librdkafka's error codes the reader acts on.

    The numbers are librdkafka's ABI (``rd_kafka_resp_err_t``), the same in
    confluent-kafka's ``KafkaError`` and the compiled module's constants (a test
    checks both).
    """

    PARTITION_EOF = -191
    AUTO_OFFSET_RESET = -140
    OFFSET_OUT_OF_RANGE = 1
    UNKNOWN_PARTITION = -190
    UNKNOWN_TOPIC = -188
    UNKNOWN_TOPIC_OR_PART = 3
    FATAL = -150
    AUTHENTICATION = -169
    SSL = -181
    SASL_AUTHENTICATION_FAILED = 58
    TOPIC_AUTHORIZATION_FAILED = 29
    CLUSTER_AUTHORIZATION_FAILED = 31
    TIMED_OUT = -185
    ALL_BROKERS_DOWN = -187
    TRANSPORT = -195


GONE = frozenset({Err.UNKNOWN_PARTITION, Err.UNKNOWN_TOPIC, Err.UNKNOWN_TOPIC_OR_PART})
_OUT_OF_RANGE = frozenset({Err.AUTO_OFFSET_RESET, Err.OFFSET_OUT_OF_RANGE})
# A lookup that may still succeed: the broker is not reachable (yet), or the cluster is
# failing over (a leader election, a broker restarting): the Java client's retriable set.
NOT_YET = LIBRDKAFKA_RETRIABLE
# Of those, the ones that only say "no answer yet": the client error (``error_cb``) that
# came with them says why, and is kept rather than overwritten by a bare "timed out".
UNREACHED = frozenset({Err.TIMED_OUT, Err.ALL_BROKERS_DOWN, Err.TRANSPORT})
# Errors librdkafka would retry forever that no retry can fix: fail the task now, with
# the options that fix them. A TLS disconnect mid-handshake is reported as TRANSPORT by
# librdkafka, so SSL here means a real handshake failure (certificate, protocol).
_FIX: dict[int, str] = {
    Err.AUTHENTICATION: "check the user and password in kafka.sasl.jaas.config, "
                        "kafka.sasl.mechanism and kafka.security.protocol",
    Err.SASL_AUTHENTICATION_FAILED: "check the user and password in kafka.sasl.jaas.config "
                                    "and kafka.sasl.mechanism",
    Err.SSL: "check kafka.ssl.truststore.* (the CA that signed the broker's certificate), "
             "kafka.ssl.keystore.* (the client certificate, where the broker requires one) "
             "and kafka.ssl.endpoint.identification.algorithm (host name verification)",
    Err.TOPIC_AUTHORIZATION_FAILED: "the user (kafka.sasl.jaas.config or the client "
                                    "certificate) needs Read and Describe on the topic",
    Err.CLUSTER_AUTHORIZATION_FAILED: "the user (kafka.sasl.jaas.config or the client "
                                      "certificate) lacks a cluster permission",
    Err.FATAL: "",
}


def permanent_error(code: int, text: str, fatal: bool = False) -> str | None:
    """The task's failure message for a client error no retry can fix, else None.

    ``text`` must already be scrubbed. Authentication, TLS handshake and authorisation
    errors are permanent: librdkafka would retry them until the lookup or the
    no-progress deadline ran out and then report a generic "all brokers down".
    """
    if not fatal and code not in _FIX:
        return None
    fix = _FIX.get(code, "")
    return f"{text}; {fix}" if fix else text


class ClientErrors:
    """Client-level errors (``error_cb``), scrubbed; the last one and any permanent one."""

    def __init__(self, scrub: SecretScrubber) -> None:
        self.scrub = scrub
        self.last = ""
        self.permanent: str | None = None
        self.problems = ProblemLog(log, "barrier-kafka")

    def record(self, code: int, text: str, fatal: bool = False) -> None:
        self.last = self.scrub(text)
        log.debug("barrier-kafka: librdkafka error: %s", self.last)
        if self.permanent is None:
            self.permanent = permanent_error(code, self.last, fatal)

    def raise_permanent(self, part: KafkaRangePartition) -> None:
        """Fail the task at once when a permanent client error arrived."""
        if self.permanent is not None:
            raise SourceError(f"cannot read {part.channel}: {self.permanent}",
                              topic_partition=part.channel)


class Fetcher(Protocol):
    """One group-less librdkafka consumer of one partition, buffering one Arrow batch."""

    errors: ClientErrors

    def earliest(self, timeout_s: float) -> int | None:
        """Earliest retained offset, or None when it may still come (:data:`NOT_YET`).

        Serves librdkafka's client errors into :attr:`errors` while it waits; raises
        ``gone(part)`` or a scrubbed SourceError for any other lookup error.
        """

    def assign(self, offset: int) -> None: ...

    def topic_error(self, timeout_s: float) -> tuple[int, str]:
        """The broker's error for the topic in a fresh metadata request (0: none)."""

    def fetch(self, want: int, end: int, timeout_s: float
              ) -> tuple[int, int, bool, bool, list[tuple[int, int, str]]]:
        """Buffer up to ``want`` more records below ``end``, waiting at most ``timeout_s``.

        Returns ``(added, next_offset, hit_end, full, events)``: records added, the
        offset after the last one (meaningful when ``added``), whether a record at or
        past ``end`` arrived, whether the buffer is full by bytes (take it now), and
        the partition's error events ``(code, offset, text)`` in delivery order.
        """

    @property
    def rows(self) -> int:
        """Records buffered for the next :meth:`take`."""

    def take(self) -> pa.RecordBatch:
        """The buffered records as one batch; empties the buffer."""

    def position(self) -> int: ...

    def close(self) -> None: ...

    def release(self) -> None:
        """The range was read to its end: keep the client for the next range, or close it."""


def read_with(fetcher: Fetcher, options: KafkaSourceOptions,
              part: KafkaRangePartition) -> Iterator[pa.RecordBatch]:
    """Yield the data records of ``part`` (no marker) as Arrow batches.

    Ends with ``fetcher.release()`` when the range was read to its end, else (an error,
    or the caller abandoned the generator) with ``fetcher.close()``: only a client that
    finished cleanly may serve another range.
    """
    errors = fetcher.errors
    # A lookup waits out a failover (leader election, broker restart), not just one
    # request: the driver saw the cluster answer when it planned this range.
    lookup_s = max(options.client_configs.get("request_timeout_ms", 30_000),
                   options.failover_timeout_ms) / 1000
    finished = False
    where = f"read task of {part.channel}@{part.start}..{part.end}"
    leader = fetcher_leader(fetcher)
    idle: Wait | None = None  # the read's current wait for records, if any
    failed: BaseException | None = None  # what ended the read early, for that wait's end line
    try:
        with waiting("ListOffsets (earliest)", part.channel, leader, where):
            low = earliest(fetcher, part, lookup_s)
        pos = check_loss(options, part, part.start, low)
        if pos >= part.end:
            finished = True
            return
        fetcher.assign(pos)
        deadline = time.monotonic() + options.poll_timeout_ms / 1000
        refresh_at = time.monotonic() + _STALLED_S
        done = False
        while not done:
            batch = None
            with gc_paused():
                want = min(options.arrow_batch_size - fetcher.rows, part.end - pos)
                added, next_offset, done, full, events = fetcher.fetch(want, part.end, _WAIT_S)
                errors.raise_permanent(part)
                if added:
                    if idle is not None:
                        end(idle)
                        idle = None
                    pos = next_offset
                    errors.problems.healed(f"read {part.channel}")
                    deadline = time.monotonic() + options.poll_timeout_ms / 1000
                    refresh_at = time.monotonic() + _STALLED_S
                elif not done and idle is None:
                    idle = begin(f"Fetch from offset {pos}", part.channel, leader, where)
                if not added and not done and time.monotonic() >= refresh_at:
                    _refresh_leader(fetcher, part)
                    refresh_at = time.monotonic() + _STALLED_S
                if events:
                    ended, pos = _handle_events(events, fetcher, options, part, pos, lookup_s)
                    done = done or ended
                if fetcher.rows >= options.arrow_batch_size or full:
                    batch = fetcher.take()
                if not done and pos < part.end:
                    position = fetcher.position()
                    if time.monotonic() > deadline and position < part.end:
                        raise no_progress(options, part, max(pos, position), errors.last)
                    done = position >= part.end
                else:
                    done = True
                if done and fetcher.rows:
                    batch = fetcher.take()
            if batch is not None:
                yield batch
        finished = True
    except BaseException as exc:  # the error (or GeneratorExit) that ends the read
        failed = exc
        raise
    finally:
        if idle is not None:
            end(idle, failed)
        with waiting("release the consumer" if finished else "close the consumer",
                     part.channel, leader, where):
            if finished:
                fetcher.release()
            else:
                fetcher.close()


def leader_text(node: int, address: str) -> str:
    """A leader as a wait's log line names it (no request: what the client last heard)."""
    if node < 0:
        return "the partition's leader (not yet looked up)"
    return f"node {node} ({address})" if address else f"node {node}"


def fetcher_leader(fetcher: Fetcher) -> Callable[[], str]:
    """The broker a fetcher reads from as last heard (for a wait's log line)."""
    def leader() -> str:
        known = getattr(fetcher, "leader", None)
        return known() if callable(known) else "the partition's leader"
    return leader


def earliest(fetcher: Fetcher, part: KafkaRangePartition, timeout_s: float) -> int:
    """The earliest offset within ``timeout_s``, failing at once on a permanent error.

    Asked in slices of :data:`_LOOKUP_SLICE_S`, because a client error (a wrong password,
    a certificate the broker rejects) only reaches ``error_cb`` between librdkafka calls;
    one blocking call would wait out the whole timeout first.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        left = deadline - time.monotonic()
        try:
            low = fetcher.earliest(max(min(_LOOKUP_SLICE_S, left), 0.01))
        except DataLossError:  # gone(part): deleted, hidden from this user, or a failover?
            failure = gone_or_unauthorised(fetcher, part)
            if failure is not None:
                raise failure from None
            low = None
            fetcher.errors.last = _STALE
        fetcher.errors.raise_permanent(part)
        what = f"look up the earliest offset of {part.channel}"
        if low is not None:
            fetcher.errors.problems.healed(what)
            return low
        if fetcher.errors.last:
            fetcher.errors.problems.failing(what, fetcher.errors.last,
                                            f"retrying for up to {timeout_s:g} s "
                                            f"({FAILOVER_OPTION})")
        # librdkafka asks the leader it has cached, and a lookup failing does not refresh
        # that cache: after the leader's broker died it kept asking the dead one, with no
        # client error to say so when the consumer had idled in the pool (issue 44). A
        # metadata request for the topic learns the new leader.
        fetcher.topic_error(max(min(_LOOKUP_SLICE_S, deadline - time.monotonic()), 0.01))
        if time.monotonic() >= deadline:
            reason = fetcher.errors.last or "timed out"
            raise SourceError(f"cannot look up the earliest offset of {part.channel} within "
                              f"{timeout_s:g} s ({FAILOVER_OPTION}): {reason}",
                              topic_partition=part.channel)


def _refresh_leader(fetcher: Fetcher, part: KafkaRangePartition) -> None:
    """Ask the cluster for the partition's leader: a read that gets nothing may be
    waiting on a leader whose broker died. Errors in the answer are left to the read's
    own events (a deleted topic arrives there too)."""
    code, text = fetcher.topic_error(_REFRESH_S)
    log.debug("barrier-kafka: no record from %s for %g s; asked for its leader (%s)",
              part.channel, _STALLED_S, fetcher.errors.scrub(text) if code else "answered")


def gone_or_unauthorised(fetcher: Fetcher, part: KafkaRangePartition) -> Exception | None:
    """Data loss for a deleted topic; a permanent error when the user may not see it;
    None when the topic is there after all.

    Kafka answers a topic the user may not Describe as if it did not exist, so
    librdkafka reports a deleted topic and a missing permission alike. A missing
    permission is no data loss: a fresh metadata request tells them apart. So does it
    tell a failover: while a leader is elected librdkafka's cached metadata may lack the
    partition (the Java client retries UNKNOWN_TOPIC_OR_PARTITION); when the fresh
    answer has the topic, the caller retries within its deadline.
    """
    code, text = fetcher.topic_error(_METADATA_S)
    if code == Err.TOPIC_AUTHORIZATION_FAILED:
        return SourceError(f"cannot read {part.channel}: {permanent_error(code, text)}",
                           topic_partition=part.channel)
    if code in GONE:
        return gone(part)
    return None


# What a lookup waits on when librdkafka's metadata lacks a partition the cluster has.
_STALE = "librdkafka's metadata lacks the partition (a leader election?)"


def _handle_events(events: list[tuple[int, int, str]], fetcher: Fetcher,
                   options: KafkaSourceOptions, part: KafkaRangePartition, pos: int,
                   lookup_s: float) -> tuple[bool, int]:
    """Apply the range contract to librdkafka's per-partition events.

    ``pos`` is the next offset after the data already taken (librdkafka delivers a
    partition's messages and events in order, so events follow that data). Returns
    ``(done, pos)``.
    """
    done = False
    for code, offset, text in events:
        if code == Err.PARTITION_EOF:
            done = done or offset >= part.end
        elif code in _OUT_OF_RANGE:
            pos = check_loss(options, part, pos, earliest(fetcher, part, lookup_s))
            if pos >= part.end:
                return True, pos
            fetcher.assign(pos)
        elif code in GONE:
            failure = gone_or_unauthorised(fetcher, part)
            if failure is not None:
                raise failure
            _retrying_read(fetcher, options, part, _STALE)
        elif (reason := permanent_error(code, fetcher.errors.scrub(text))) is not None:
            raise SourceError(f"cannot read {part.channel}: {reason}",
                              topic_partition=part.channel)
        else:  # transient; the no-progress deadline bounds how long it may last
            _retrying_read(fetcher, options, part, fetcher.errors.scrub(text))
    return done, pos


def _retrying_read(fetcher: Fetcher, options: KafkaSourceOptions, part: KafkaRangePartition,
                   error: str) -> None:
    """A read error librdkafka retries itself; the no-progress deadline bounds the wait."""
    fetcher.errors.last = error
    fetcher.errors.problems.failing(f"read {part.channel}", error,
                                    f"librdkafka retries; {until_no_progress(options)}")
