"""A tiny CPU training loop that logs through gpuscope.

Trains a small regression MLP on synthetic data, with a loss made of components that
switch on in phases (as seed 001's trainer does), and writes them to TensorBoard through
gpuscope's EventWriter. Run it with ``make demo``; it writes into ``$GPUSCOPE_RUN_DIR``
(default ``runs/tiny``).
"""

from __future__ import annotations

import os
from pathlib import Path

import gpuscope
import torch
from torch import nn

ITERATIONS = 300
ENTROPY_FROM, SMOOTHNESS_FROM = 100, 200


def main() -> None:
    run_dir = Path(os.environ.get("GPUSCOPE_RUN_DIR", "runs/tiny"))
    torch.manual_seed(0)
    x = torch.randn(512, 16)
    y = (x[:, :4].sum(dim=1, keepdim=True)).tanh()
    model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 1))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)

    with gpuscope.EventWriter(run_dir / "tensorboard") as tb:
        tb.add_text("run", f"tiny MLP, {ITERATIONS} iterations, Adam lr=1e-2")
        tb.add_custom_scalars(
            {"Loss": {"components": ["Multiline", [r"Loss/component_.*", r"Loss/total"]]}}
        )
        for it in range(ITERATIONS):
            batch = torch.randint(0, len(x), (64,))
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
            loss.backward()
            optimizer.step()
            for name, value in parts.items():
                tb.add_scalar(f"Loss/component_{name}", value, it)
            tb.add_scalar("Loss/total", loss, it)
        tb.add_histogram("weights/first_layer", model[0].weight, ITERATIONS)
    print(f"wrote {run_dir / 'tensorboard'}")


if __name__ == "__main__":
    main()
