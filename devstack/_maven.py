"""Resolving the Kafka and HBase classpaths from Maven Central, once.

The poms shipped in ``poms/<name>/pom.xml`` are never built; Maven only resolves
their dependency trees (``dependency:build-classpath``). The result is cached as
``<cache>/<name>-<pom digest>.classpath``: a present file whose jars all exist means
no Maven call at all, and editing a pom changes the digest, so it is re-resolved.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import shutil
import subprocess
import time
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from .._exceptions import DevstackError
from ._config import Paths
from ._jvm import Java

__all__ = ["Classpath", "resolve_classpath"]

log = logging.getLogger(__name__)

_MAVEN_TIMEOUT_S = 1800
# Fully qualified so Maven needs no plugin-prefix lookup (which hides network errors
# behind "No plugin found for prefix") and every Maven version runs the same goal.
_GOAL = "org.apache.maven.plugins:maven-dependency-plugin:3.6.1:build-classpath"
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_NETWORK_SIGNS = (
    "UnknownHostException",
    "Could not transfer",
    "Connection refused",
    "Connect timed out",
    "connect timed out",
    "Network is unreachable",
    "No route to host",
    "Read timed out",
    "No plugin found for prefix",
)


@dataclass(frozen=True)
class Classpath:
    """The jars of one server, in Maven's order."""

    name: str
    jars: tuple[Path, ...]

    def as_arg(self, *prefix: Path) -> str:
        """``-cp`` value; ``prefix`` entries (config dirs) come first."""
        return os.pathsep.join(str(p) for p in (*prefix, *self.jars))


def _pom_bytes(name: str) -> bytes:
    return (resources.files(__package__) / "poms" / name / "pom.xml").read_bytes()


def resolve_classpath(name: str, paths: Paths, java: Java) -> Classpath:
    """Classpath for ``name`` (``kafka`` or ``hbase``), from the cache or from Maven.

    Raises ``DevstackError`` if Maven is missing, Maven Central cannot be reached or
    an artifact does not resolve.
    """
    pom = _pom_bytes(name)
    digest = hashlib.sha256(pom).hexdigest()[:12]
    cached = paths.cache / f"{name}-{digest}.classpath"
    classpath = _read_cached(name, cached)
    if classpath is not None:
        return classpath
    workdir = paths.cache / "poms" / f"{name}-{digest}"
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "pom.xml").write_bytes(pom)
    output = workdir / "classpath.txt"
    output.unlink(missing_ok=True)
    _run_maven(name, workdir, output, paths, java)
    classpath = _read_cached(name, output)
    if classpath is None:
        raise DevstackError(
            f"Maven resolved {name} but left no usable classpath in {output}",
            fix=f"delete {paths.cache} and run `up` again",
        )
    os.replace(output, cached)
    return Classpath(name, classpath.jars)


def _read_cached(name: str, path: Path) -> Classpath | None:
    try:
        text = path.read_text().strip()
    except FileNotFoundError:
        return None
    jars = tuple(Path(entry) for entry in text.split(os.pathsep) if entry)
    if not jars or not all(jar.is_file() for jar in jars):
        return None
    return Classpath(name, jars)


def _run_maven(name: str, workdir: Path, output: Path, paths: Paths, java: Java) -> None:
    mvn = shutil.which("mvn")
    if mvn is None:
        raise DevstackError(
            f"Maven (mvn) not found; it is needed once to fetch the {name} jars",
            fix="install Maven 3.6+ (e.g. `apt-get install maven`) and run `up` again",
        )
    cmd = [
        mvn, "-B", "-q", "-Dstyle.color=never", "-f", str(workdir / "pom.xml"),
        _GOAL, f"-Dmdep.outputFile={output}",
    ]
    if paths.maven_repo is not None:
        cmd.append(f"-Dmaven.repo.local={paths.maven_repo}")
    if paths.maven_settings is not None:
        cmd[1:1] = ["-s", str(paths.maven_settings)]
    env = dict(os.environ, JAVA_HOME=str(java.home))
    log.info("fetching %s jars with Maven (first run only; can take a few minutes)", name)
    started = time.monotonic()
    try:
        result = subprocess.run(
            cmd, cwd=workdir, env=env, stdin=subprocess.DEVNULL, capture_output=True,
            text=True, timeout=_MAVEN_TIMEOUT_S, check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise DevstackError(
            f"Maven took over {_MAVEN_TIMEOUT_S}s resolving {name}",
            fix="check the network to https://repo.maven.apache.org and run `up` again",
        ) from exc
    if result.returncode != 0:
        raise _maven_failure(name, result.returncode, _ANSI.sub("", result.stdout + result.stderr))
    log.info("resolved %s classpath in %.1fs", name, time.monotonic() - started)


def _maven_failure(name: str, code: int, text: str) -> DevstackError:
    errors = [line.strip() for line in text.splitlines() if "[ERROR]" in line]
    first = errors[0].replace("[ERROR]", "").strip() if errors else text.strip()[-300:]
    log.debug("Maven output for %s:\n%s", name, text)
    if any(sign in text for sign in _NETWORK_SIGNS):
        return DevstackError(
            f"Maven cannot reach Maven Central to fetch the {name} jars ({_snippet(first)})",
            fix="check network/proxy access to https://repo.maven.apache.org "
            "(Maven proxies go in ~/.m2/settings.xml) and run `up` again",
        )
    if "Could not find artifact" in text or "Could not resolve dependencies" in text:
        return DevstackError(
            f"Maven could not resolve the {name} dependencies ({_snippet(first)})",
            fix=f"check that the versions in devstack/poms/{name}/pom.xml exist on your "
            "Maven repository/mirror",
        )
    return DevstackError(
        f"Maven failed (exit {code}) resolving {name}: {_snippet(first)}",
        fix=f"run `mvn -B -f {Path('devstack/poms') / name / 'pom.xml'} "
        "dependency:build-classpath` to see the full error",
    )


def _snippet(text: str) -> str:
    """Head and tail of a long Maven error line: the tail usually holds the reason."""
    return text if len(text) <= 240 else f"{text[:100]} ... {text[-130:]}"
