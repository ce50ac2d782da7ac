"""The driver side of the source: which offsets each micro-batch reads.

``_planner`` is the Python Data Source stream reader Spark calls (offsets, partitions,
commit); ``_driver`` holds its state and hands completed batches to the group commits;
``_starting`` resolves ``startingOffsets`` once per query; ``_cluster`` discovers
partitions and looks offsets up, after ``_preflight`` checked the options can log in.
"""
