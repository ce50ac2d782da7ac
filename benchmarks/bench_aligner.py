"""Throughput of the exactly-once input path vs. a plain pass-through.

Feeds N channels of Arrow batches whose marker rows (barriers) sit every K
records through ``InputProcessor.process_batch`` (split at markers, aligned,
buffered, replayed), round-robin one batch per channel at a time, and compares
records/s with handing the very same batches straight to the downstream
callable (pass-through) and with only splitting them at markers (split-only),
so the cost of alignment itself is visible. "ratio" is pipeline/pass-through
throughput, "vs split" pipeline/split-only; "us/marker" charges all overhead
over pass-through to the markers. Run:
``python benchmarks/bench_aligner.py [--records N] [--every K ...]``.
"""

from __future__ import annotations

import argparse
import logging
import time

import pyarrow as pa

from sparkbarrier.barrier import (
    CheckpointBarrier,
    DeliveryGuarantee,
    InitializationContext,
    InputProcessor,
    marker_batch,
    split_markers,
    with_marker_columns,
)

DATA = pa.schema([pa.field("offset", pa.int64()), pa.field("value", pa.binary())])
STREAM = with_marker_columns(DATA)


class NullFunction:
    def __init__(self) -> None:
        self.snapshots = 0

    def initialize_state(self, context: InitializationContext) -> None:
        pass

    def snapshot_state(self, checkpoint_id: int) -> None:
        self.snapshots += 1

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        pass

    def notify_checkpoint_aborted(self, checkpoint_id: int) -> None:
        pass


def data_rows(start: int, n: int) -> pa.RecordBatch:
    offsets = pa.array(range(start, start + n), pa.int64())
    values = pa.array([b"0123456789abcdef0123456789abcdef"] * n, pa.binary())
    nulls = [pa.nulls(n, f.type) for f in list(STREAM)[2:]]
    return pa.RecordBatch.from_arrays([offsets, values, *nulls], schema=STREAM)


def channel_batches(records: int, every: int, batch_rows: int, channel: str) -> list[pa.RecordBatch]:
    """``records`` data rows cut into batches of ~``batch_rows``, a barrier after every ``every``."""
    parts: list[pa.RecordBatch] = []
    done, cid = 0, 0
    while done < records:
        n = min(every, records - done)
        parts.append(data_rows(done, n))
        done += n
        if n == every:
            cid += 1
            parts.append(marker_batch([CheckpointBarrier(cid, cid, channel, done)], STREAM))
    table = pa.Table.from_batches(parts).combine_chunks()
    return table.to_batches(max_chunksize=batch_rows)


def interleave(per_channel: list[list[pa.RecordBatch]]) -> list[tuple[int, pa.RecordBatch]]:
    out = []
    for i in range(max(len(b) for b in per_channel)):
        for ch, batches in enumerate(per_channel):
            if i < len(batches):
                out.append((ch, batches[i]))
    return out


def best_of(repeats: int, fn) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=500_000, help="data records per channel")
    parser.add_argument("--channels", type=int, default=4)
    parser.add_argument("--batch-rows", type=int, default=8192)
    parser.add_argument("--every", type=int, nargs="*", default=[100, 1_000, 10_000, 100_000])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    logging.basicConfig(level=logging.ERROR)  # the tracker warns when >50 checkpoints are in flight
    total = args.records * args.channels
    print(f"{args.channels} channels x {args.records:,} records, batches of {args.batch_rows} rows, "
          f"round-robin, best of {args.repeats}")
    print(f"{'K':>8} {'mode':>14} {'pipeline rec/s':>15} {'split-only rec/s':>17} "
          f"{'pass-through rec/s':>19} {'ratio':>7} {'vs split':>8} {'us/marker':>9} {'snapshots':>9}")
    for every in args.every:
        feed = interleave([channel_batches(args.records, every, args.batch_rows, f"t:{c}")
                           for c in range(args.channels)])
        n_markers = (args.records // every) * args.channels
        sink = [0]

        def count(channel: object, batch: pa.RecordBatch) -> None:
            sink[0] += batch.num_rows

        def passthrough() -> None:
            for ch, batch in feed:
                count(ch, batch)

        def split_only() -> None:
            for ch, batch in feed:
                for part in split_markers(batch):
                    if isinstance(part, pa.RecordBatch):
                        count(ch, part)

        t_plain = best_of(args.repeats, passthrough)
        t_split = best_of(args.repeats, split_only)
        for mode in (DeliveryGuarantee.EXACTLY_ONCE, DeliveryGuarantee.AT_LEAST_ONCE):
            fn = NullFunction()

            def pipeline() -> None:
                fn.snapshots = 0
                sink[0] = 0
                proc = InputProcessor(list(range(args.channels)), fn, count, guarantee=mode)
                for ch, batch in feed:
                    proc.process_batch(ch, batch)
                assert sink[0] == total, (sink[0], total)

            t_pipe = best_of(args.repeats, pipeline)
            per_marker = (t_pipe - t_plain) / n_markers * 1e6 if n_markers else float("nan")
            print(f"{every:>8,} {mode.value:>14} {total / t_pipe:>15,.0f} {total / t_split:>17,.0f} "
                  f"{total / t_plain:>19,.0f} {t_plain / t_pipe:>7.4f} {t_split / t_pipe:>8.3f} "
                  f"{per_marker:>9.1f} {fn.snapshots:>9}")


if __name__ == "__main__":
    main()
