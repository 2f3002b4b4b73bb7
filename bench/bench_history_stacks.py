#!/usr/bin/env python
"""What the allocator history that ``snapshot_at=`` and ``oom_guard`` turn on costs, with
torch's default stacks (``"all"``: Python and C++ frames, what gpuscope records today)
against Python frames only (``"python"``), on a CUDA device (issue #26).

Two costs, each measured apart:

- **at record**: ms per iteration of a training loop with the history on, against the
  same loop without it (interleaved rounds, the order rotating, a synchronisation at
  both ends of each timed stretch);
- **at dump**: after each timed stretch, ``torch.cuda.memory._snapshot()`` (where torch
  turns the recorded frames into names: C++ symbolisation is reported to take minutes on
  large programs) and the pickle written, timed apart, with the pickle's size and the
  number of history entries it holds.

The history uses gpuscope's own entry cap (``gpuscope.memory.snapshots.HISTORY_ENTRIES``)
and torch's default ``context="all"``, as ``start_history`` does. The model is a
decoder-style transformer LM under bf16 autocast with AdamW (``--size big``: GPU-bound on
an H200; ``small``: launch-bound). Prints a table and one JSON line (``HISTORY {...}``).
Needs CUDA: without it, says so in one line and exits with 2. Not a test: nothing
asserts on time.
"""

from __future__ import annotations

import argparse
import json
import pickle
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# size -> (vocabulary, width, layers, heads, tokens, batch)
SIZES = {
    "small": (8192, 768, 6, 12, 256, 8),
    "big": (8192, 2048, 12, 16, 1024, 16),
}
VARIANTS: dict[str, str | None] = {
    "no history": None,
    "stacks python": "python",
    "stacks all (today)": "all",
}


def build(size: str) -> tuple[Any, Any, Any, int]:
    import torch
    from torch import nn

    vocab, width, layers, heads, tokens, batch = SIZES[size]
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(width, heads, 4 * width, batch_first=True, norm_first=True)
    model = nn.Sequential(
        nn.Embedding(vocab, width),
        nn.TransformerEncoder(layer, layers, enable_nested_tensor=False),
        nn.Linear(width, vocab, bias=False),
    ).cuda()
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
    data = torch.randint(0, vocab, (256, tokens + 1), device="cuda")
    return model, optimizer, data, batch


def iterations(model: Any, optimizer: Any, data: Any, batch: int, n: int) -> None:
    import torch
    from torch import nn

    vocab = model[-1].out_features
    for _ in range(n):
        rows = data[torch.randint(0, data.shape[0], (batch,), device="cuda")]
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(rows[:, :-1])
        loss = nn.functional.cross_entropy(logits.float().view(-1, vocab), rows[:, 1:].reshape(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()


def one_round(
    stacks: str | None, model: Any, optimizer: Any, data: Any, batch: int, n: int, out: Path
) -> dict[str, float]:
    """A timed stretch of ``n`` iterations with the history as ``stacks`` says, then the
    dump, timed apart."""
    import torch
    from gpuscope.memory.snapshots import HISTORY_ENTRIES

    if stacks is not None:
        torch.cuda.memory._record_memory_history(
            max_entries=HISTORY_ENTRIES, stacks=stacks, clear_history=True
        )
    try:
        torch.cuda.synchronize()
        start = time.perf_counter()
        iterations(model, optimizer, data, batch, n)
        torch.cuda.synchronize()
        row = {"ms_per_iter": (time.perf_counter() - start) / n * 1000}
        if stacks is not None:
            start = time.perf_counter()
            snapshot = torch.cuda.memory._snapshot()
            row["snapshot_s"] = time.perf_counter() - start
            start = time.perf_counter()
            with open(out, "wb") as f:
                pickle.dump(snapshot, f)
            row["write_s"] = time.perf_counter() - start
            row["pickle_mb"] = out.stat().st_size / 2**20
            row["entries"] = sum(len(t) for t in snapshot.get("device_traces", []))
            out.unlink()
        return row
    finally:
        if stacks is not None:
            torch.cuda.memory._record_memory_history(enabled=None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", choices=sorted(SIZES), default="big")
    parser.add_argument("--iterations", type=int, default=40, help="per timed stretch")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    import torch

    if not torch.cuda.is_available():
        print("bench_history_stacks: needs a CUDA device (the allocator history is CUDA's)")
        sys.exit(2)
    model, optimizer, data, batch = build(args.size)
    iterations(model, optimizer, data, batch, 3)  # warm-up: kernels chosen, state allocated
    rows: dict[str, list[dict[str, float]]] = {name: [] for name in VARIANTS}
    names = list(VARIANTS)
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            for name in names[r % len(names) :] + names[: r % len(names)]:
                out = Path(tmp) / "snapshot.pickle"
                row = one_round(VARIANTS[name], model, optimizer, data, batch, args.iterations, out)
                rows[name].append(row)
                print(f"round {r + 1} {name}: {json.dumps(row)}", flush=True)

    def median(name: str, key: str) -> float:
        return statistics.median(row[key] for row in rows[name])

    base = median("no history", "ms_per_iter")
    print(
        f"\n{torch.cuda.get_device_name()}, torch {torch.__version__}, --size {args.size}, "
        f"{args.iterations} iterations x {args.rounds} rounds (medians of rounds)\n"
    )
    print(
        f"{'variant':<20} {'ms/iter':>8} {'x none':>7} {'snapshot s':>11} {'write s':>8} {'MB':>7} {'entries':>8}"
    )
    summary: dict[str, Any] = {"device": torch.cuda.get_device_name(), "torch": torch.__version__}
    for name, stacks in VARIANTS.items():
        ms = median(name, "ms_per_iter")
        line = f"{name:<20} {ms:>8.1f} {ms / base:>7.3f}"
        entry: dict[str, Any] = {"ms_per_iter": ms, "ratio": ms / base}
        if stacks is not None:
            for key in ("snapshot_s", "write_s", "pickle_mb", "entries"):
                entry[key] = median(name, key)
            line += (
                f" {entry['snapshot_s']:>11.2f} {entry['write_s']:>8.2f}"
                f" {entry['pickle_mb']:>7.1f} {entry['entries']:>8.0f}"
            )
        print(line)
        summary[name] = entry
    print("HISTORY " + json.dumps(summary))


if __name__ == "__main__":
    main()
