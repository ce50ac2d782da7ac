"""The one compiled part: barrier-kafka's librdkafka-to-Arrow fetcher (optional).

Everything else is declared in pyproject.toml. The extension needs librdkafka's
headers and library (Debian: ``apt-get install librdkafka-dev``; ``./dev`` installs
them). It is optional: where it cannot be built the install still succeeds and the
source reads with confluent-kafka instead (``kafkaConsumer.client``, README).
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension(
    "sparkbarrier.connectors.kafka._rdkafka_arrow",
    sources=["connectors/kafka/_rdkafka_arrow.c"],
    libraries=["rdkafka"],
    extra_compile_args=["-O2", "-std=c11", "-Wall", "-Wextra", "-Wno-unused-parameter",
                        "-Wno-missing-field-initializers"],
    optional=True,
)])
