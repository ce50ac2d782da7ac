"""Options of the ``barrier-kafka`` source: declared once, parsed once, frozen.

Names and meanings follow Spark's built-in Kafka source where they apply, so a
query moves from ``format("kafka")`` to ``format("barrier-kafka")`` by changing
the format name (and adding ``kafka.group.id``). Every value is validated when
the DataSource is constructed, i.e. at ``readStream...load()``, with a message
naming the option and the fix. Secrets never reach a message (see ``redact``).
"""

from __future__ import annotations

import enum
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..._exceptions import ConfigError
from ...state._json import Json, parse_json
from .._options import (
    OptionSpec,
    OptionValues,
    enum_choices,
    enum_parser,
    options_table,
    parse_bool,
    parse_duration_ms,
    parse_non_negative_int,
    parse_nonempty,
    parse_options,
    parse_positive_int,
    parse_string,
    redact,
)
from .client._client_config import KAFKA_PYTHON_DEFAULTS, ConsumerClient, kafka_python_configs
from .client._positions import PartitionStart, StartKind, TopicPartition, start_from_spark_json
from .client._security import Security, parse_security

__all__ = [
    "SPECS",
    "GroupFallback",
    "KafkaSourceOptions",
    "StartingOffsetsByTimestampStrategy",
    "kafka_options_table",
    "parse_declared_options",
]

SOURCE_NAME = "barrier-kafka"


class GroupFallback(str, enum.Enum):
    """``startingOffsets.groupFallback``: start of partitions the group has no offset for."""

    EARLIEST = "earliest"
    LATEST = "latest"
    ERROR = "error"


class StartingOffsetsByTimestampStrategy(str, enum.Enum):
    """``startingOffsetsByTimestampStrategy``: when no record is at/after the timestamp."""

    ERROR = "error"
    LATEST = "latest"


SPECS: tuple[OptionSpec, ...] = (
    OptionSpec("kafka.bootstrap.servers", parse_nonempty, None,
               "Kafka brokers, `host:port[,host:port]`.", required=True),
    OptionSpec("kafka.group.id", parse_nonempty, None,
               "Consumer group that receives the offsets of every completed micro-batch "
               "(never joined: the source reads with assign + seek). Required unless "
               "`commitOffsets=false`."),
    OptionSpec("subscribe", parse_string, None, "Comma-separated topics. Exactly one of "
               "`subscribe`, `subscribePattern`, `assign`."),
    OptionSpec("subscribePattern", parse_string, None, "Java-style regex of topics to read; new "
               "matching topics are picked up from earliest."),
    OptionSpec("assign", parse_string, None, "JSON `{\"topic\": [0, 1]}` of exact partitions."),
    OptionSpec("startingOffsets", parse_string, "latest",
               "Where a new query starts: `earliest`, `latest`, `group` (the group's "
               "committed offsets) or JSON `{\"topic\": {\"0\": 42}}` (-2 earliest, "
               "-1 latest). Ignored when restarting from a checkpoint."),
    OptionSpec("startingOffsets.groupFallback", enum_parser(GroupFallback), GroupFallback.EARLIEST,
               "With `startingOffsets=group`: start of partitions the group has no "
               "offset for.", choices=enum_choices(GroupFallback)),
    OptionSpec("startingTimestamp", parse_non_negative_int, None,
               "Epoch ms; every partition starts at the first record at or after it.",
               type_name="long"),
    OptionSpec("startingOffsetsByTimestamp", parse_string, None,
               "JSON `{\"topic\": {\"0\": <epoch ms>}}` per partition."),
    OptionSpec("startingOffsetsByTimestampStrategy", enum_parser(StartingOffsetsByTimestampStrategy),
               StartingOffsetsByTimestampStrategy.ERROR,
               "When no record is at/after the timestamp: fail, or start at latest.",
               choices=enum_choices(StartingOffsetsByTimestampStrategy)),
    OptionSpec("maxOffsetsPerTrigger", parse_positive_int, None,
               "Cap on records per micro-batch, split over partitions by lag.", type_name="long"),
    OptionSpec("minOffsetsPerTrigger", parse_positive_int, None,
               "Wait for at least this many new records (or `maxTriggerDelay`) before "
               "planning a batch.", type_name="long"),
    OptionSpec("maxTriggerDelay", parse_duration_ms, 15 * 60 * 1000,
               "Longest wait for `minOffsetsPerTrigger` (e.g. `15m`).", type_name="duration"),
    OptionSpec("failOnDataLoss", parse_bool, True,
               "Fail the query when planned offsets are gone (retention, deleted topic); "
               "`false` skips them with a warning.", type_name="bool"),
    OptionSpec("includeHeaders", parse_bool, False, "Add the `headers` column.",
               type_name="bool"),
    OptionSpec("barrierMarkers", parse_bool, False,
               "Add the `_barrier_*` columns and end every partition's range with a barrier marker row "
               "(for code that aligns on barriers). Off: exactly Spark's Kafka rows and columns; "
               "checkpointed sinks read the offsets from Spark's offset log instead.",
               type_name="bool"),
    OptionSpec("minPartitions", parse_positive_int, None,
               "Minimum Spark partitions per batch; large offset ranges are split.",
               type_name="int"),
    OptionSpec("kafkaConsumer.pollTimeoutMs", parse_positive_int, 120_000,
               "Executor: give up (SourceError) when a planned range makes no progress "
               "for this many milliseconds.", type_name="int"),
    OptionSpec("kafkaConsumer.cacheTimeoutMs", parse_non_negative_int, 300_000,
               "Executor (`native` client): how long a consumer stays open in its Python "
               "worker after a task, for the next task of the same partition: no new "
               "client, bootstrap or connections per micro-batch (Spark's "
               "`spark.kafka.consumer.cache.timeout`); an idle one fetches nothing. "
               "0 closes it when the task ends.", type_name="int"),
    OptionSpec("kafkaConsumer.client", enum_parser(ConsumerClient), ConsumerClient.AUTO,
               "Executor: the client that reads records. `native`: librdkafka through "
               "sparkbarrier's compiled module, straight into Arrow buffers (fastest); "
               "`confluent`: confluent-kafka (librdkafka, one Python object per record); "
               "`auto`: `native` where the module was built, else `confluent`, and "
               "`kafka-python` for GSSAPI (the bundled librdkafka has no Kerberos); "
               "`kafka-python`: pure Python, honours every kafka-python setting (slowest).",
               choices=enum_choices(ConsumerClient)),
    OptionSpec("fetchOffset.numRetries", parse_non_negative_int, 3,
               "Driver: retries of a partition or offset lookup that failed on a connection "
               "or retriable broker error (a broker restarting) before the query fails.",
               type_name="int"),
    OptionSpec("fetchOffset.retryIntervalMs", parse_positive_int, 1000,
               "Driver: milliseconds between those retries.", type_name="int"),
    OptionSpec("failover.timeoutMs", parse_positive_int, 120_000,
               "Driver and executors: how long errors that heal on their own (a leader "
               "change, the group coordinator moving, one broker down in a rolling restart) "
               "are retried, with backoff, before the query fails naming this option. "
               "Authentication, authorisation and out-of-range errors are never retried "
               "(docs/kafka-source.md, failover).", type_name="int"),
    OptionSpec("commitOffsets", parse_bool, True,
               "Commit completed batches' offsets to `kafka.group.id`.", type_name="bool"),
    OptionSpec("arrowBatchSize", parse_positive_int, 10_000,
               "Records per Arrow batch handed to Spark (bounds executor memory).",
               type_name="int"),
)

