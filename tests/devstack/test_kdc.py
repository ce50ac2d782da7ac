"""The optional private KDC against the real MIT binaries (no mock): start, idempotent
up, the client keytab logs in, the stale keytab is refused, nothing survives ``down``.

Every test runs in a throw-away home on a free port; the shared stack is untouched.
"""

from __future__ import annotations

import json
import os
import signal
import stat
from pathlib import Path

import pytest

from devstack_helpers import run_cli, stack_pids

from sparkbarrier.devstack import KDC_ENV, Devstack, Kdc, KdcManifest
from sparkbarrier.devstack._kdc import PRINCIPALS, REALM

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def kdc(scratch_home: Path) -> Kdc:
    """A KDC in ``scratch_home``, started; ``scratch_home`` stops it and checks the pids."""
    kdc = Kdc(scratch_home)
    kdc.up()
    return kdc


def test_up_writes_a_manifest_with_every_principal(kdc: Kdc) -> None:
    manifest = kdc.manifest()
    assert manifest is not None
    assert manifest.realm == REALM
    assert manifest.kdc.startswith("127.0.0.1:")
    assert Path(manifest.krb5_conf).read_text().count(manifest.kdc) == 1
    assert set(manifest.keytabs) == set(PRINCIPALS)
    for role, (principal, keytab) in manifest.keytabs.items():
        assert principal == f"{PRINCIPALS[role]}@{REALM}"
        assert stat.S_IMODE(Path(keytab).stat().st_mode) == 0o600
    assert KdcManifest.from_json(kdc.manifest_path.read_text()) == manifest


def test_up_again_keeps_the_running_kdc(kdc: Kdc) -> None:
    before = json.loads((kdc.paths.run / "kdc.json").read_text())["pid"]
    kdc.up()
    assert json.loads((kdc.paths.run / "kdc.json").read_text())["pid"] == before


def test_up_restarts_a_kdc_that_died(kdc: Kdc, tmp_path: Path) -> None:
    record = json.loads((kdc.paths.run / "kdc.json").read_text())
    os.kill(record["pid"], signal.SIGKILL)
    os.waitpid(record["pid"], 0)  # our child (the fixture started it in-process): reap it
    manifest = kdc.up()
    assert json.loads((kdc.paths.run / "kdc.json").read_text())["pid"] != record["pid"]
    assert manifest.keytabs == KdcManifest.from_json(kdc.manifest_path.read_text()).keytabs
    assert kdc.kinit("client", ccache=tmp_path / "after-restart.ccache").returncode == 0


def test_up_replaces_a_kdc_whose_client_cannot_log_in(kdc: Kdc, tmp_path: Path) -> None:
    before = json.loads((kdc.paths.run / "kdc.json").read_text())["pid"]
    Path(kdc.manifest().keytab("client")[1]).unlink()  # type: ignore[union-attr]
    kdc.up()
    assert json.loads((kdc.paths.run / "kdc.json").read_text())["pid"] != before
    assert kdc.kinit("client", ccache=tmp_path / "replaced.ccache").returncode == 0


def test_client_keytab_gets_a_ticket(kdc: Kdc, tmp_path: Path) -> None:
    ccache = tmp_path / "client.ccache"
    result = kdc.kinit("client", ccache=ccache)
    assert result.returncode == 0, result.stderr
    assert ccache.stat().st_size > 0


def test_stale_keytab_is_refused_with_a_clear_error(kdc: Kdc, tmp_path: Path) -> None:
    result = kdc.kinit("stale", ccache=tmp_path / "stale.ccache")
    assert result.returncode != 0
    assert "Preauthentication failed" in result.stderr


def test_keytab_of_a_deleted_principal_is_refused_naming_it(kdc: Kdc, tmp_path: Path) -> None:
    result = kdc.kinit("unknown", ccache=tmp_path / "unknown.ccache")
    assert result.returncode != 0
    assert f"{PRINCIPALS['unknown']}@{REALM}' not found in Kerberos database" in result.stderr


def test_master_password_is_not_logged(scratch_home: Path,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "Kq7-master-password-marker-3f9a1c"
    monkeypatch.setattr("sparkbarrier.devstack._kdc.secrets.token_urlsafe", lambda n: secret)
    kdc = Kdc(scratch_home)
    kdc.up()
    written = [p for p in scratch_home.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()]
    assert written == []


def test_cli_up_env_down_leaves_nothing_running(scratch_env: dict[str, str],
                                                scratch_home: Path) -> None:
    up = run_cli("kdc", "up", env=scratch_env, timeout=50)
    assert up.returncode == 0, up.stderr
    manifest = Kdc(scratch_home).manifest()
    assert manifest is not None
    assert up.stdout == (f"export {KDC_ENV}={scratch_home}/data/kdc/manifest.json\n"
                         f"export {KDC_ENV}_REALM={REALM}\n"
                         f"export {KDC_ENV}_ADDRESS={manifest.kdc}\n"
                         f"export KRB5_CONFIG={manifest.krb5_conf}\n")
    env = run_cli("kdc", "env", env=scratch_env, timeout=20)
    assert env.returncode == 0 and env.stdout == up.stdout
    assert len(stack_pids(scratch_home)) == 1
    # The stack's `down` takes the KDC of its home along.
    assert Devstack(scratch_home).down() == ["kdc"]
    assert stack_pids(scratch_home) == []
    assert run_cli("kdc", "env", env=scratch_env, timeout=20).returncode == 3
    assert run_cli("kdc", "down", env=scratch_env, timeout=20).returncode == 0
