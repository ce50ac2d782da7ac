"""Exactly-once or at-least-once: the one name for what a pipeline promises (Flink's ``DeliveryGuarantee``).

One enum serves every layer, so a guarantee has one name everywhere: the
:class:`~sparkbarrier.barrier.InputProcessor` aligns barriers or only tracks them, the
checkpointed-sink adapter runs write tasks that way, and ``barrier-hbase`` fences its
commits or not. Users set it with the sink option ``delivery.guarantee``; the values
are the option's spelling.
"""

from __future__ import annotations

import enum

__all__ = ["DeliveryGuarantee"]


class DeliveryGuarantee(str, enum.Enum):
    EXACTLY_ONCE = "exactly-once"
    """Align barriers (a channel that delivered barrier *n* waits until all did) and
    commit each batch once: every record's effect is applied exactly once."""
    AT_LEAST_ONCE = "at-least-once"
    """Track barriers without blocking and skip the fencing: a replay may apply records again."""