# Spark's Kafka source rejects these; so do we, for the same reasons.
_REJECTED: Mapping[str, str] = {
    "kafka.auto.offset.reset": "use startingOffsets instead; offsets are managed by the source",
    "kafka.enable.auto.commit": "offsets are committed by the source when a batch completes",
    "kafka.key.deserializer": "keys are always returned as binary; cast or decode in the query",
    "kafka.value.deserializer": "values are always returned as binary; cast or decode in the query",
    "kafka.interceptor.classes": "Java interceptors cannot run in the Python client",
    "endingoffsets": "endingOffsets applies to batch queries only",
    "endingoffsetsbytimestamp": "endingOffsetsByTimestamp applies to batch queries only",
    "kafka.group.instance.id": "the source never joins the group",
}

@dataclass(frozen=True)
class KafkaSourceOptions:
    """Every option of one query, validated. Picklable; holds secrets (never log it)."""

    bootstrap_servers: str
    group_id: str | None
    topics: tuple[str, ...] = ()
    pattern: str | None = None
    assign: tuple[TopicPartition, ...] = ()
    start_kind: StartKind = StartKind.LATEST
    specific_starts: Mapping[TopicPartition, PartitionStart] = field(default_factory=dict)
    start_timestamps: Mapping[TopicPartition, int] = field(default_factory=dict)
    start_timestamp: int | None = None
    timestamp_strategy: StartingOffsetsByTimestampStrategy = StartingOffsetsByTimestampStrategy.ERROR
    group_fallback: GroupFallback = GroupFallback.EARLIEST
    max_offsets_per_trigger: int | None = None
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = 15 * 60 * 1000
    fail_on_data_loss: bool = True
    include_headers: bool = False
    barrier_markers: bool = False
    min_partitions: int | None = None
    poll_timeout_ms: int = 120_000
    cache_timeout_ms: int = 300_000
    commit_offsets: bool = True
    fetch_offset_retries: int = 3
    fetch_offset_retry_interval_ms: int = 1000
    failover_timeout_ms: int = 120_000
    arrow_batch_size: int = 10_000
    consumer_client: ConsumerClient = ConsumerClient.AUTO
    # Hold passwords: kept out of repr() so tracebacks and logs of the options stay clean.
    client_configs: Mapping[str, Any] = field(default_factory=dict, repr=False)
    librdkafka_configs: Mapping[str, Any] = field(default_factory=dict, repr=False)
    security: Security = field(default_factory=Security)
    safe_options: Mapping[str, str] = field(default_factory=dict)  # redacted, for logs

    def consumer_configs(self) -> dict[str, Any]:
        """kwargs for a group-less KafkaConsumer (a fresh copy each call); TLS stores are
        converted for this process on first use (see ``_keystores``)."""
        return {"bootstrap_servers": self.bootstrap_servers.split(","), **KAFKA_PYTHON_DEFAULTS,
                **self.client_configs, **self.security.kafka_python()}

    def librdkafka_settings(self) -> dict[str, Any]:
        """librdkafka settings for an executor's consumer, either librdkafka path (a fresh copy)."""
        return {"bootstrap.servers": self.bootstrap_servers, **self.librdkafka_configs,
                **self.security.librdkafka()}

    def admin_configs(self) -> dict[str, Any]:
        """kwargs for KafkaAdminClient: the connection settings it understands."""
        from kafka import KafkaAdminClient

        allowed = KafkaAdminClient.DEFAULT_CONFIG
        return {k: v for k, v in self.consumer_configs().items() if k in allowed}


