"""Row-key range arithmetic for region-parallel scans (pure, no servers)."""

from __future__ import annotations

from sparkbarrier.connectors.hbase.read._key_ranges import FULL, intersect, point, prefix, split_by_regions


def test_point_and_prefix_ranges() -> None:
    assert point(b"k") == (b"k", b"k\x00")
    assert prefix(b"ab") == (b"ab", b"ac")
    assert prefix(b"a\xff") == (b"a\xff", b"b")
    assert prefix(b"\xff") == (b"\xff", b"")


def test_intersections_respect_open_ends() -> None:
    assert intersect([FULL], [(b"b", b"d")]) == [(b"b", b"d")]
    assert intersect([(b"a", b"")], [(b"", b"c")]) == [(b"a", b"c")]
    assert intersect([(b"a", b"b")], [(b"c", b"")]) == []


def test_ranges_are_cut_at_region_boundaries() -> None:
    regions = [(b"", b"g"), (b"g", b"p"), (b"p", b"")]
    assert split_by_regions([FULL], regions) == regions
    assert split_by_regions([(b"e", b"h"), point(b"z")], regions) == [
        (b"e", b"g"), (b"g", b"h"), (b"z", b"z\x00")]
