"""The checkpoint protocol: markers, barrier alignment/tracking, input processing.

Pure Python (pyarrow only; no pyspark, kafka or happybase import).

The marker wire format (``MARKER_FIELDS``, ``MARKER_DDL``, ``MARKER_VERSION``) is not
re-exported: it belongs to :mod:`.markers`, and users reach it through
``with_marker_columns`` / ``split_markers`` / ``marker_batch``.
"""

from __future__ import annotations

from ._aligner import CheckpointBarrierAligner
from ._functions import CheckpointedFunction, CheckpointListener, InitializationContext
from ._guarantee import DeliveryGuarantee
from ._handler import AbortReason, BarrierHandler, CheckpointTarget
from ._processor import Downstream, InputProcessor
from ._sink import CheckpointedSink, CompletedCheckpoint, SinkContext, TwoPhaseCommitSink
from ._tracker import MAX_CHECKPOINTS_TO_TRACK, CheckpointBarrierTracker
from .markers import (
    MARKER_COLUMNS,
    CancelCheckpointMarker,
    CheckpointBarrier,
    EndOfPartition,
    Marker,
    MarkerKind,
    has_marker_columns,
    marker_batch,
    split_markers,
    with_marker_columns,
)

__all__ = [
    "MARKER_COLUMNS",
    "MAX_CHECKPOINTS_TO_TRACK",
    "AbortReason",
    "BarrierHandler",
    "CancelCheckpointMarker",
    "CheckpointBarrier",
    "CheckpointBarrierAligner",
    "CheckpointBarrierTracker",
    "CheckpointListener",
    "CheckpointTarget",
    "CheckpointedFunction",
    "CheckpointedSink",
    "CompletedCheckpoint",
    "DeliveryGuarantee",
    "Downstream",
    "EndOfPartition",
    "InitializationContext",
    "InputProcessor",
    "Marker",
    "MarkerKind",
    "SinkContext",
    "TwoPhaseCommitSink",
    "has_marker_columns",
    "marker_batch",
    "split_markers",
    "with_marker_columns",
]
