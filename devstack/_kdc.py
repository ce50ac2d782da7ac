"""An optional private MIT Kerberos KDC for the dev stack (issue 19's foundation).

``python -m sparkbarrier.devstack kdc up | down | env`` or, from Python::

    from sparkbarrier.devstack import Kdc
    manifest = Kdc().up()          # idempotent; starts the KDC if it does not serve
    manifest.krb5_conf             # KRB5_CONFIG for clients and JVMs
    manifest.keytab("client")      # (principal, keytab path)

Debian's ``krb5-kdc``/``krb5-admin-server``/``krb5-user`` binaries (``./dev`` installs
them) run as a private instance of the stack's home: its own ``krb5.conf`` and
``kdc.conf`` (``KRB5_CONFIG``, ``KRB5_KDC_PROFILE``; ``/etc/krb5*`` is never read),
realm ``SPARKBARRIER.TEST``, a database created with ``kdb5_util`` under a random
master password (stdin only: never on a command line, in a file or a log), one TCP
listener on 127.0.0.1 (UDP off; ``udp_preference_limit = 1`` makes MIT and Java
clients use TCP). No root is needed once the packages are installed.

Principals and keytabs (``<home>/data/kdc/keytabs/<role>.keytab``, mode 0600) are
created afresh on every start; ``manifest.json`` beside them maps each role to its
principal and keytab. Role ``stale`` has a keytab exported before its key was
changed again, so it is refused (every principal requires pre-authentication, as on
real KDCs, so kinit says ``Preauthentication failed``): the "wrong keytab" case.
Role ``unknown`` has a keytab whose principal was deleted after export (kinit says
``Client '...' not found in Kerberos database``): the "principal the KDC does not know" case.

Ownership: krb5kdc takes no arbitrary arguments, so the stack's marker
(``-Dsparkbarrier.devstack=kdc@<home>``) is its ``argv[0]``; ``down`` therefore finds
and stops only this home's KDC, exactly like the JVMs.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import shlex
import shutil
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from .._exceptions import DevstackError
from ._config import Paths, Port, port_requests
from ._process import (
    ProcessRecord,
    choose_ports,
    died,
    is_ours,
    log_tail,
    marker_for,
    port_accepts,
    stack_lock,
    stop_processes,
    stop_recorded,
    wait_for_port,
)

__all__ = ["KDC_ENV", "NAME", "PRINCIPALS", "REALM", "Kdc", "KdcManifest"]

log = logging.getLogger(__name__)

NAME = "kdc"
REALM = "SPARKBARRIER.TEST"
KDC_ENV = "SPARKBARRIER_KDC"
MANIFEST_VERSION = 1
# role -> principal (without realm). Service principals use host "localhost": every
# server of the stack listens on 127.0.0.1 and clients name it "localhost".
PRINCIPALS: Mapping[str, str] = {
    "kafka": "kafka/localhost",
    "hbase": "hbase/localhost",
    "http": "HTTP/localhost",
    "hdfs": "hdfs/localhost",  # the Kerberized HDFS HA pair's NameNodes and DataNode
    "client": "sparkbarrier-client",
    "stale": "sparkbarrier-stale-client",
    "unknown": "sparkbarrier-unknown-client",
}
_PACKAGES = "krb5-kdc krb5-admin-server krb5-user"
_TOOLS = ("krb5kdc", "kdb5_util", "kadmin.local", "kinit", "klist")
_TOOL_DIRS = ("/usr/sbin", "/usr/bin", "/sbin", "/bin")
_STOP_GRACE_S = 5.0
_TOOL_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class KdcManifest:
    """What clients need to use the KDC; written as JSON (``manifest.json``, versioned)."""

    realm: str
    kdc: str  # "127.0.0.1:<port>" (TCP)
    krb5_conf: str
    keytabs: Mapping[str, tuple[str, str]]  # role -> (principal@REALM, keytab path)

    def keytab(self, role: str) -> tuple[str, str]:
        """(principal, keytab path) of ``role`` (see ``PRINCIPALS``)."""
        return self.keytabs[role]

    def to_json(self) -> str:
        return json.dumps({
            "version": MANIFEST_VERSION, "realm": self.realm, "kdc": self.kdc,
            "krb5_conf": self.krb5_conf,
            "keytabs": {r: {"principal": p, "keytab": k} for r, (p, k) in self.keytabs.items()},
        }, indent=1)

    @classmethod
    def from_json(cls, text: str) -> KdcManifest:
        raw = json.loads(text)
        if raw.get("version") != MANIFEST_VERSION:
            raise DevstackError(f"KDC manifest version {raw.get('version')!r} is not "
                                f"{MANIFEST_VERSION}",
                                fix="restart the KDC: `python -m sparkbarrier.devstack kdc down`"
                                " then `kdc up`")
        return cls(realm=raw["realm"], kdc=raw["kdc"], krb5_conf=raw["krb5_conf"],
                   keytabs={r: (v["principal"], v["keytab"]) for r, v in raw["keytabs"].items()})


def _krb5_conf(port: int) -> str:
    return f"""[libdefaults]
 default_realm = {REALM}
 dns_lookup_kdc = false
 dns_lookup_realm = false
 dns_canonicalize_hostname = false
 rdns = false
 udp_preference_limit = 1
 ticket_lifetime = 24h
 renew_lifetime = 7d
 forwardable = true

