"""Reaching Kafka: client settings, security and topics, shared by every Kafka client here.

``_client_config`` turns ``kafka.*`` options into client settings (``client_settings``),
with TLS keystores (``_keystores``), SASL and Kerberos (``_security``, ``_kerberos``,
``_kerberos_check``) and secret redaction (``_secrets``); ``_topics`` gives the tools
beside a query their topics' partitions; ``_failover`` and ``_waits`` say which client
errors are passing and how long to wait; ``_positions`` is ``TopicPartition`` and offsets as every part passes them on.
"""
