"""``python -m sparkbarrier.devstack up [--all] | down | status | env | kdc up|down|env |
kerberos up|down|env | cluster up|down|env|status | hdfs up|down|env|status``.

``up`` starts what the demo uses (Kafka, HBase, Thrift1, Thrift2); ``up --all`` also the
second Thrift1 gateway and the TLS Thrift1 and Thrift2 ones, which only some tests use.

stdout carries only machine-usable output (``export`` lines, the status table);
progress goes to stderr. Any ``DevstackError`` ends as ONE line on stderr
(``devstack: <cause>; fix: <fix>``), preceded by the failing server's log tail.

Exit codes: 0 ok · 1 error · 2 usage · 3 (``status``/``env``) not running.
"""

from __future__ import annotations

import argparse
import logging
import shlex
import sys
import time
from collections.abc import Sequence

from .._exceptions import DevstackError
from ._config import Port
from ._hdfs import Hdfs, HdfsPort
from ._kafka_cluster import CLUSTER_PORTS, KafkaCluster
from ._kdc import REALM, Kdc
from ._stack import Devstack, StackStatus

__all__ = ["main"]

EXIT_NOT_RUNNING = 3


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m sparkbarrier.devstack",
        description="Local Kafka (KRaft) + HBase (standalone, Thrift1 + Thrift2) on 127.0.0.1, "
        "no Docker.",
    )
    parser.add_argument("--home", help="state directory (env SPARKBARRIER_DEVSTACK_HOME)")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="start Kafka, HBase, Thrift1 and Thrift2 (idempotent) and print export lines")
    up.add_argument("--all", action="store_true", dest="all_gateways",
                    help="also the second Thrift1 gateway and the TLS (HTTPS) Thrift1 and Thrift2 ones")
    for port in Port:
        if port is Port.KDC or port in CLUSTER_PORTS:  # optional: started by `kdc up`, `cluster up`
            continue
        extra = (Port.HBASE_THRIFT_B, Port.HBASE_THRIFT_TLS, Port.HBASE_THRIFT2_TLS)
        also = " (with --all)" if port in extra else ""
        up.add_argument(port.flag, type=int, dest=port.key, metavar="N",
                        help=f"{port.key} port{also} (default {port.default}, env {port.env})")
    up.add_argument("--timeout", type=float, default=240.0,
                    help="seconds allowed for the servers to start (default 240)")
    sub.add_parser("down", help="stop this stack's servers (the KDC and the 3-node cluster too)")
    sub.add_parser("status", help="show processes; exit 3 if one that `up` starts is not running")
    sub.add_parser("env", help="print export lines of the running stack; exit 3 if not running")
    kdc = sub.add_parser("kdc", help="the optional private Kerberos KDC (MIT, realm "
                         f"{REALM}): up (idempotent) | down | env")
    kdc.add_argument("action", choices=("up", "down", "env"))
    kdc.add_argument(Port.KDC.flag, type=int, dest=Port.KDC.key, metavar="N",
                     help=f"KDC port for `up` (default {Port.KDC.default}, env {Port.KDC.env})")
    krb = sub.add_parser("kerberos", help="the KDC plus a Kerberized Kafka broker and a Kerberized "
                         "HBase with SASL Thrift gateways: up (idempotent) | down | env")
    krb.add_argument("action", choices=("up", "down", "env"))
    cluster = sub.add_parser("cluster", help="the optional 3-node Kafka (KRaft) cluster for failover tests: "
                             "up (idempotent) | down | env | status")
    cluster.add_argument("action", choices=("up", "down", "env", "status"))
    for port in CLUSTER_PORTS:
        cluster.add_argument(port.flag, type=int, dest=port.key, metavar="N",
                             help=f"{port.key} port for `up` (default {port.default}, env {port.env})")
    cluster.add_argument("--timeout", type=float, default=120.0,
                         help="seconds allowed for `up` (default 120)")
    hdfs = sub.add_parser("hdfs", help="the optional HDFS (NameNode + DataNode, WebHDFS) for checkpoints: "
                          "up (idempotent; keeps the data) | down | env | status")
    hdfs.add_argument("action", choices=("up", "down", "env", "status"))
    for hdfs_port in HdfsPort:
        hdfs.add_argument(hdfs_port.flag, type=int, dest=hdfs_port.key, metavar="N",
                          help=f"{hdfs_port.key} port for `up` (default {hdfs_port.default}, env {hdfs_port.env})")
    hdfs.add_argument("--fresh", action="store_true", help="`up` only: stop it and wipe its data first")
    hdfs.add_argument("--timeout", type=float, default=180.0,
                      help="seconds allowed for `up` (default 180)")
    return parser


