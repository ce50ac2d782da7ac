"""Reading back what the sink committed.

``_reader`` reads the table as of a commit (``read_committed``, the batch reader,
``as.of.batch`` / ``as.of.timestamp``), split into row-key ranges (``_key_ranges``)
that filters narrow (``_pushdown``); ``_lineage`` tells which batch and Kafka offsets
wrote a cell; ``_status`` reads a ``sink.id``'s last commit (``sink_status``).
"""
