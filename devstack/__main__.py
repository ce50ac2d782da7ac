"""``python -m sparkbarrier.devstack up | down | status | env``.

stdout carries only machine-usable output (``export`` lines, the status table);
progress goes to stderr. Any ``DevstackError`` ends as ONE line on stderr
(``devstack: <cause>; fix: <fix>``), preceded by the failing server's log tail.

Exit codes: 0 ok · 1 error · 2 usage · 3 (``status``/``env``) not running.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from collections.abc import Sequence

from .._exceptions import DevstackError
from ._config import Port
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
    up = sub.add_parser("up", help="start (idempotent) and print export lines")
    for port in Port:
        up.add_argument(port.flag, type=int, dest=port.key, metavar="N",
                        help=f"{port.key} port (default {port.default}, env {port.env})")
    up.add_argument("--timeout", type=float, default=240.0,
                    help="seconds allowed for the servers to start (default 240)")
    sub.add_parser("down", help="stop this stack's servers")
    sub.add_parser("status", help="show processes; exit 3 if not all run")
    sub.add_parser("env", help="print export lines of the running stack; exit 3 if not running")
    return parser


def _print_status(status: StackStatus) -> None:
    print(f"devstack home: {status.home}")
    for p in status.processes:
        state = "up" if p.alive and p.serving else ("alive, not serving" if p.alive else "down")
        pid = p.pid if p.pid is not None else "-"
        ports = " ".join(f"{k}={v}" for k, v in p.ports.items()) or "-"
        print(f"  {p.name:<13} {state:<19} pid={pid:<8} {ports}  log={p.log}")
    if status.endpoints is not None:
        print(status.endpoints.exports(), end="")


def _run(args: argparse.Namespace) -> int:
    if args.command == "up":
        ports = {p: getattr(args, p.key) for p in Port if getattr(args, p.key) is not None}
        stack = Devstack(args.home, ports=ports, start_timeout_s=args.timeout)
        started = time.monotonic()
        endpoints = stack.up()
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
    endpoints = stack.endpoints()
    if endpoints is None:
        print("devstack: not running; fix: python -m sparkbarrier.devstack up", file=sys.stderr)
        return EXIT_NOT_RUNNING
    print(endpoints.exports(), end="")
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
