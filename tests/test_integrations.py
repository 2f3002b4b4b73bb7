"""The memory profiler inside real frameworks: a Lightning Trainer and a Hugging Face
Trainer, each training a small model built from a config on CPU (nothing downloaded)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import gpuscope
import pytest
import torch
from torch import nn

EVERY = 5
STEPS = 20


def _records(run_dir: Path) -> list[dict[str, Any]]:
    lines = (run_dir / "profiles" / "memory.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def _parameter_bytes(model: nn.Module) -> int:
    storages = {
        p.untyped_storage().data_ptr(): p.untyped_storage().nbytes() for p in model.parameters()
    }
    return sum(storages.values())


def _fit_lightning(
    tmp_path: Path, accumulate: int = 1
) -> tuple[Any, list[dict[str, float]], dict[int, float]]:
    """A small regressor trained by Lightning with gpuscope's callback (records every
    ``EVERY`` steps into ``tmp_path / "run"``): the module, every micro-batch's losses
    as ``training_step`` computed them, in order, and the global gradient norm of each
    optimizer step (by the ``global_step`` it ends with), measured by the module's own
    ``on_before_optimizer_step`` with torch's ``get_total_norm``."""
    lightning = pytest.importorskip("lightning.pytorch")
    from gpuscope.integrations.lightning import GpuscopeCallback

    seen: list[dict[str, float]] = []
    norms: dict[int, float] = {}

    class Regressor(lightning.LightningModule):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.net = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 1))

        def training_step(self, batch: Any, batch_idx: int) -> dict[str, torch.Tensor]:
            x, y = batch
            mse = nn.functional.mse_loss(self.net(x), y)
            l2 = 1e-3 * sum(p.pow(2).sum() for p in self.parameters())
            loss = mse + l2
            seen.append({"total": loss.item(), "mse": mse.item(), "l2": l2.item()})
            return {"loss": loss, "mse": mse.detach(), "l2": l2.detach()}

        def on_before_optimizer_step(self, optimizer: torch.optim.Optimizer) -> None:
            grads = [p.grad for p in self.parameters() if p.grad is not None]
            norms[self.trainer.global_step + 1] = float(torch.nn.utils.get_total_norm(grads))

        def configure_optimizers(self) -> torch.optim.Optimizer:
            return torch.optim.Adam(self.parameters(), lr=1e-3)

    x = torch.randn(256, 8)  # 32 batches an epoch: accumulation windows never straddle one
    data = torch.utils.data.TensorDataset(x, x.sum(dim=1, keepdim=True))
    loader = torch.utils.data.DataLoader(data, batch_size=8)
    module = Regressor()
    trainer = lightning.Trainer(
        max_steps=STEPS,
        accumulate_grad_batches=accumulate,
        accelerator="cpu",
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=tmp_path,
        callbacks=[GpuscopeCallback(tmp_path / "run", every=EVERY)],
    )
    trainer.fit(module, loader)
    return module, seen, norms


def test_lightning_callback(tmp_path: Path) -> None:
    module, _, norms = _fit_lightning(tmp_path)
    run_dir = tmp_path / "run"
    records = _records(run_dir)
    # global_step counts optimizer steps: 1..STEPS after each batch.
    assert [r["iteration"] for r in records] == list(range(EVERY, STEPS + 1, EVERY))
    params = _parameter_bytes(module)
    for r in records:
        assert r["categories_bytes"]["parameters"] == params
        assert r["categories_bytes"]["optimizer_state"] >= 2 * params  # Adam: exp_avg, exp_avg_sq
        assert set(r["losses"]) == {"mse", "l2", "total"}
        assert r["losses"]["total"] == pytest.approx(
            r["losses"]["mse"] + r["losses"]["l2"], rel=1e-5
        )
    assert set(records[0]["modules_bytes"]) == {"net"}
    # Gradient flow with no code in the callback: the profiler's optimizer-step hook,
    # inside Lightning's closure (after backward), measured each recorded step's gradients.
    for r in records:
        assert r["gradients"]["iteration"] == r["iteration"]
        assert r["gradients"]["global_norm"] == pytest.approx(norms[r["iteration"]], rel=1e-5)
        assert r["gradients"]["module_norms"].keys() == {"net"}


