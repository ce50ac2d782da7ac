"""The one Thrift error map (``connectors/hbase/client/_errors.py``): every client exception becomes
one line of the documented tree, and no other module of the package translates them itself."""

from __future__ import annotations

import ast
import ssl
import sys
from pathlib import Path

import pytest
from thriftpy2.thrift import TApplicationException
from thriftpy2.transport import TTransportException

from sparkbarrier._exceptions import FlushError, KerberosError, SinkError
from sparkbarrier.connectors.hbase.client import _errors
from sparkbarrier.connectors.hbase.client._errors import first_line, refusals, refused, tls_error, unreachable

PACKAGE = Path(_errors.__file__).resolve().parent
STACK = b"org.apache.hadoop.hbase.TableNotFoundException: orders\n\tat org.apache.hadoop.hbase.X(X.java:1)\n"


def _thrift1_io_error(message: bytes) -> Exception:
    import happybase.connection  # noqa: F401 -- loads happybase's generated module

    return sys.modules["Hbase_thrift"].IOError(message=message)


def test_a_server_error_keeps_what_was_done_and_the_first_line_of_the_java_trace() -> None:
    err = refused("cannot read sink 's' from commit table 'c'", _thrift1_io_error(STACK))
    assert type(err) is SinkError
    assert str(err) == ("cannot read sink 's' from commit table 'c': "
                        "org.apache.hadoop.hbase.TableNotFoundException: orders")


def test_the_caller_chooses_a_narrower_kind_with_its_fields() -> None:
    with pytest.raises(FlushError, match="writing 3 row") as info:
        with refusals("writing 3 row(s) failed", error=FlushError, also=(SinkError,), batch_id=7):
            raise SinkError("cannot reach the HBase Thrift server: no gateway answered")
    assert info.value.batch_id == 7
    assert "no gateway answered" in str(info.value)
    assert isinstance(info.value.__cause__, SinkError)


def test_a_kerberos_refusal_passes_unchanged_with_its_option() -> None:
    refusal = KerberosError("stale keytab", option="hbase.thrift.kerberos.client.keytab")
    with pytest.raises(KerberosError) as info:
        with refusals("writing rows failed", error=FlushError, also=(SinkError,), batch_id=1):
            raise refusal
    assert info.value is refusal


def test_an_application_error_and_an_empty_message_read_as_one_line() -> None:
    assert first_line(TApplicationException(message="Invalid method name: 'x'\nmore")) == "Invalid method name: 'x'"
    assert first_line(EOFError()) == "EOFError"
    assert first_line(TTransportException(message="timed out"), typed=True) == "TTransportException: timed out"


def test_tls_and_unreachable_errors_name_what_to_check() -> None:
    tls = tls_error("HBase Thrift gateway h:9443", ssl.SSLCertVerificationError("certificate verify failed"))
    assert "hbase.thrift.tls.ca" in str(tls) and "certificate verify failed" in str(tls)
    down = unreachable("HBase Thrift2 server h:9095", "tableExists", ConnectionRefusedError(111, "refused"),
                       "is it running?")
    assert str(down).startswith("cannot reach the HBase Thrift2 server h:9095 during tableExists (")
    assert str(down).endswith("is it running?")


def test_no_other_module_of_the_package_catches_thrift_exceptions_itself() -> None:
    """One map: ``TException`` and the transport classes are named only in ``_errors``."""
    offenders = []
    for path in sorted(PACKAGE.glob("*.py")):
        if path.name == "_errors.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ExceptHandler) and node.type is not None:
                names = {n.id for n in ast.walk(node.type) if isinstance(n, ast.Name)}
                names |= {n.attr for n in ast.walk(node.type) if isinstance(n, ast.Attribute)}
                if names & {"TException", "TTransportException", "TApplicationException"}:
                    offenders.append(f"{path.name}:{node.lineno}")
    assert offenders == []
