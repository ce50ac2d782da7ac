"""Kerberos, shared by every hop (Kafka's SASL/GSSAPI, HBase's Thrift SASL, WebHDFS' SPNEGO).

``_settings`` is the one settings type, ``_login`` the credentials and their per-process
cache, ``_errors`` the one map from gssapi's status codes to errors that say the fix.
"""
