"""A tiny CPU training loop instrumented with gpuscope.

Trains a small MLP on synthetic data with a loss whose components switch on in phases (as
phased trainings do), records where memory goes every 25 iterations with
``gpuscope.MemoryProfiler``, and logs a few extras through ``gpuscope.EventWriter``.
``--leak`` keeps every output with its autograd graph alive — the classic leak — so the
records show activations growing. It also times the forward and backward passes, records
gradient norms (with the update/weight ratio) and checks every step for NaN/Inf. ``--profiling.<key> VALUE`` switches (a training config's ``profiling:`` section, e.g.
``--profiling.wait 50 --profiling.active 3``) run torch.profiler on that schedule, one step
per iteration, and print gpuscope's summary of each trace. It writes into ``$GPUSCOPE_RUN_DIR`` (default
``runs/tiny``); ``make demo`` runs it twice and reads the results back.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import gpuscope
import torch
from torch import nn

ITERATIONS = 300
ENTROPY_FROM, SMOOTHNESS_FROM = 100, 200


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--leak", action="store_true", help="keep outputs and their graphs")
    gpuscope.add_argparse_flags(parser)
    args, rest = parser.parse_known_args()
    profiling = gpuscope.ProfilingConfig.from_args(rest)
    unknown = [a for a in rest if not a.startswith("--profiling.")]
    if unknown and not profiling.enabled:
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    run_dir = Path(args.profile_dir or os.environ.get("GPUSCOPE_RUN_DIR", "runs/tiny"))

    torch.manual_seed(0)
    x = torch.randn(512, 16)
    y = (x[:, :4].sum(dim=1, keepdim=True)).tanh()
    model = nn.Sequential(nn.Linear(16, 256), nn.ReLU(), nn.Linear(256, 1))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    kept: list[torch.Tensor] = []

    scope = gpuscope.MemoryProfiler(
        run_dir, model=model, optimizer=optimizer, every=25, update_ratio=True
    )
    with (
        scope,
        gpuscope.EventWriter(run_dir / "tensorboard") as tb,
        gpuscope.profile(run_dir, profiling) as prof,
    ):
        tb.add_text("run", f"tiny MLP, {ITERATIONS} iterations, Adam lr=1e-2, leak={args.leak}")
        for it in range(ITERATIONS):
            batch = torch.randint(0, len(x), (64,))
            with scope.section("forward"):
                out = model(x[batch])
            parts = {"rendering": nn.functional.mse_loss(out, y[batch])}
            if it >= ENTROPY_FROM:
                p = out.sigmoid()
                entropy = -(p * p.log() + (1 - p) * (1 - p).log()).mean()
                parts["entropy_regularization"] = 1e-3 * entropy
            if it >= SMOOTHNESS_FROM:
                parts["smoothness"] = 1e-4 * sum(w.pow(2).sum() for w in model.parameters())
            loss = sum(parts.values())
            optimizer.zero_grad(set_to_none=True)
            with scope.section("backward"):
                loss.backward()
            scope.record_gradients(it, clip_max_norm=1.0)
            if scope.check_finite(it, losses=parts, loss=loss):
                optimizer.step()
            if args.leak:
                kept.append(model(x))  # the bug: an output and its whole graph, every step
            scope.step(it, losses=parts)
            prof.step()
        tb.add_histogram("weights/first_layer", model[0].weight, ITERATIONS)
        scope.print_summary()
    print(f"wrote {run_dir}")


if __name__ == "__main__":
    main()
