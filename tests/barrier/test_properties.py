"""Property tests: random interleavings over N channels keep the protocol's promises.

Each channel's script is: data batches, then for each checkpoint id in order a
barrier, a cancel or nothing, more data, and finally EndOfPartition. A random
permutation of all channels' elements (keeping each channel's order) is fed to
an InputProcessor.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sparkbarrier.barrier import (
    CancelCheckpointMarker,
    CheckpointBarrier,
    DeliveryGuarantee,
    EndOfPartition,
    InitializationContext,
    InputProcessor,
)

FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@dataclass
class Scenario:
    scripts: list[list[object]]  # per channel, in channel order
    order: list[int]  # which channel's next element to feed
    limit: int | None

    def elements(self):
        cursors = [0] * len(self.scripts)
        for ch in self.order:
            yield ch, self.scripts[ch][cursors[ch]]
            cursors[ch] += 1


@st.composite
def scenarios(draw, *, cancels: bool, skips: bool, limits: bool) -> Scenario:
    n_channels = draw(st.integers(1, 4))
    n_checkpoints = draw(st.integers(0, 5))
    kinds = ["b", "b", "b"] + (["c"] if cancels else []) + (["skip"] if skips else [])
    scripts: list[list[object]] = []
    for ch in range(n_channels):
        script: list[object] = []
        seq = 0

        def add_data() -> None:
            nonlocal seq
            for _ in range(draw(st.integers(0, 2))):
                n = draw(st.integers(1, 3))
                values = [ch * 100_000 + seq + i for i in range(n)]
                seq += n
                script.append(pa.RecordBatch.from_pydict({"v": pa.array(values, pa.int64())}))

        for cid in range(1, n_checkpoints + 1):
            add_data()
            kind = draw(st.sampled_from(kinds))
            if kind == "b":
                script.append(CheckpointBarrier(cid, cid))
            elif kind == "c":
                script.append(CancelCheckpointMarker(cid))
        add_data()
        script.append(EndOfPartition(str(ch)))
        scripts.append(script)
    order = draw(st.permutations([ch for ch, s in enumerate(scripts) for _ in s]))
    limit = draw(st.one_of(st.none(), st.integers(0, 80))) if limits else None
    return Scenario(scripts, list(order), limit)


@dataclass
class Observer:
    """Function + downstream recording what was delivered and what each snapshot saw."""

    n_channels: int
    delivered: list[list[int]] = field(init=False)
    snapshots: list[tuple[int, list[list[int]]]] = field(default_factory=list)
    aborted: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.delivered = [[] for _ in range(self.n_channels)]

    def initialize_state(self, context: InitializationContext) -> None:
        pass

    def snapshot_state(self, checkpoint_id: int) -> None:
        self.snapshots.append((checkpoint_id, [list(d) for d in self.delivered]))

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        pass

    def notify_checkpoint_aborted(self, checkpoint_id: int) -> None:
        self.aborted.append(checkpoint_id)

    def downstream(self, channel: int, batch: pa.RecordBatch) -> None:
        self.delivered[channel].extend(batch.column("v").to_pylist())


def values(script: list[object]) -> list[int]:
    return [v for e in script if isinstance(e, pa.RecordBatch) for v in e.column("v").to_pylist()]


def values_before(script: list[object], checkpoint_id: int) -> list[int] | None:
    """Records preceding barrier ``checkpoint_id`` on this channel, None if it has none."""
    out: list[int] = []
    for e in script:
        if isinstance(e, CheckpointBarrier) and e.checkpoint_id == checkpoint_id:
            return out
        if isinstance(e, pa.RecordBatch):
            out.extend(e.column("v").to_pylist())
    return None


def run(sc: Scenario, mode: DeliveryGuarantee) -> Observer:
    obs = Observer(len(sc.scripts))
    proc = InputProcessor(
        list(range(len(sc.scripts))), obs, obs.downstream, guarantee=mode, max_buffered_bytes=sc.limit
    )
    for ch, element in sc.elements():
        proc.process(ch, element)
    assert proc.buffered_bytes == 0
    return obs


def check_exactly_once(sc: Scenario, obs: Observer) -> None:
    # (a)+(d): every record delivered exactly once, per-channel order preserved,
    # whatever aborted alignments (limit, cancel, subsumption, end of stream) did.
    assert obs.delivered == [values(s) for s in sc.scripts]
    ids = [cid for cid, _ in obs.snapshots]
    assert ids == sorted(set(ids)), "snapshots fire once each, in increasing order"
    assert not set(ids) & set(obs.aborted), "a checkpoint is either snapshotted or aborted"
    for cid, seen in obs.snapshots:
        for ch, script in enumerate(sc.scripts):
            before = values_before(script, cid)
            if before is None:
                # (c): a channel without barrier n can only be missing because it ended.
                assert seen[ch] == values(script), f"snapshot {cid} fired before channel {ch} ended"
            else:
                # (b)+(c): exactly the records before barrier n -- no later record leaked in.
                assert seen[ch] == before, f"snapshot {cid} saw a wrong cut of channel {ch}"


@FAST
@given(scenarios(cancels=True, skips=True, limits=False))
def test_exactly_once_snapshot_sees_exactly_the_records_before_its_barriers(sc):
    check_exactly_once(sc, run(sc, DeliveryGuarantee.EXACTLY_ONCE))


@FAST
@given(scenarios(cancels=True, skips=True, limits=True))
def test_exactly_once_byte_limit_loses_and_duplicates_nothing(sc):
    check_exactly_once(sc, run(sc, DeliveryGuarantee.EXACTLY_ONCE))


@FAST
@given(scenarios(cancels=False, skips=False, limits=False))
def test_exactly_once_every_checkpoint_fires_when_all_channels_deliver_it(sc):
    obs = run(sc, DeliveryGuarantee.EXACTLY_ONCE)
    check_exactly_once(sc, obs)
    n_checkpoints = sum(isinstance(e, CheckpointBarrier) for e in sc.scripts[0])
    assert [cid for cid, _ in obs.snapshots] == list(range(1, n_checkpoints + 1))
    assert obs.aborted == []


@FAST
@given(scenarios(cancels=True, skips=True, limits=False))
def test_at_least_once_delivers_in_arrival_order_without_buffering(sc):
    obs = run(sc, DeliveryGuarantee.AT_LEAST_ONCE)
    assert obs.delivered == [values(s) for s in sc.scripts]
    ids = [cid for cid, _ in obs.snapshots]
    assert ids == sorted(set(ids))
    for cid, seen in obs.snapshots:
        for ch, script in enumerate(sc.scripts):
            before = values_before(script, cid)
            # at least once: the snapshot covers at least everything before barrier n
            expected = values(script) if before is None else before
            assert seen[ch][: len(expected)] == expected


@st.composite
def cut_scenarios(draw, *, limits: bool) -> tuple[Scenario, Scenario]:
    """A scenario and the same scenario cut after a random prefix of its feed order."""
    sc = draw(scenarios(cancels=True, skips=True, limits=limits))
    cut = draw(st.integers(0, len(sc.order)))
    fed = [0] * len(sc.scripts)
    for ch in sc.order[:cut]:
        fed[ch] += 1
    return sc, Scenario([s[:n] for s, n in zip(sc.scripts, fed)], sc.order[:cut], sc.limit)


def marker_ids(script: list[object]) -> list[int]:
    return [e.checkpoint_id for e in script if isinstance(e, (CheckpointBarrier, CancelCheckpointMarker))]


@FAST
@given(cut_scenarios(limits=True))
def test_exactly_once_end_of_input_releases_everything_and_settles_every_checkpoint(pair):
    _, cut = pair
    obs = Observer(len(cut.scripts))
    proc = InputProcessor(
        list(range(len(cut.scripts))), obs, obs.downstream, max_buffered_bytes=cut.limit
    )
    for ch, element in cut.elements():
        proc.process(ch, element)
    proc.end_of_input()
    # Everything fed is delivered once, in per-channel order; snapshot cuts stay exact.
    check_exactly_once(cut, obs)
    assert proc.buffered_bytes == 0 and not proc.handler.aligning
    # Nothing is left pending: the newest checkpoint any marker named was either
    # snapshotted or declined, and no checkpoint was notified twice.
    notified = [cid for cid, _ in obs.snapshots] + obs.aborted
    assert len(notified) == len(set(notified))
    ids = [cid for s in cut.scripts for cid in marker_ids(s)]
    if ids:
        assert max(ids) in notified