def _run_kerberos(args: argparse.Namespace) -> int:
    """``kerberos up`` starts the KDC, then the Kerberized broker and HBase that log in
    with it (docs/kerberos-devstack.md); ``env`` prints their export lines; ``down``
    stops the three (the KDC last: the servers renew their tickets from it)."""
    from ._hbase_kerberos import KerberosHBase
    from ._kafka_kerberos import KerberosKafka

    kdc = Kdc(args.home)
    home = kdc.paths.home
    if args.action == "down":
        manifest = kdc.manifest()
        stopped = []
        if manifest is not None:
            stopped += KerberosHBase(home, manifest).down()
            stopped += ["kafka-kerberos"] if KerberosKafka(home, manifest).down() else []
        stopped += ["kdc"] if kdc.down() else []
        print("stopped: " + (", ".join(stopped) if stopped else "nothing was running"), file=sys.stderr)
        return 0
    manifest = kdc.up() if args.action == "up" else kdc.manifest()
    if manifest is None:
        print("devstack: the KDC is not running; fix: python -m sparkbarrier.devstack kerberos up",
              file=sys.stderr)
        return EXIT_NOT_RUNNING
    kafka, hbase = KerberosKafka(home, manifest), KerberosHBase(home, manifest)
    broker = kafka.up() if args.action == "up" else kafka.endpoints()
    gateways = hbase.up() if args.action == "up" else hbase.endpoints()
    if broker is None or gateways is None:
        print("devstack: the Kerberized servers are not running; fix: python -m sparkbarrier.devstack "
              "kerberos up", file=sys.stderr)
        return EXIT_NOT_RUNNING
    lines = {
        "SPARKBARRIER_KERBEROS_KAFKA_PLAINTEXT": broker.plaintext,
        "SPARKBARRIER_KERBEROS_KAFKA_SASL_PLAINTEXT": broker.sasl_plaintext,
        "SPARKBARRIER_KERBEROS_KAFKA_SASL_SSL": broker.sasl_ssl,
        "SPARKBARRIER_KERBEROS_KAFKA_CA": broker.ca_pem,
        "SPARKBARRIER_KERBEROS_HBASE_THRIFT": "{}:{}".format(*gateways.thrift),
        "SPARKBARRIER_KERBEROS_HBASE_THRIFT_AUTH_INT": "{}:{}".format(*gateways.thrift_int),
        "SPARKBARRIER_KERBEROS_HBASE_THRIFT_AUTH_CONF": "{}:{}".format(*gateways.thrift_conf),
        "SPARKBARRIER_KERBEROS_HBASE_THRIFT2": "{}:{}".format(*gateways.thrift2),
    }
    print(kdc.exports(manifest) + "".join(f"export {k}={shlex.quote(v)}\n" for k, v in lines.items()), end="")
    return 0


def _run_kdc(args: argparse.Namespace) -> int:
    """``kdc up`` and ``kdc env`` print ``export`` lines: SPARKBARRIER_KDC names the JSON
    manifest (realm, KDC address, krb5.conf, principal and keytab per role)."""
    kdc = Kdc(args.home, port=getattr(args, Port.KDC.key))
    if args.action == "down":
        stopped = kdc.down()
        print("stopped: " + ("kdc" if stopped else "nothing was running"), file=sys.stderr)
        return 0
    manifest = kdc.up() if args.action == "up" else kdc.manifest()
    if manifest is None:
        print("devstack: the KDC is not running; fix: python -m sparkbarrier.devstack kdc up",
              file=sys.stderr)
        return EXIT_NOT_RUNNING
    print(kdc.exports(manifest), end="")
    return 0


def _run_cluster(args: argparse.Namespace) -> int:
    """``cluster up`` and ``cluster env`` print the export line (``env``: while a quorum
    of nodes runs); ``status`` prints one row per node (exit 3 unless all three run)."""
    ports = {p: v for p in CLUSTER_PORTS if (v := getattr(args, p.key, None)) is not None}
    cluster = KafkaCluster(args.home, ports=ports, start_timeout_s=args.timeout)
    if args.action == "down":
        stopped = cluster.down()
        print("stopped: " + (", ".join(stopped) if stopped else "nothing was running"), file=sys.stderr)
        return 0
    if args.action == "status":
        status = cluster.status()
        print(f"devstack home: {status.home}")
        for n in status.nodes:
            state = "up" if n.alive and n.serving else ("alive, not serving" if n.alive else "down")
            ports_text = " ".join(f"{k}={v}" for k, v in n.ports.items()) or "-"
            print(f"  {n.name:<15} {state:<19} pid={n.pid if n.pid is not None else '-':<8} {ports_text}  "
                  f"log={n.log}")
        return 0 if status.running else EXIT_NOT_RUNNING
    if args.action == "up":
        started = time.monotonic()
        bootstrap: str | None = cluster.up()
        logging.getLogger(__name__).info("cluster up in %.1fs", time.monotonic() - started)
    else:
        bootstrap = cluster.running_bootstrap()
    if bootstrap is None:
        print("devstack: the kafka cluster is not running; fix: python -m sparkbarrier.devstack cluster up",
              file=sys.stderr)
        return EXIT_NOT_RUNNING
    print(cluster.exports(bootstrap), end="")
    return 0


