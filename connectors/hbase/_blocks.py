"""Which timestamp block a write task writes in: the one its input had before, whatever its task id.

Why. ``_timestamps`` gives every write task of a batch its own block of milliseconds,
and a replay converges on what the first attempt wrote only if the same input lands in
the same block again. Spark's task id is a stable name for the input when the sink's
input partitions are planned the same way every time: barrier-kafka plans them in a
fixed order, a shuffle hashes keys. Spark's JVM Kafka source does not: after a driver
restart it may plan the same offset ranges in another order (about half the restarts
of the fault suite did). The replayed input then writes in another block, and the
first attempt's flushed cells stay beside the replay's: extra versions, and a flushed
intermediate value that can even stay the newest.

So a task names its block by *what it writes*: the fingerprint of its first flush (a
hash of the netted changes, a function of the input and of the deterministic flush
points). Before that flush goes out the task records a :class:`BlockClaim` in the
commit table with ``checkAndPut``; every block a first attempt wrote into is therefore
claimed before its first cell. A replay's task reads the claims with the attempt (the
same get, see ``_committer``), adopts the block of its fingerprint, and writes exactly
the cells the first attempt wrote. A retry of a task in the same plan keeps its block
whatever its rows' order (the plan fixed its input). A task whose input has no earlier
block writes above every block an earlier plan claimed, so whatever an earlier attempt
left sorts below it. Cost: one ``checkAndPut`` per write task and batch.

Adoption needs the fingerprint to name one input. Two inputs whose first flushes are
identical (same keys and values) but whose later flushes differ share it; a replay that
moved one of them into the other's block would leave, when that block is the higher one,
what the first attempt flushed after its first flush on top: a wrong value in plain and
committed reads. So a task adopts a block only when it is the *only* block that may hold
an earlier attempt's cells of its fingerprint: those are the blocks earlier plans
claimed under it and the blocks another task of this plan adopted under it (``adopted``
in the claim; that task may be a twin whose input never wrote, sitting in this input's
block). With exactly one, an earlier plan's, the task adopts it. Otherwise (two or more,
or one a twin of this plan adopted) it writes above all of them and above every earlier
plan's block, as a new input does: the earlier cells stay as older versions and every
value is exact. Between twins of one replay whoever claims first takes a unique match;
the others then see its adopted claim and go above.

Why that is enough: a claimed block keeps its fingerprint through the attempt (only a
task with the same fingerprint takes it over; new inputs take unclaimed blocks), so
when a replay decides, every block holding an earlier attempt's cells of its input
carries its fingerprint. It then either writes in the one such block (rewriting its
own cells, or a twin's first flush, which is the same cells) or above every such block,
where its final values cover whatever the earlier attempt left. Not covered: an input
whose first flush changed (limit 1 below) *and* whose old first flush was another
input's too, if that other input's replay adopted the block (behind a hash shuffle
tasks' keys are disjoint, so their first flushes never match); and limit 4.

Contract (executor, once per task, at its first flush; idempotent for a retry of the
same task). Limits, numbered as in docs/hbase-guarantees.md:

1. behind a shuffle the rows reach a task in another order on a replay; the fingerprint
   ignores order, but a first flush cut by the row limit may then hold other rows: no
   adoption, and the first attempt's cells stay as older versions of the same values
   (plain and committed reads exact; the version history shows them);
2. two inputs whose first flushes are identical are told apart within one planned
   batch; after a restart only the first of them to claim may adopt, and only when
   exactly one of them had claimed before; the others write above (extra versions,
   exact values);
3. when one Kafka partition is split over several tasks (``minPartitions``) and a key is
   in two splits of one batch, "the later split wins" can break on a replay: splits have
   distinct fingerprints, so nothing here is ambiguous, but a split that wrote before
   keeps its block while one that had not goes above (placing them needs the splits'
   offsets, which a writer does not see);
4. repeated restarts of one batch with many tasks (over ~170) can use every block up;
   the task then writes in its own block, with a warning.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterable, Mapping, Sequence

from ..._exceptions import ProtocolError
from ._commit_table import BlockClaim, check_and_put, read_cell
from ._connection import HBaseConnection
from ._timestamps import MAX_TASKS

__all__ = ["fingerprint", "claim_block"]

log = logging.getLogger(__name__)
_MAX_TRIES = 2 * MAX_TASKS


def fingerprint(changes: Iterable[tuple[bytes, bool, Iterable[bytes], Mapping[bytes, bytes]]]) -> str:
    """A hash of one flush's netted changes per key, in any order (a sum of per-key hashes).

    Every byte counts, values included: two tasks' first flushes often share their keys
    (a few devices spread over partitions), rarely every value. Order does not: behind a
    shuffle the same rows reach a task in another order on a replay. ~2 µs per netted
    row, first flush only.
    """
    total = 0
    for key, deleted, cell_deletes, puts in changes:
        parts = [len(key).to_bytes(4, "big"), key, b"D" if deleted else b"-"]
        for column in sorted(cell_deletes):
            parts += (b"d", len(column).to_bytes(4, "big"), column)
        for column, value in puts.items():
            parts += (b"p", len(column).to_bytes(4, "big"), column, len(value).to_bytes(4, "big"), value)
        total += int.from_bytes(hashlib.blake2b(b"".join(parts), digest_size=16).digest(), "big")
    return f"{total % (1 << 128):032x}"


def claim_block(conn: HBaseConnection, commit_table: str, sink_id: str, *, base_ms: int, fingerprint: str,
                plan: str, task: int, known: Mapping[int, bytes]) -> int:
    """The block this task writes in, claimed in the commit table before it writes anything.

    ``known`` are the claims read with the attempt (block -> bytes); a claim of another
    attempt (another ``base_ms``) counts as free. A lost ``checkAndPut`` race re-reads
    that one block and decides again.
    """
    current: dict[int, bytes | None] = dict(known)
    for _ in range(_MAX_TRIES):
        claims = _claims_of(current, base_ms)
        own = [c for c in claims.values() if c.plan == plan and c.task == task]
        if own:
            # A retry (or speculative copy) of this task in the same plan: the plan fixed
            # the task's input, whatever order its rows arrive in this time.
            return own[0].block
        # Blocks that may hold an earlier attempt's cells of this fingerprint.
        held = sorted(b for b, c in claims.items()
                      if c.fingerprint == fingerprint and (c.plan != plan or c.adopted))
        adopt = len(held) == 1 and claims[held[0]].plan != plan
        if adopt:
            block = held[0]  # its input (alone) wrote there under an earlier plan
            log.info("batch at base %d: task %d adopts timestamp block %d (its input wrote there before)",
                     base_ms, task, block)
        else:
            if held:
                log.info("batch at base %d: task %d writes above timestamp block(s) %s (its first flush is "
                         "another input's too; which one wrote there is unknown)", base_ms, task, held)
            block = _fresh_block(claims, plan, task, sink_id, below=held)
        claim = BlockClaim(base_ms, block, fingerprint, plan, task, adopted=adopt)
        if check_and_put(conn, commit_table, sink_id, BlockClaim.column(block), current.get(block),
                         claim.to_bytes()):
            return block
        current[block] = read_cell(conn, commit_table, sink_id, BlockClaim.column(block))  # lost a race
    raise ProtocolError(f"sink {sink_id!r}: task {task} could not claim a timestamp block after {_MAX_TRIES} "
                        "tries (other writers keep racing for the same blocks)")


def _claims_of(raw: Mapping[int, bytes | None], base_ms: int) -> dict[int, BlockClaim]:
    claims = {}
    for block, value in raw.items():
        if value:
            claim = BlockClaim.from_bytes(value)
            if claim.base_ms == base_ms:
                claims[block] = claim
    return claims


def _fresh_block(claims: Mapping[int, BlockClaim], plan: str, task: int, sink_id: str, *,
                 below: Sequence[int] = ()) -> int:
    """A block for an input that wrote nothing here before, whose first flush changed, or
    whose fingerprint is not unique (``below``: the blocks that may hold its cells).

    Above every block an earlier plan claimed and every block in ``below``, so whatever
    an earlier attempt left sorts below what this one writes; in partition order where
    possible (``minPartitions`` splits: the later split wins). On a first attempt that
    is the task's own block.
    """
    above = 1 + max([b for b, c in claims.items() if c.plan != plan] + list(below), default=-1)
    if above + task < MAX_TASKS and above + task not in claims:
        return above + task
    for block in range(above, MAX_TASKS):
        if block not in claims:
            return block
    # Repeated restarts of one batch with many tasks used every block up: write in the
    # task's own block, as before blocks followed the input. Exact for inputs that keep
    # their task id (a shuffle); an input that moved may leave an earlier attempt's cells.
    if task in claims and claims[task].plan == plan:
        raise ProtocolError(f"sink {sink_id!r}: every timestamp block of this batch is claimed after repeated "
                            f"restarts, task {task}'s own block too; coalesce() the stream before the sink")
    log.warning("sink %r: every timestamp block of this batch is claimed after repeated restarts; task %d writes "
                "in block %d, and the batch's version history may show an earlier attempt's cells", sink_id,
                task, task)
    return task
