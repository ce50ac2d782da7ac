"""The executor side of the source: reading one offset range into Arrow batches.

``_partition_reader`` reads a planned range with the client ``_reader_choice`` picks:
the compiled librdkafka-to-Arrow reader (``_rdkafka_arrow.c``, loaded by
``_rdkafka_arrow``, driven by ``_native_reader``, its consumers kept in
``_consumer_pool``), confluent-kafka (``_confluent_reader``) or kafka-python
(``_kafka_python_reader``); ``_librdkafka`` is what the librdkafka paths share and
``_range`` the range they read.
"""
