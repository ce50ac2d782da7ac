"""Checkpoint storage: the file systems a checkpoint lives on, and Spark's offset log read from them.

Local paths, ``hdfs://`` and ``webhdfs://`` (with several NameNodes of an HA pair).

``_files`` is the one folder API (local or WebHDFS, with its retry loop and SPNEGO);
``_checkpoint_log`` reads ``barrier-kafka``'s offsets out of a Spark checkpoint on any of them.
"""
