"""gpuscope for PyTorch Lightning: ``Trainer(callbacks=[GpuscopeCallback(every=50)])``.

Records at the end of training batches, with the LightningModule as the model and the
trainer's first optimizer; loss components are the extra one-number entries of what
``training_step`` returns (its ``"loss"`` is the total). Works with the ``lightning`` and
the older ``pytorch_lightning`` packages.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

try:
    from lightning.pytorch import Callback
except ImportError:  # the pre-2.0 package name
    from pytorch_lightning import Callback  # type: ignore[assignment]

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

    def on_fit_start(self, trainer: Any, pl_module: Any) -> None:
        run_dir = self.run_dir or os.environ.get("GPUSCOPE_RUN_DIR")
        if run_dir is None:
            run_dir = Path(trainer.default_root_dir) / "gpuscope"
        optimizers = list(getattr(trainer, "optimizers", []) or [])
        self.profiler = MemoryProfiler(
            run_dir,
            model=pl_module,
            optimizer=optimizers[0] if optimizers else None,
            every=self.every,
            **self.kwargs,
        )

    def on_train_batch_end(
        self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        if self.profiler is None:
            return
        parts = outputs if isinstance(outputs, dict) else {"loss": outputs}
        losses = scalar_losses(parts, only_loss_like=False)
        total = losses.pop("loss", None)
        self.profiler.step(trainer.global_step, losses=losses or None, loss=total)

    def on_fit_end(self, trainer: Any, pl_module: Any) -> None:
        if self.profiler is not None:
            self.profiler.close()
