"""gpuscope for PyTorch Lightning: ``Trainer(callbacks=[GpuscopeCallback(every=50)])``.

Records after optimizer steps (the end of the training batch on which ``global_step``
moved), with the LightningModule as the model and the trainer's first optimizer; loss
components are the extra one-number entries of what ``training_step`` returns (its
``"loss"`` is the total). With gradient accumulation, the micro-batches of one optimizer
step make one record, whose losses are their means; the total is the undivided loss
(Lightning hands callbacks ``loss / accumulate_grad_batches``, what ``backward`` saw).
Works with the ``lightning`` and the older ``pytorch_lightning`` packages.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

try:
    from lightning.pytorch import Callback
except ImportError:  # the pre-2.0 package name
    from pytorch_lightning import Callback  # type: ignore[assignment]

import torch

from gpuscope._run_dir import default_run_dir
from gpuscope.integrations._losses import scalar_losses
from gpuscope.memory.profiler import MemoryProfiler

__all__ = ["GpuscopeCallback"]


class GpuscopeCallback(Callback):
    """Memory records every ``every`` optimizer steps into ``run_dir`` (default:
    ``$GPUSCOPE_RUN_DIR``, else ``<trainer.default_root_dir>/gpuscope``). Other keyword
    arguments go to :class:`gpuscope.MemoryProfiler`."""

    def __init__(
        self, run_dir: str | os.PathLike[str] | None = None, every: int = 50, **kwargs: Any
    ) -> None:
        super().__init__()
        self.run_dir = run_dir
        self.every = every
        self.kwargs = kwargs
        self.profiler: MemoryProfiler | None = None
        self._last_step = 0
        # Sums and counts of the loss figures of the current optimizer step's micro-batches.
        self._sums: dict[str, Any] = {}
        self._counts: dict[str, int] = {}

    def on_fit_start(self, trainer: Any, pl_module: Any) -> None:
        run_dir = self.run_dir or default_run_dir(Path(trainer.default_root_dir) / "gpuscope")
        optimizers = list(getattr(trainer, "optimizers", []) or [])
        self.profiler = MemoryProfiler(
            run_dir,
            model=pl_module,
            optimizer=optimizers[0] if optimizers else None,
            every=self.every,
            **self.kwargs,
        )
        self._last_step = trainer.global_step
        self._sums, self._counts = {}, {}

    def on_train_batch_end(
        self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        if self.profiler is None:
            return
        parts = outputs if isinstance(outputs, dict) else {"loss": outputs}
        losses = scalar_losses(parts, only_loss_like=False)
        accumulate = int(getattr(trainer, "accumulate_grad_batches", 1) or 1)
        if (
            "loss" in losses
            and accumulate > 1
            and getattr(pl_module, "automatic_optimization", True)
        ):
            losses["loss"] = losses["loss"] * accumulate
        for key, value in losses.items():
            if isinstance(value, torch.Tensor):
                value = value.detach()  # summed on its device: no sync per micro-batch
            self._sums[key] = self._sums[key] + value if key in self._sums else value
            self._counts[key] = self._counts.get(key, 0) + 1
        step = trainer.global_step
        if step == self._last_step:
            return  # a micro-batch before the optimizer step of its accumulation window
        self._last_step = step
        means = {key: total / self._counts[key] for key, total in self._sums.items()}
        self._sums, self._counts = {}, {}
        total = means.pop("loss", None)
        self.profiler.step(step, losses=means or None, loss=total)

    def on_fit_end(self, trainer: Any, pl_module: Any) -> None:
        if self.profiler is not None:
            self.profiler.close()
