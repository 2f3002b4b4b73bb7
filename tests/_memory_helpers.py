"""Helpers for the memory-profiler tests: small real torch models, CPU training steps, and
expected figures computed from torch directly (``numel() * element_size()``,
``named_parameters()``, ``optimizer.state``) — never from gpuscope's own code."""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

MB = 1 << 20

# For tests about a machine without CUDA (a warning that it is absent, no allocator to
# dump): skipped where CUDA is available, and said so, rather than passing for nothing.
without_cuda = pytest.mark.skipif(torch.cuda.is_available(), reason="about a machine without CUDA")
CATEGORY_KEYS = ("parameters", "gradients", "optimizer_state", "buffers", "activations", "other")


def nbytes(t: torch.Tensor) -> int:
    """Bytes of a tensor's own elements (not of a shared base)."""
    return t.numel() * t.element_size()


def params_bytes(model: nn.Module) -> int:
    """Parameter bytes; each ordinary parameter owns exactly its elements."""
    return sum(nbytes(p) for p in model.parameters())


def grads_bytes(params: Iterable[torch.Tensor]) -> int:
    return sum(nbytes(p.grad) for p in params if p.grad is not None)


def optimizer_state_bytes(opt: torch.optim.Optimizer) -> int:
    """Every tensor in ``optimizer.state`` (moments, momentum buffers, step counters)."""
    return sum(
        nbytes(v) for st in opt.state.values() for v in st.values() if isinstance(v, torch.Tensor)
    )


def buffers_bytes(model: nn.Module) -> int:
    return sum(nbytes(b) for b in model.buffers())


def train_step(
    model: nn.Module,
    opt: torch.optim.Optimizer | None,
    x: torch.Tensor,
    *,
    zero: bool = True,
) -> float:
    """One real CPU step: forward, backward, optimizer step, optionally zero_grad(None)."""
    loss = model(x).float().pow(2).mean()
    loss.backward()
    if opt is not None:
        opt.step()
        if zero:
            opt.zero_grad(set_to_none=True)
    return float(loss.item())


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


def profiler_files(run_dir: Path) -> list[Path]:
    return sorted(p for p in Path(run_dir).rglob("*") if p.is_file()) if run_dir.exists() else []


@contextmanager
def caught_warnings() -> Iterator[list[warnings.WarningMessage]]:
    """Every warning raised inside, none filtered away."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield caught


def gpuscope_warnings(caught: list[warnings.WarningMessage]) -> list[warnings.WarningMessage]:
    return [w for w in caught if "gpuscope" in str(w.message)]


@contextmanager
def one_thread() -> Iterator[None]:
    """Tiny CPU models run faster, and more evenly, on one intra-op thread."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


class MLP(nn.Module):
    """Two named blocks of two levels, no buffers: module names are known in advance."""

    def __init__(self, d_in: int = 32, hidden: int = 64, d_out: int = 8) -> None:
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(d_in, hidden), nn.ReLU(), nn.Linear(hidden, hidden))
        self.head = nn.Sequential(nn.Linear(hidden, d_out))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.head(self.encoder(x))
        return out