def test_lightning_callback_with_gradient_accumulation(tmp_path: Path) -> None:
    """With ``accumulate_grad_batches=4``, ``on_train_batch_end`` runs four times per
    optimizer step with one ``global_step``: one record per due step, whose losses are the
    means over its four micro-batches, the total undivided (what ``training_step``
    returned, not Lightning's ``loss / 4``)."""
    accumulate = 4
    _, seen, norms = _fit_lightning(tmp_path, accumulate)
    run_dir = tmp_path / "run"
    assert len(seen) == STEPS * accumulate
    records = _records(run_dir)
    assert [r["iteration"] for r in records] == list(range(EVERY, STEPS + 1, EVERY))
    for r in records:
        window = seen[(r["iteration"] - 1) * accumulate : r["iteration"] * accumulate]
        for key in ("total", "mse", "l2"):
            expected = sum(w[key] for w in window) / accumulate
            assert r["losses"][key] == pytest.approx(expected, rel=1e-5), key
        assert r["losses"]["total"] == pytest.approx(
            r["losses"]["mse"] + r["losses"]["l2"], rel=1e-5
        )
        # The accumulated gradients of the real step, measured once.
        assert r["gradients"]["global_norm"] == pytest.approx(norms[r["iteration"]], rel=1e-5)


def _train_huggingface(tmp_path: Path, logging_steps: int) -> tuple[Any, Any, Path]:
    """A tiny BERT classifier (built from a config) trained ``STEPS`` steps by a Hugging
    Face Trainer on CPU, logging every ``logging_steps``, with gpuscope's callback recording
    every ``EVERY``: the model, the trainer and the run directory."""
    transformers = pytest.importorskip("transformers")
    from gpuscope.integrations.huggingface import GpuscopeTrainerCallback

    config = transformers.BertConfig(
        vocab_size=64,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=32,
        num_labels=2,
    )
    torch.manual_seed(0)
    model = transformers.BertForSequenceClassification(config)
    rows = [
        {"input_ids": torch.randint(1, 64, (16,)), "labels": torch.tensor(i % 2)} for i in range(64)
    ]
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path / "out"),
        max_steps=STEPS,
        per_device_train_batch_size=4,
        logging_steps=logging_steps,
        report_to=[],
        save_strategy="no",
        use_cpu=True,
        disable_tqdm=True,
    )
    run_dir = tmp_path / "run"
    trainer = transformers.Trainer(
        model=model,
        args=args,
        train_dataset=rows,
        callbacks=[GpuscopeTrainerCallback(run_dir, every=EVERY)],
    )
    trainer.train()
    return model, trainer, run_dir


def _logged(trainer: Any, key: str) -> dict[int, float]:
    """``{step: value}`` of ``key`` in the trainer's per-step logs."""
    return {h["step"]: h[key] for h in trainer.state.log_history if key in h}


def _logged_losses(trainer: Any) -> dict[int, dict[str, float]]:
    """The trainer's own record of the losses it logged: ``{step: {"total": loss}}`` for
    every ``trainer.state.log_history`` entry with a ``loss`` (the per-step logs, not the
    end-of-training summary, whose ``train_loss`` is the mean over the whole run)."""
    return {h["step"]: {"total": h["loss"]} for h in trainer.state.log_history if "loss" in h}


