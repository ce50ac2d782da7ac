"""The exactly-once streaming sink: write, then commit.

``_sink_function`` is the sink as a checkpointed-sink function; each task's ``_writer``
nets rows into the mutation ``_buffer`` (cells laid out by ``_column_layout`` and ``_encoding``)
and flushes at every barrier, stamped from the batch's timestamp base (``_timestamps``)
placed by ``_attempts``. ``_committer`` makes the one commit: a conditional write to the
commit table (``_commit_table``); ``_notices`` gives each warning once across processes.
"""
