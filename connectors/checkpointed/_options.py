"""The options every checkpointed sink shares, declared once (the adapter's and ``barrier-hbase``'s).

``delivery.guarantee`` is read by the adapter (align or track barriers in each write
task) and by sinks that fence their commits (``barrier-hbase``); both parse this one
spec, so the key, its values and its description cannot drift apart. An option that
was renamed is an error naming its new key, never silently ignored.
"""

from __future__ import annotations

from ...barrier import DeliveryGuarantee
from .._options import OptionSpec, enum_choices, enum_parser

__all__ = ["DELIVERY_GUARANTEE", "RENAMED_SINK_OPTIONS"]

DELIVERY_GUARANTEE = OptionSpec(
    "delivery.guarantee", enum_parser(DeliveryGuarantee), DeliveryGuarantee.EXACTLY_ONCE,
    "`exactly-once`: a write task aligns the barriers of its channels before a snapshot and each batch "
    "is committed once (barrier-hbase fences concurrent writers; a replay after a restart writes above "
    "the attempt it abandons); "
    "`at-least-once`: barriers are tracked without blocking and a replay may write a batch again "
    "(barrier-hbase: its commit is not conditional on the attempt, and a replay may add versions; a "
    "sink.id may switch between the two modes either way)",
    choices=enum_choices(DeliveryGuarantee),
)

# Old key -> the key that replaced it (same values).
RENAMED_SINK_OPTIONS = {"checkpoint.mode": "delivery.guarantee"}
