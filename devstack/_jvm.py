"""Finding a usable Java and building server command lines.

Kafka 4 brokers need Java 17+, so anything older is refused up front with one
clear line instead of a ``UnsupportedClassVersionError`` buried in a log.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from .._exceptions import DevstackError

__all__ = ["MIN_JAVA", "Java", "find_java", "write_log4j_config"]

MIN_JAVA = 17

_INSTALL_HINT = (
    "install a JDK 17+ (e.g. `apt-get install openjdk-17-jdk-headless`) "
    "or point JAVA_HOME at one"
)
_VERSION = re.compile(r'version "(\d+)(?:\.(\d+))?')


@dataclass(frozen=True)
class Java:
    """A Java runtime we checked: its executable, major version and home."""

    executable: Path
    version: int

    @property
    def home(self) -> Path:
        """JAVA_HOME for child tools (Maven) so they use the same runtime."""
        return self.executable.resolve().parent.parent

    def command(
        self,
        *,
        marker: str,
        heap: str,
        classpath: str,
        main: str,
        args: Sequence[str] = (),
        options: Sequence[str] = (),
    ) -> list[str]:
        """``java <marker> -Xmx.. <options> -cp <classpath> <main> <args>``."""
        return [
            str(self.executable),
            marker,
            f"-Xmx{heap}",
            "-XX:+ExitOnOutOfMemoryError",
            "-Djava.net.preferIPv4Stack=true",
            *options,
            "-cp",
            classpath,
            main,
            *args,
        ]


def find_java(environ: Mapping[str, str] | None = None) -> Java:
    """The Java named by ``JAVA_HOME``, else the one on ``PATH``; version checked.

    Raises ``DevstackError`` naming the problem (bogus JAVA_HOME, no java, too old).
    """
    env = os.environ if environ is None else environ
    java_home = env.get("JAVA_HOME")
    if java_home:
        candidate = Path(java_home) / "bin" / "java"
        if not os.access(candidate, os.X_OK):
            raise DevstackError(
                f"JAVA_HOME={java_home} has no executable bin/java",
                fix=f"unset JAVA_HOME or {_INSTALL_HINT}",
            )
        executable = candidate
    else:
        found = shutil.which("java", path=env.get("PATH", os.defpath))
        if found is None:
            raise DevstackError("Java not found (no JAVA_HOME, no java on PATH)",
                                fix=_INSTALL_HINT)
        executable = Path(found)
    return Java(executable=executable, version=_major_version(executable))


def _major_version(executable: Path) -> int:
    try:
        result = subprocess.run(
            [str(executable), "-version"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise DevstackError(f"cannot run {executable} -version: {exc}", fix=_INSTALL_HINT) from exc
    match = _VERSION.search(result.stderr + result.stdout)
    if result.returncode != 0 or match is None:
        raise DevstackError(f"{executable} -version failed (exit {result.returncode})",
                            fix=_INSTALL_HINT)
    major = int(match.group(1))
    if major == 1 and match.group(2):  # "1.8.0_x" style
        major = int(match.group(2))
    if major < MIN_JAVA:
        raise DevstackError(
            f"{executable} is Java {major}; Kafka 4 needs Java {MIN_JAVA}+", fix=_INSTALL_HINT
        )
    return major


def write_log4j_config(directory: Path) -> Path:
    """Copy the servers' log4j2 config (package data) into ``directory``; return its path."""
    target = directory / "log4j2.properties"
    target.write_bytes((resources.files(__package__) / "conf" / "log4j2.properties").read_bytes())
    return target