def _json(key: str, raw: str) -> Json:
    try:
        return parse_json(raw)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"option {key!r} must be JSON ({exc.msg} at char {exc.pos})",
                          option=key) from None


def _per_partition(key: str, raw: str) -> dict[TopicPartition, Json]:
    data = _json(key, raw)
    topics = {t: parts for t, parts in data.items() if isinstance(parts, dict)} if isinstance(data, dict) else {}
    if not isinstance(data, dict) or len(topics) != len(data):
        raise ConfigError(f"option {key!r} must look like {{\"topic\": {{\"0\": 42}}}}",
                          option=key)
    out: dict[TopicPartition, Json] = {}
    for topic, parts in topics.items():
        for part, value in parts.items():
            if not str(part).isdigit():
                raise ConfigError(f"option {key!r}: partition {part!r} of {topic!r} is not a "
                                  f"number", option=key)
            out[TopicPartition(topic, int(part))] = value
    return out


def _parse_assign(raw: str) -> tuple[TopicPartition, ...]:
    data = _json("assign", raw)
    if not isinstance(data, dict) or not all(
        isinstance(v, list) and all(isinstance(p, int) and p >= 0 for p in v)
        for v in data.values()
    ):
        raise ConfigError('option \'assign\' must look like {"topic": [0, 1]}', option="assign")
    # The filters repeat the check above for the type checker; they drop nothing.
    return tuple(sorted(TopicPartition(t, p) for t, parts in data.items() if isinstance(parts, list)
                        for p in parts if isinstance(p, int)))


