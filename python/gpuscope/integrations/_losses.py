"""Picking loss figures out of what frameworks hand to callbacks."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

__all__ = ["scalar_losses"]


def scalar_losses(values: Mapping[str, Any] | None, *, only_loss_like: bool) -> dict[str, Any]:
    """The one-number entries of ``values`` (floats, ints, one-element tensors); with
    ``only_loss_like``, only those whose name mentions "loss"."""
    out: dict[str, Any] = {}
    for key, value in (values or {}).items():
        if only_loss_like and "loss" not in key.lower():
            continue
        if isinstance(value, torch.Tensor):
            if value.numel() == 1:
                out[key] = value
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            out[key] = value
    return out