[realms]
 {REALM} = {{
  kdc = 127.0.0.1:{port}
 }}

[domain_realm]
 localhost = {REALM}
 .localhost = {REALM}
"""


def _kdc_conf(data: Path, port: int) -> str:
    return f"""[kdcdefaults]
 kdc_listen = ""
 kdc_tcp_listen = 127.0.0.1:{port}

[realms]
 {REALM} = {{
  database_name = {data}/db/principal
  key_stash_file = {data}/db/stash
  acl_file = {data}/kadm5.acl
  kdc_listen = ""
  kdc_tcp_listen = 127.0.0.1:{port}
  max_life = 24h
  max_renewable_life = 7d
  supported_enctypes = aes256-cts-hmac-sha1-96:normal aes128-cts-hmac-sha1-96:normal
 }}

[logging]
 kdc = STDERR
 admin_server = STDERR
 default = STDERR
"""


def _tool(name: str) -> str:
    found = shutil.which(name) or shutil.which(name, path=os.pathsep.join(_TOOL_DIRS))
    if found is None:
        raise DevstackError(f"MIT Kerberos tool {name} not found",
                            fix=f"install it (apt-get install {_PACKAGES}); ./dev does when root")
    return found


class Kdc:
    """Handle on the KDC of the stack in ``home`` (same home rules as ``Devstack``)."""

    def __init__(
        self,
        home: str | os.PathLike[str] | None = None,
        *,
        port: int | None = None,
        environ: Mapping[str, str] | None = None,
        start_timeout_s: float = 30.0,
    ) -> None:
        self._environ = dict(os.environ if environ is None else environ)
        self.paths = Paths.resolve(home, None, self._environ)
        self._port_request = port_requests({Port.KDC: port} if port else None,
                                           self._environ)[Port.KDC]
        self._start_timeout_s = start_timeout_s

    @property
    def data(self) -> Path:
        return self.paths.data(NAME)

    @property
    def manifest_path(self) -> Path:
        return self.data / "manifest.json"

    # ------------------------------------------------------------------ queries
    def _record(self) -> ProcessRecord | None:
        return ProcessRecord.load(self.paths.run, NAME)

    def manifest(self) -> KdcManifest | None:
        """The running KDC's manifest, or None if it is not running."""
        record = self._record()
        if record is None or not is_ours(record):
            return None
        try:
            return KdcManifest.from_json(self.manifest_path.read_text())
        except FileNotFoundError:
            return None

    def env(self, manifest: KdcManifest) -> dict[str, str]:
        """``SPARKBARRIER_KDC`` (the manifest: principals and keytabs), the realm, the
        KDC's address and ``KRB5_CONFIG`` for clients."""
        return {KDC_ENV: str(self.manifest_path), f"{KDC_ENV}_REALM": manifest.realm,
                f"{KDC_ENV}_ADDRESS": manifest.kdc, "KRB5_CONFIG": manifest.krb5_conf}

    def exports(self, manifest: KdcManifest) -> str:
        return "".join(f"export {k}={shlex.quote(v)}\n" for k, v in self.env(manifest).items())

    def tool_env(self, ccache: Path | None = None) -> dict[str, str]:
        """Environment for MIT tools (kinit, kadmin.local) against this KDC only."""
        env = dict(self._environ)
        env["KRB5_CONFIG"] = str(self.data / "krb5.conf")
        env["KRB5_KDC_PROFILE"] = str(self.data / "kdc.conf")
        env["KRB5CCNAME"] = f"FILE:{ccache or self.data / 'probe.ccache'}"
        env.pop("KRB5_TRACE", None)
        return env

    def kinit(self, role: str, *, ccache: Path, keytab: str | None = None
              ) -> subprocess.CompletedProcess[str]:
        """``kinit -k -t <keytab> <principal>`` of ``role`` into ``ccache`` (a private
        cache file); returns the completed process (never raises for a refused login)."""
        manifest = self.manifest()
        if manifest is None:
            raise DevstackError("the KDC is not running",
                                fix="python -m sparkbarrier.devstack kdc up")
        principal, default_keytab = manifest.keytab(role)
        return subprocess.run(
            [_tool("kinit"), "-k", "-t", keytab or default_keytab, principal],
            env=self.tool_env(ccache), stdin=subprocess.DEVNULL, capture_output=True,
            text=True, timeout=_TOOL_TIMEOUT_S, check=False)

    # ------------------------------------------------------------------ down
    def down(self) -> bool:
        """Stop this home's KDC; idempotent. True if it was running."""
        with stack_lock(self.paths.run):
            stopped = stop_recorded(self.paths.run, [NAME], grace_s=_STOP_GRACE_S)
        if stopped:
            log.info("stopped %s (pid %d)", NAME, stopped[0].pid)
        return bool(stopped)

    # ------------------------------------------------------------------ up
    def up(self) -> KdcManifest:
        """Start the KDC unless it already serves (ours, port open, the client keytab
        logs in); return the manifest. A KDC that fails that check is replaced, with
        fresh keytabs. Raises ``DevstackError`` (after stopping what it started)."""
        self.paths.ensure()
        with stack_lock(self.paths.run):
            record = self._record()
            if record is not None and self._healthy(record):
                wanted = self._port_request
                if wanted is not None and record.ports.get(Port.KDC.key) != wanted:
                    raise DevstackError(
                        f"the KDC already runs on port {record.ports.get(Port.KDC.key)}, "
                        f"not the requested {wanted}",
                        fix="run `python -m sparkbarrier.devstack kdc down` first")
                log.info("kdc already running and healthy")
            else:
                if record is not None:
                    log.info("kdc does not serve; restarting it")
                stop_recorded(self.paths.run, [NAME], grace_s=_STOP_GRACE_S)
                self._start()
        manifest = self.manifest()
        if manifest is None:
            raise DevstackError("the KDC died right after start",
                                fix=f"read {self.paths.logs / 'kdc.log'}")
        return manifest

    def _healthy(self, record: ProcessRecord) -> bool:
        if not (is_ours(record) and all(port_accepts(p) for p in record.ports.values())):
            return False
        try:
            result = self.kinit("client", ccache=self.data / "probe.ccache")
        except (DevstackError, KeyError, ValueError, OSError, subprocess.SubprocessError):
            return False  # died meanwhile, or a manifest from another version
        (self.data / "probe.ccache").unlink(missing_ok=True)
        return result.returncode == 0

    def _start(self) -> None:
        krb5kdc = _tool("krb5kdc")
        for name in _TOOLS:
            _tool(name)
        port = choose_ports({Port.KDC: self._port_request})[Port.KDC]
        data = self.data
        shutil.rmtree(data, ignore_errors=True)
        (data / "db").mkdir(parents=True, mode=0o700)
        (data / "keytabs").mkdir(mode=0o700)
        (data / "krb5.conf").write_text(_krb5_conf(port))
        (data / "kdc.conf").write_text(_kdc_conf(data, port))
        (data / "kadm5.acl").write_text("")
        log_path = self.paths.logs / f"{NAME}.log"
        log_path.write_bytes(b"")
        deadline = time.monotonic() + self._start_timeout_s
        # stdin only: the master password never appears in argv, a file or a log.
        password = secrets.token_urlsafe(24)
        self._admin(["kdb5_util", "create", "-s", "-r", REALM], log_path,
                    stdin=f"{password}\n{password}\n")
        del password
        keytabs = self._create_principals(log_path)
        marker = marker_for(NAME, self.paths.home)
        with open(log_path, "ab") as out:
            proc = subprocess.Popen(
                [marker, "-n", "-r", REALM], executable=krb5kdc, stdin=subprocess.DEVNULL,
                stdout=out, stderr=subprocess.STDOUT, cwd=data, env=self.tool_env(),
                start_new_session=True)
        record = ProcessRecord(name=NAME, pid=proc.pid, marker=marker, log=str(log_path),
                               ports={Port.KDC.key: port}, started_at=time.time())
        record.save(self.paths.run)
        try:
            self.manifest_path.write_text(KdcManifest(
                realm=REALM, kdc=f"127.0.0.1:{port}", krb5_conf=str(data / "krb5.conf"),
                keytabs=keytabs).to_json())
            # Until execve completes, /proc/<pid>/cmdline is briefly empty (the record would
            # not look ours): the open port is the first sign the KDC itself runs.
            wait_for_port(port, deadline=deadline, proc=proc, name=NAME, log_path=log_path)
            self._probe(deadline, proc=proc)
        except BaseException:
            stop_processes([record], grace_s=_STOP_GRACE_S)
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            ProcessRecord.remove(self.paths.run, NAME)
            raise
        log.info("kdc serves realm %s on 127.0.0.1:%d (tcp)", REALM, port)

    def _create_principals(self, log_path: Path) -> dict[str, tuple[str, str]]:
        keytabs: dict[str, tuple[str, str]] = {}
        for role, name in PRINCIPALS.items():
            keytab = self.data / "keytabs" / f"{role}.keytab"
            self._admin(["kadmin.local", "-r", REALM, "-q", f"addprinc -randkey +requires_preauth {name}"],
                        log_path)
            # ktadd randomises the key again (kvno 2) and writes it to the keytab.
            self._admin(["kadmin.local", "-r", REALM, "-q",
                         f'ktadd -k "{keytab}" {name}'], log_path)
            keytab.chmod(0o600)
            keytabs[role] = (f"{name}@{REALM}", str(keytab))
        # The stale role's key moves on (kvno 3) after export: its keytab is refused.
        self._admin(["kadmin.local", "-r", REALM, "-q",
                     f"cpw -randkey {PRINCIPALS['stale']}"], log_path)
        self._admin(["kadmin.local", "-r", REALM, "-q",
                     f"delprinc -force {PRINCIPALS['unknown']}"], log_path)
        return keytabs

    def _admin(self, cmd: list[str], log_path: Path, *, stdin: str | None = None) -> None:
        """Run an MIT admin tool against the private database; output goes to the log
        (the tools never echo the password read from stdin)."""
        with open(log_path, "ab") as out:
            out.write(f"$ {' '.join(cmd)}\n".encode())
            out.flush()
            try:
                result = subprocess.run(
                    [_tool(cmd[0]), *cmd[1:]], input=(stdin or "").encode(), stdout=out,
                    stderr=subprocess.STDOUT, env=self.tool_env(), cwd=self.data,
                    timeout=_TOOL_TIMEOUT_S, check=False)
            except subprocess.TimeoutExpired as exc:
                raise DevstackError(f"{cmd[0]} hung for {_TOOL_TIMEOUT_S:.0f}s",
                                    fix=f"read {log_path}", log_path=str(log_path)) from exc
        if result.returncode != 0:
            raise DevstackError(f"{cmd[0]} {cmd[-1].split()[0]} failed "
                                f"(exit {result.returncode}; log: {log_path})",
                                fix="read the log tail above", log_path=str(log_path),
                                log_tail=log_tail(log_path))

    def _probe(self, deadline: float, *, proc: subprocess.Popen[bytes] | None) -> None:
        """Poll ``kinit`` with the client keytab into a private ccache until it works."""
        log_path = self.paths.logs / f"{NAME}.log"
        ccache = self.data / "probe.ccache"
        last = ""
        while time.monotonic() < deadline:
            if proc is not None and proc.poll() is not None:
                raise died(NAME, proc.returncode, log_path)
            result = self.kinit("client", ccache=ccache)
            if result.returncode == 0:
                ccache.unlink(missing_ok=True)
                return
            last = (result.stderr or result.stdout).strip()
            time.sleep(0.2)
        raise DevstackError(f"kinit with the client keytab did not succeed in time "
                            f"(last error: {last})",
                            fix=f"read {log_path}", log_path=str(log_path),
                            log_tail=log_tail(log_path))
