"""The README's Python examples used together, as a reader would: ``EventWriter`` into
``runs/exp1/tensorboard`` and ``MemoryProfiler("runs/exp1")``, which writes its own
TensorBoard tags into that same directory. Every (tag, step) must have one value when
TensorBoard's own ``EventAccumulator`` loads the directory."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import gpuscope
import torch
from _helpers import accumulator
from torch import nn

README = Path(__file__).resolve().parents[1] / "README.md"


def _python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.DOTALL)


def _block_with(needle: str) -> str:
    blocks = [b for b in _python_blocks() if needle in b]
    assert blocks, f"no README python block with {needle}"
    return blocks[0]


def test_event_writer_and_memory_profiler_examples_do_not_log_the_same_tag(
    tmp_path: Path,
) -> None:
    writer_block = _block_with("gpuscope.EventWriter(")
    profiler_block = _block_with("gpuscope.MemoryProfiler(")
    writer_dir = re.search(r'EventWriter\("([^"]+)"\)', writer_block)
    profiler_dir = re.search(r'MemoryProfiler\("([^"]+)"', profiler_block)
    assert writer_dir and profiler_dir
    scalar_tags = re.findall(r'tb\.add_scalar\("([^"]+)"', writer_block)
    assert scalar_tags

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    x, y = torch.randn(32, 8), torch.randn(32, 1)
    scope = gpuscope.MemoryProfiler(tmp_path / profiler_dir[1], model=model, optimizer=opt, every=5)
    losses = []
    with gpuscope.EventWriter(tmp_path / writer_dir[1]) as tb:
        for it in range(20):
            mse = nn.functional.mse_loss(model(x), y)
            l2 = 1e-3 * sum(p.pow(2).sum() for p in model.parameters())
            loss = mse + l2
            opt.zero_grad()
            loss.backward()
            opt.step()
            scope.step(it, losses={"mse": mse, "l2": l2}, loss=loss)
            for tag in scalar_tags:  # what the README's example logs, every iteration
                tb.add_scalar(tag, loss, global_step=it)
            losses.append(loss.item())
    scope.close()
    assert losses[-1] < losses[0]

    tb_dir = tmp_path / writer_dir[1]
    ea = accumulator(tb_dir)
    tags = ea.Tags()["scalars"]
    assert "Loss/total" in tags  # the profiler's
    for tag in scalar_tags:
        assert [e.step for e in ea.Scalars(tag)] == list(range(20)), tag
    for tag in tags:
        steps = Counter(e.step for e in ea.Scalars(tag))
        assert max(steps.values()) == 1, (tag, [s for s, n in steps.items() if n > 1])
