"""Cost of Kerberos (SASL/GSSAPI) on the HBase Thrift path: rows/s at each qop vs a plain gateway.

Side by side in one run: N rows of 10 columns (~30 B values) put in batches of 1,000 with
happybase through ``HBaseConnection`` (the sink's connection class), against

* ``plain``      -- the shared devstack's plain Thrift1 gateway (another HBase instance on the same machine);
* ``auth``       -- the Kerberized HBase's Thrift1 gateway, qop auth (login only);
* ``auth-int``   -- same HBase, gateway at qop auth-int (every frame signed);
* ``auth-conf``  -- same HBase, gateway at qop auth-conf (every frame sealed).

Also the client's CPU seconds per 100k rows (this process, ``os.times``): the part of the cost
the Spark Python workers pay. Starts a KDC and the Kerberized HBase in a throw-away home
(stopped at the end); needs the devstack up for the plain baseline.

    python benchmarks/bench_hbase_kerberos.py --rows 100000 --rounds 2
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
import uuid

from sparkbarrier.connectors.hbase import KerberosSettings
from sparkbarrier.connectors.hbase.client._connection import HBaseConnection, connection_options


def _write(conn: HBaseConnection, rows: int) -> tuple[float, float]:
    table = f"bench_krb_{uuid.uuid4().hex[:8]}"
    conn.call(lambda c: c.create_table(table, {"d": {}}))
    try:
        values = {f"d:c{i}".encode(): f"value-{i:02d}-0123456789abcdef".encode() for i in range(10)}
        cpu0, t0 = sum(os.times()[:2]), time.perf_counter()

        def put(start: int) -> None:
            with conn.connection.table(table).batch() as batch:
                for r in range(start, min(start + 1000, rows)):
                    batch.put(f"row-{r:09d}".encode(), values)

        for start in range(0, rows, 1000):
            conn.call(lambda c, s=start: put(s))
        return time.perf_counter() - t0, sum(os.times()[:2]) - cpu0
    finally:
        conn.call(lambda c: c.delete_table(table, disable=True))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    home = tempfile.mkdtemp(prefix="sparkbarrier-bench-krb-")
    os.environ["KRB5_CONFIG"] = os.path.join(home, "data", "kdc", "krb5.conf")
    os.environ["KRB5CCNAME"] = f"FILE:{home}/unused.ccache"
    from sparkbarrier.devstack import Devstack, Kdc
    from sparkbarrier.devstack._hbase_kerberos import KerberosHBase

    plain = Devstack().up().hbase_thrift
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPARKBARRIER_DEVSTACK_")}
    kdc = Kdc(home, environ=env)
    manifest = kdc.up()
    hbase = KerberosHBase(home, manifest, environ=env)
    try:
        endpoints = hbase.up()
        principal, keytab = manifest.keytab("client")
        krb = KerberosSettings(principal=principal, keytab=keytab)
        targets = {"plain": (plain, None), "auth": (endpoints.thrift, krb),
                   "auth-int": (endpoints.thrift_int, krb), "auth-conf": (endpoints.thrift_conf, krb)}
        results: dict[str, list[tuple[float, float]]] = {name: [] for name in targets}
        for _ in range(args.rounds):
            for name, ((host, port), settings) in targets.items():
                conn = HBaseConnection(connection_options({"hbase.thrift.timeout": "60000"}, host=host, port=port,
                                                           kerberos=settings))
                try:
                    results[name].append(_write(conn, args.rows))
                finally:
                    conn.close()
        base = [args.rows / wall for wall, _ in results["plain"]]
        print(f"{args.rows} rows x 10 columns, batches of 1000, {args.rounds} round(s)")
        print("| gateway | rows/s per round | ÷ plain | client CPU-s per 100k rows |")
        print("| --- | ---: | ---: | ---: |")
        for name, runs in results.items():
            rates = [args.rows / wall for wall, _ in runs]
            ratio = " / ".join(f"{r / b:.2f}×" for r, b in zip(rates, base))
            cpu = " / ".join(f"{c * 100_000 / args.rows:.2f}" for _, c in runs)
            print(f"| {name} | {' / '.join(f'{r:,.0f}' for r in rates)} | {ratio} | {cpu} |")
    finally:
        hbase.down()
        kdc.down()


if __name__ == "__main__":
    main()
