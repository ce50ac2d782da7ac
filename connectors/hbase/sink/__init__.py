"""The exactly-once streaming sink: write, then commit.

``_sink_function`` is the sink as a checkpointed-sink function; each task's ``_writer``
nets rows into the mutation ``_buffer`` (cells laid out by ``_column_layout``, values by the
codec the readers share, ``.._codec``) and writes them when its input ends, stamped from the
batch's timestamp base (``_timestamps``: the block shared by ``_keyed`` tasks, or its own)
placed by ``_attempts``. ``_committer`` makes the one commit: a conditional write to the
commit table (``_commit_table``); ``_notices`` gives each warning once across processes.
"""
