"""Batch writes: ``df.write.format("barrier-hbase")`` and the ``foreachBatch`` writer.

``_df_write`` is the ``df.write`` writer (one batch write, one commit of a write
series); ``_foreach_batch`` holds ``hbase_batch_writer``, the ``foreachBatch`` function
that writes each micro-batch through it; ``_options`` are the ``write.*`` options both take.
"""