def test_huggingface_trainer_callback(tmp_path: Path) -> None:
    """Records every ``EVERY`` optimizer steps with the model's parameters and AdamW's
    moments; a record at a step the trainer logged carries exactly the loss the trainer
    put in ``log_history`` for that step, a record at a step it did not log carries none
    (logging every 10 steps, recording every 5: both kinds)."""
    model, trainer, run_dir = _train_huggingface(tmp_path, logging_steps=2 * EVERY)
    records = _records(run_dir)
    assert [r["iteration"] for r in records] == list(range(EVERY, STEPS + 1, EVERY))
    assert trainer.state.global_step == STEPS
    params = _parameter_bytes(model)
    for r in records:
        assert r["categories_bytes"]["parameters"] == params
        assert r["categories_bytes"]["optimizer_state"] >= 2 * params  # AdamW moments
    logged = _logged_losses(trainer)
    assert sorted(logged) == list(range(2 * EVERY, STEPS + 1, 2 * EVERY))
    assert {r["iteration"]: r["losses"] for r in records} == {
        r["iteration"]: logged.get(r["iteration"], {}) for r in records
    }
    assert {"bert", "classifier"} <= set(records[0]["modules_bytes"])
    # Gradient flow with no code in the callback: the optimizer-step hook (through
    # accelerate's wrapper) measures after the trainer's clipping to max_grad_norm=1,
    # so the norm is the logged one (before clipping) brought down to 1.
    norms = _logged(trainer, "grad_norm")
    assert trainer.args.max_grad_norm == 1.0
    for r in records:
        assert r["gradients"]["iteration"] == r["iteration"]
        if r["iteration"] in norms:
            expected = min(norms[r["iteration"]], 1.0)
            assert r["gradients"]["global_norm"] == pytest.approx(expected, rel=1e-4)
    assert any(r["iteration"] in norms for r in records)


def test_huggingface_last_step_without_a_log_has_no_loss(tmp_path: Path) -> None:
    """Logging every 3 steps, the last step (20) has no log of its own; the trainer's
    end-of-training summary arrives at that step with ``train_loss``, which is not that
    step's loss: its record should carry no loss, as the other unlogged steps' do."""
    _, trainer, run_dir = _train_huggingface(tmp_path, logging_steps=3)
    records = _records(run_dir)
    logged = _logged_losses(trainer)
    assert STEPS not in logged
    assert {r["iteration"]: r["losses"] for r in records} == {
        r["iteration"]: logged.get(r["iteration"], {}) for r in records
    }


def test_gpuscope_run_dir_is_the_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Inside `gpuscope run`, GPUSCOPE_RUN_DIR points every writer at one run directory."""
    lightning = pytest.importorskip("lightning.pytorch")
    from gpuscope.integrations.lightning import GpuscopeCallback

    class Tiny(lightning.LightningModule):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.net = nn.Linear(2, 1)

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            (x,) = batch
            return self.net(x).pow(2).mean()

        def configure_optimizers(self) -> torch.optim.Optimizer:
            return torch.optim.SGD(self.parameters(), lr=0.1)

    monkeypatch.setenv("GPUSCOPE_RUN_DIR", os.fspath(tmp_path / "from-env"))
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(8, 2)))
    trainer = lightning.Trainer(
        max_steps=2,
        accelerator="cpu",
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=tmp_path / "root",
        callbacks=[GpuscopeCallback(every=1)],
    )
    trainer.fit(Tiny(), loader)
    records = _records(tmp_path / "from-env")
    assert [r["iteration"] for r in records] == [1, 2]
    assert all(set(r["losses"]) == {"total"} for r in records)
    assert not (tmp_path / "root" / "gpuscope").exists()


@pytest.mark.parametrize("value", ["", None])
def test_an_empty_or_unset_run_dir_variable_means_the_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str | None
) -> None:
    """An empty GPUSCOPE_RUN_DIR is no run directory, as the CLI reads it (`gpuscope run`
    and `gpuscope nsys` then make their own): the profiler writes to runs/gpuscope, not
    into the current directory."""
    monkeypatch.chdir(tmp_path)
    if value is None:
        monkeypatch.delenv("GPUSCOPE_RUN_DIR", raising=False)
    else:
        monkeypatch.setenv("GPUSCOPE_RUN_DIR", value)
    profiler = gpuscope.MemoryProfiler(model=nn.Linear(2, 1), every=1)
    profiler.step(1)
    profiler.close()
    assert [r["iteration"] for r in _records(tmp_path / "runs" / "gpuscope")] == [1]
    assert not (tmp_path / "profiles").exists()
