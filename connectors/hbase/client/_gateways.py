"""Which Thrift gateways a connection may use, and in which order (pure; no I/O).

Why several: every row the sink writes or the reader reads passes through a Thrift
gateway, whose CPU (about 24 µs per row) caps a query served by one; production
clusters run one gateway per RegionServer. Gateways are stateless proxies of one HBase,
so any of them serves any call; the only per-gateway state is an open scanner.

Spreading is by partition: task or read partition ``i`` starts at gateway ``i mod n``
and fails over to ``i+1, i+2, ...`` (mod n). It is deterministic (no random choice, so a
retried task goes where its first attempt went while that gateway lives) and even
(``k·n`` partitions put ``k`` on each gateway).
"""

from __future__ import annotations

from dataclasses import dataclass

from ...._exceptions import ConfigError

__all__ = ["Gateway", "describe", "parse_gateways", "spread"]


@dataclass(frozen=True)
class Gateway:
    """One Thrift server endpoint."""

    host: str
    port: int

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


def parse_gateways(raw: str, default_port: int | None, option: str = "hbase.thrift.host") -> tuple[Gateway, ...]:
    """``"h1:9090, h2"`` → gateways; an entry without a port takes ``default_port``.

    An IPv6 address with a port is bracketed (``[::1]:9090``); the brackets are dropped
    from the host (sockets want the bare address) and put back when it is printed. Duplicates
    are an error: they would skew the spreading.
    """
    out: list[Gateway] = []
    for item in (part.strip() for part in raw.split(",")):
        if not item:
            continue
        host, sep, port = item.rpartition(":")
        if sep and not host.endswith("]") and ":" in host:  # unbracketed IPv6: no port given
            host, sep, port = item, "", ""
        if not sep:
            host, port = item, ""
        if not port:
            if default_port is None:
                raise ConfigError(f"option {option!r}: {item!r} has no port and no default port is set",
                                  option=option)
            out.append(Gateway(host.strip("[]"), default_port))
            continue
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ConfigError(f"option {option!r} entries look like host or host:port, got {item!r}",
                              option=option)
        out.append(Gateway(host.strip("[]"), int(port)))
    if not out:
        raise ConfigError(f"option {option!r} must name at least one gateway", option=option)
    if len(set(out)) != len(out):
        raise ConfigError(f"option {option!r} names a gateway twice: {raw!r}", option=option)
    return tuple(out)


def spread(gateways: tuple[Gateway, ...], index: int) -> tuple[Gateway, ...]:
    """The failover order of partition ``index``: starts at ``index mod n``, then the next ones."""
    n = len(gateways)
    start = index % n
    return gateways[start:] + gateways[:start]


def describe(gateways: tuple[Gateway, ...]) -> str:
    return ", ".join(str(g) for g in gateways)