def _run_hdfs(args: argparse.Namespace) -> int:
    """``hdfs up`` and ``hdfs env`` print the export lines (SPARKBARRIER_HDFS and
    SPARKBARRIER_WEBHDFS); ``status`` prints one row per daemon (exit 3 unless both run)."""
    ports = {p: v for p in HdfsPort if (v := getattr(args, p.key, None)) is not None}
    hdfs = Hdfs(args.home, ports=ports, start_timeout_s=args.timeout)
    if args.action == "down":
        stopped = hdfs.down()
        print("stopped: " + (", ".join(stopped) if stopped else "nothing was running"), file=sys.stderr)
        return 0
    if args.action == "status":
        status = hdfs.status()
        print(f"devstack home: {status.home}")
        for p in status.processes:
            state = "up" if p.alive and p.serving else ("alive, not serving" if p.alive else "down")
            ports_text = " ".join(f"{k}={v}" for k, v in p.ports.items()) or "-"
            print(f"  {p.name:<13} {state:<19} pid={p.pid if p.pid is not None else '-':<8} {ports_text}  log={p.log}")
        return 0 if status.running else EXIT_NOT_RUNNING
    if args.action == "up":
        started = time.monotonic()
        endpoints = hdfs.up(fresh=args.fresh)
        logging.getLogger(__name__).info("hdfs up in %.1fs", time.monotonic() - started)
    else:
        running = hdfs.endpoints()
        if running is None:
            print("devstack: hdfs is not running; fix: python -m sparkbarrier.devstack hdfs up", file=sys.stderr)
            return EXIT_NOT_RUNNING
        endpoints = running
    print(endpoints.exports(), end="")
    return 0


def _print_status(status: StackStatus) -> None:
    print(f"devstack home: {status.home}")
    for p in status.processes:
        state = "up" if p.alive and p.serving else ("alive, not serving" if p.alive else "down")
        if p.optional and p.pid is None:
            state = "off (up --all)"
        pid = p.pid if p.pid is not None else "-"
        ports = " ".join(f"{k}={v}" for k, v in p.ports.items()) or "-"
        print(f"  {p.name:<18} {state:<19} pid={pid:<8} {ports}  log={p.log}")
    if status.endpoints is not None:
        print(status.endpoints.exports(), end="")


def _run(args: argparse.Namespace) -> int:
    if args.command == "kdc":
        return _run_kdc(args)
    if args.command == "kerberos":
        return _run_kerberos(args)
    if args.command == "cluster":
        return _run_cluster(args)
    if args.command == "hdfs":
        return _run_hdfs(args)
    if args.command == "up":
        ports = {p: v for p in Port if (v := getattr(args, p.key, None)) is not None}
        stack = Devstack(args.home, ports=ports, start_timeout_s=args.timeout)
        started = time.monotonic()
        endpoints = stack.up(all_gateways=args.all_gateways)
        logging.getLogger(__name__).info("up in %.1fs", time.monotonic() - started)
        print(endpoints.exports(), end="")
        return 0
    stack = Devstack(args.home)
    if args.command == "down":
        stopped = stack.down()
        print("stopped: " + (", ".join(stopped) if stopped else "nothing was running"),
              file=sys.stderr)
        return 0
    if args.command == "status":
        status = stack.status()
        _print_status(status)
        return 0 if status.running else EXIT_NOT_RUNNING
    running = stack.endpoints()
    if running is None:
        print("devstack: not running; fix: python -m sparkbarrier.devstack up", file=sys.stderr)
        return EXIT_NOT_RUNNING
    print(running.exports(), end="")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(stream=sys.stderr, format="devstack: %(message)s",
                        level=logging.DEBUG if args.verbose else logging.INFO)
    # kafka-python logs every refused connection while the broker boots.
    logging.getLogger("kafka").setLevel(logging.DEBUG if args.verbose else logging.CRITICAL)
    try:
        return _run(args)
    except DevstackError as exc:
        if exc.log_tail:
            print(f"--- last lines of {exc.log_path} ---\n{exc.log_tail}\n---", file=sys.stderr)
        print(f"devstack: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("devstack: interrupted; fix: run `python -m sparkbarrier.devstack status`",
              file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
