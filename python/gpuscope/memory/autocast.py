"""Whether the model's forward runs under ``torch.autocast``, and with which dtype.

The census cannot tell: under autocast the parameters, gradients and optimizer state stay
float32 by design. So a forward pre-hook on each direct child of the model reads the
autocast state where the forward really runs — inside it, which also covers wrappers that
enter autocast in a patched ``forward`` (Hugging Face Accelerate) rather than around the
call. Two C calls per child per forward; traced without a graph break by torch.compile.
"""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["AutocastWatch"]


class AutocastWatch:
    """The autocast state of the model's last forward (``None`` until one is seen)."""

    def __init__(self, model: torch.nn.Module | None, device_type: str) -> None:
        self.device_type = device_type
        self.state: dict[str, Any] | None = None
        self._handles: list[Any] = []
        if model is not None:
            targets = list(model.children()) or [model]
            self._handles = [m.register_forward_pre_hook(self._seen) for m in targets]

    def _seen(self, module: torch.nn.Module, args: Any) -> None:
        enabled = torch.is_autocast_enabled(self.device_type)
        dtype = torch.get_autocast_dtype(self.device_type) if enabled else None
        self.state = {
            "enabled": enabled,
            "dtype": str(dtype).removeprefix("torch.") if dtype is not None else None,
        }

    def close(self) -> None:
        """Removes the hooks."""
        for handle in self._handles:
            handle.remove()
        self._handles = []
