"""The compiled fetcher (``_rdkafka_arrow.c``, built as ``_rdkafka_arrow_c``), loaded on the
librdkafka of the confluent-kafka wheel. Import this module, never ``_rdkafka_arrow_c``.

Why a loader: the extension links the wheel's ``librdkafka-<hash>.so.1`` (setup.py,
docs/librdkafka.md). In a regular install (a wheel on a cluster node, a packed venv)
its rpath finds that file beside it in site-packages; in an editable checkout nothing
on disk leads there. Importing confluent_kafka first loads the library under the same
soname, and the dynamic linker then reuses the copy already in the process -- one
librdkafka per process either way. Importing raises ImportError when the extension was
not built, or runs on a librdkafka older than 2.6.1 (the extension refuses to load).
"""

import confluent_kafka  # noqa: F401  -- first: loads the wheel's librdkafka

from ._rdkafka_arrow_c import (  # noqa: F401  -- re-exported
    ERR_ALL_BROKERS_DOWN,
    ERR_AUTHENTICATION,
    ERR_AUTO_OFFSET_RESET,
    ERR_CLUSTER_AUTHORIZATION_FAILED,
    ERR_FATAL,
    ERR_OFFSET_OUT_OF_RANGE,
    ERR_PARTITION_EOF,
    ERR_SASL_AUTHENTICATION_FAILED,
    ERR_SSL,
    ERR_TIMED_OUT,
    ERR_TOPIC_AUTHORIZATION_FAILED,
    ERR_TRANSPORT,
    ERR_UNKNOWN_PARTITION,
    ERR_UNKNOWN_TOPIC,
    ERR_UNKNOWN_TOPIC_OR_PART,
    Fetcher,
    _fail_allocation,
    librdkafka_version,
    librdkafka_version_int,
    min_librdkafka_version_int,
)