def parse_declared_options(raw: Mapping[str, str]) -> KafkaSourceOptions:
    """Validate Spark's option map; raise :class:`ConfigError` naming option and fix.

    The executors' client stays as requested (``kafkaConsumer.client``) and no librdkafka
    settings are derived yet: :func:`.reader._reader_choice.parse_source_options` decides the
    client at query start, which needs the readers -- and the readers need these options.
    """
    for key in raw:
        reason = _REJECTED.get(key.lower())
        if reason is not None:
            raise ConfigError(f"option {key!r} is not supported: {reason}", option=key)
    values, passthrough = parse_options(raw, SPECS, prefixes=("kafka.",), source_name=SOURCE_NAME)
    passthrough.pop("kafka.bootstrap.servers", None)
    passthrough.pop("kafka.group.id", None)

    strategies = [k for k in ("subscribe", "subscribePattern", "assign") if values[k] is not None]
    if len(strategies) != 1:
        raise ConfigError(
            "set exactly one of 'subscribe', 'subscribePattern', 'assign'"
            + (f" (got {', '.join(strategies)})" if strategies else ""),
            option=strategies[0] if strategies else "subscribe",
        )
    topics: tuple[str, ...] = ()
    assign: tuple[TopicPartition, ...] | None = None
    subscribe, pattern, assign_json = (values.optional_text(k) for k in ("subscribe", "subscribePattern", "assign"))
    if subscribe is not None:
        topics = tuple(t.strip() for t in subscribe.split(",") if t.strip())
        if not topics:
            raise ConfigError("option 'subscribe' names no topic", option="subscribe")
    elif pattern is not None:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ConfigError(f"option 'subscribePattern' is not a valid regex: {exc}",
                              option="subscribePattern") from None
    elif assign_json is not None:
        assign = _parse_assign(assign_json)

    starts = [k for k in ("startingTimestamp", "startingOffsetsByTimestamp")
              if values[k] is not None]
    explicit_offsets = any(k.lower() == "startingoffsets" for k in raw)
    if len(starts) + explicit_offsets > 1:
        raise ConfigError("set only one of 'startingOffsets', 'startingTimestamp', "
                          "'startingOffsetsByTimestamp'", option=starts[0])
    kind, specific, by_ts = _start_kind(values, starts)

    commit = values.flag("commitOffsets")
    group = values.optional_text("kafka.group.id")
    if group is None and (commit or kind is StartKind.GROUP):
        raise ConfigError("option 'kafka.group.id' is required: it names the group that "
                          "receives completed offsets (or set commitOffsets=false)",
                          option="kafka.group.id")
    min_rows = values.optional_integer("minOffsetsPerTrigger")
    max_rows = values.optional_integer("maxOffsetsPerTrigger")
    if min_rows is not None and max_rows is not None and min_rows > max_rows:
        raise ConfigError("'minOffsetsPerTrigger' must not exceed 'maxOffsetsPerTrigger'",
                          option="minOffsetsPerTrigger")
    security = parse_security(passthrough)
    configs = kafka_python_configs(passthrough)
    return KafkaSourceOptions(
        bootstrap_servers=values.text("kafka.bootstrap.servers"),
        group_id=group,
        topics=topics,
        pattern=pattern,
        assign=assign or (),
        start_kind=kind,
        specific_starts=specific,
        start_timestamps=by_ts,
        start_timestamp=values.optional_integer("startingTimestamp"),
        timestamp_strategy=values.choice("startingOffsetsByTimestampStrategy", StartingOffsetsByTimestampStrategy),
        group_fallback=values.choice("startingOffsets.groupFallback", GroupFallback),
        max_offsets_per_trigger=max_rows,
        min_offsets_per_trigger=min_rows,
        max_trigger_delay_ms=values.integer("maxTriggerDelay"),
        fail_on_data_loss=values.flag("failOnDataLoss"),
        include_headers=values.flag("includeHeaders"),
        barrier_markers=values.flag("barrierMarkers"),
        min_partitions=values.optional_integer("minPartitions"),
        poll_timeout_ms=values.integer("kafkaConsumer.pollTimeoutMs"),
        cache_timeout_ms=values.integer("kafkaConsumer.cacheTimeoutMs"),
        commit_offsets=commit,
        fetch_offset_retries=values.integer("fetchOffset.numRetries"),
        fetch_offset_retry_interval_ms=values.integer("fetchOffset.retryIntervalMs"),
        failover_timeout_ms=values.integer("failover.timeoutMs"),
        arrow_batch_size=values.integer("arrowBatchSize"),
        consumer_client=values.choice("kafkaConsumer.client", ConsumerClient),
        client_configs=configs,
        security=security,
        safe_options={k: str(v) for k, v in redact(dict(raw)).items()},
    )


def _start_kind(
    values: OptionValues, starts: list[str]
) -> tuple[StartKind, dict[TopicPartition, PartitionStart], dict[TopicPartition, int]]:
    if "startingTimestamp" in starts:
        return StartKind.TIMESTAMP, {}, {}
    if "startingOffsetsByTimestamp" in starts:
        key = "startingOffsetsByTimestamp"
        by_ts: dict[TopicPartition, int] = {}
        for tp, ts in _per_partition(key, values.text(key)).items():
            if not isinstance(ts, int) or isinstance(ts, bool) or ts < 0:
                raise ConfigError(f"option {key!r}: timestamp for {tp} must be epoch ms >= 0, "
                                  f"got {ts!r}", option=key)
            by_ts[tp] = ts
        return StartKind.BY_TIMESTAMP, {}, by_ts
    raw = values.text("startingOffsets").strip()
    simple = {"earliest": StartKind.EARLIEST, "latest": StartKind.LATEST, "group": StartKind.GROUP}
    if raw.lower() in simple:
        return simple[raw.lower()], {}, {}
    if not raw.startswith("{"):
        raise ConfigError("option 'startingOffsets' must be earliest, latest, group or JSON "
                          f"{{\"topic\": {{\"0\": 42}}}}, got {raw!r}", option="startingOffsets")
    specific = {
        tp: start_from_spark_json("startingOffsets", tp.topic, str(tp.partition), v)
        for tp, v in _per_partition("startingOffsets", raw).items()
    }
    return StartKind.SPECIFIC, specific, {}


def kafka_options_table() -> str:
    """The docs/options.md table, generated from :data:`SPECS`."""
    return options_table(SPECS)

