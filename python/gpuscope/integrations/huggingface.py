"""gpuscope for Hugging Face ``transformers``:
``Trainer(..., callbacks=[GpuscopeTrainerCallback(every=50)])``.

Records after optimizer steps, with the trainer's model and optimizer. The loss figures
are those the trainer logged at that step (every ``logging_steps``); steps without a log
get a record without losses.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from gpuscope._run_dir import default_run_dir
from gpuscope.integrations._losses import scalar_losses
from gpuscope.memory.profiler import MemoryProfiler

__all__ = ["GpuscopeTrainerCallback"]


class GpuscopeTrainerCallback(TrainerCallback):
    """Memory records every ``every`` optimizer steps into ``run_dir`` (default:
    ``$GPUSCOPE_RUN_DIR``, else ``<output_dir>/gpuscope``). Other keyword arguments go to
    :class:`gpuscope.MemoryProfiler`."""

    def __init__(
        self, run_dir: str | os.PathLike[str] | None = None, every: int = 50, **kwargs: Any
    ) -> None:
        self.run_dir = run_dir
        self.every = every
        self.kwargs = kwargs
        self.profiler: MemoryProfiler | None = None
        self._pending: int | None = None

    def on_train_begin(
        self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any
    ) -> None:
        run_dir = self.run_dir or default_run_dir(Path(args.output_dir) / "gpuscope")
        self.profiler = MemoryProfiler(
            run_dir,
            model=model,
            optimizer=kwargs.get("optimizer"),
            every=self.every,
            **self.kwargs,
        )

    # The trainer logs a step's loss after on_step_end, so a step's record is taken when
    # its log arrives, or at the next step's start when it has no log.

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._pending = state.global_step

    def on_log(
        self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kw: Any
    ) -> None:
        # The summary the trainer logs once at the end (``train_runtime``, and ``train_loss``:
        # the mean over the whole run) is not the last step's loss.
        if self._pending == state.global_step and "train_runtime" not in (logs or {}):
            self._step(scalar_losses(logs, only_loss_like=True))

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._step({})

    def _step(self, losses: dict[str, Any]) -> None:
        if self.profiler is None or self._pending is None:
            return
        total = losses.pop("loss", None)
        self.profiler.step(self._pending, losses=losses or None, loss=total)
        self._pending = None

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._step({})
        if self.profiler is not None:
            self.profiler.close()
