"""Group commits: the consumer group's offsets, committed only for completed batches.

``_offset_committer`` commits (with the checkpoint metadata ``_group`` reads back:
``group_status``, ``committed_offsets``), ``_background_commits`` keeps commits off the
planner's path; ``_jvm_commits`` does the same for Spark's own ``format("kafka")``
source (``commit_kafka_offsets``).
"""
