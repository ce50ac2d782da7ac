"""The one compiled part: barrier-kafka's librdkafka-to-Arrow fetcher (optional).

Everything else is declared in pyproject.toml. Which librdkafka, and why
(docs/librdkafka.md): the extension links the very librdkafka that the pinned
confluent-kafka wheel bundles (``confluent_kafka.libs/librdkafka-<hash>.so.1``), so a
process has one librdkafka for both executor paths, and a fresh machine and a cluster
node get the same one from the same wheel. pip installs that wheel into the isolated
build environment too (``[build-system] requires`` pins the same version), which is
where it is linked from. librdkafka ships no headers in the wheel; the extension
compiles against the system's ``rdkafka.h`` (Debian's librdkafka-dev, which ``./dev``
installs), which is older than the library and API-compatible with it: librdkafka only
adds to its ABI, and the reader uses no call newer than 2.0.

The extension is optional: where it cannot be built the install still succeeds and
the source reads with confluent-kafka instead (``kafkaConsumer.client``, docs/librdkafka.md).
Where confluent-kafka has no bundled librdkafka (a wheel built from source against a
system librdkafka), the extension links that system library; the module refuses to
load below librdkafka 2.6.1 either way.
"""

from importlib.util import find_spec
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_py import build_py


class _BuildPy(build_py):
    """Leave this file out of the package: the repository root is the ``sparkbarrier``
    package (pyproject.toml), so setuptools would otherwise ship ``sparkbarrier/setup.py``,
    a module that runs a build when imported."""

    def find_package_modules(self, package: str, package_dir: str) -> list[tuple[str, str, str]]:
        modules = super().find_package_modules(package, package_dir)
        return [m for m in modules if (m[0], m[1]) != ("sparkbarrier", "setup")]


def _bundled_librdkafka() -> tuple[list[str], list[str]]:
    """(libraries, link args) for the confluent-kafka wheel's librdkafka, or the system's.

    The rpath finds the wheel's library beside an installed ``sparkbarrier`` in the same
    site-packages; in an editable checkout the loader ``_rdkafka_arrow.py`` imports
    confluent_kafka first, which loads the library under the same soname.
    """
    spec = find_spec("confluent_kafka")
    if spec is None or not spec.submodule_search_locations:
        return ["rdkafka"], []
    libs = Path(next(iter(spec.submodule_search_locations))).parent / "confluent_kafka.libs"
    found = sorted(libs.glob("librdkafka*.so*"))
    if not found:
        return ["rdkafka"], []
    return [], [f"-L{libs}", f"-l:{found[0].name}",
                "-Wl,-rpath,$ORIGIN/../../../../confluent_kafka.libs"]


libraries, link_args = _bundled_librdkafka()
setup(cmdclass={"build_py": _BuildPy}, ext_modules=[Extension(
    # imported through connectors/kafka/reader/_rdkafka_arrow.py, which loads the library first
    "sparkbarrier.connectors.kafka.reader._rdkafka_arrow_c",
    sources=["connectors/kafka/reader/_rdkafka_arrow.c"],
    depends=["connectors/kafka/reader/_arrow_buffers.h"],
    libraries=libraries,
    extra_link_args=link_args,
    extra_compile_args=["-O2", "-std=c11", "-Wall", "-Wextra", "-Wno-unused-parameter",
                        "-Wno-missing-field-initializers"],
    optional=True,
)])
