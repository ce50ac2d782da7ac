"""Talking to HBase: the Thrift gateways and how to reach them.

``_options`` parses the ``hbase.*`` options into one ``HBaseConnectionOptions``;
``_connection`` is the Thrift1 connection with gateway failover (``_gateways``) over
TLS (``_tls``) or Kerberos SASL (``_sasl``), built by ``_transport``, pooled per
executor by ``_connection_pool``; ``_thrift2`` and ``_admin`` are the Thrift2 calls
(table schema, ``KEEP_DELETED_CELLS``), ``_version_deletes`` sends exact-version deletes over
several Thrift2 connections at once; ``_errors`` names what a gateway's refusal means.
"""
