"""Census correctness of ``gpuscope.MemoryProfiler`` on CPU, against figures taken from torch
directly: parameters, gradients, optimizer state and buffers per unique storage; tied
weights and views counted once; a densification (Gaussian-splatting style) seen at the next
record; the per-module and per-dtype breakdowns; large tensors by name; the ``gc`` scan.

Every expected value is computed here from ``numel() * element_size()``,
``named_parameters()``, ``.grad`` and ``optimizer.state`` — never read from gpuscope.
"""

from __future__ import annotations

import gc
from collections import OrderedDict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gpuscope
import pytest
import torch
from _memory_helpers import (
    MB,
    MLP,
    buffers_bytes,
    caught_warnings,
    gpuscope_warnings,
    grads_bytes,
    nbytes,
    one_thread,
    optimizer_state_bytes,
    params_bytes,
    train_step,
)
from torch import nn


@pytest.fixture(autouse=True)
def _one_thread() -> Iterator[None]:
    with one_thread():
        yield


def profiler(run_dir: Path, **kwargs: Any) -> gpuscope.MemoryProfiler:
    """A profiler that only takes records (no files needed for census checks)."""
    kwargs.setdefault("tensorboard", False)
    kwargs.setdefault("text_log", False)
    return gpuscope.MemoryProfiler(run_dir, **kwargs)


def take(scope: gpuscope.MemoryProfiler, iteration: int = 0) -> dict[str, Any]:
    with caught_warnings() as caught:
        record = scope.record(iteration)
    assert not gpuscope_warnings(caught), [str(w.message) for w in caught]
    assert record is not None
    return record


# -- parameters, gradients, optimizer state, buffers ------------------------------------


def test_parameters_and_buffers_exact(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(3, 8, 3),
        nn.BatchNorm2d(8),
        nn.ReLU(),
        nn.Flatten(),
        nn.Linear(8 * 6 * 6, 10),
    )
    named = list(model.named_parameters())
    # Every parameter owns exactly its own elements (so storage bytes == numel*size).
    for _, p in named:
        assert p.untyped_storage().nbytes() == nbytes(p)
    expected_params = sum(p.numel() * p.element_size() for _, p in named)
    expected_buffers = sum(b.numel() * b.element_size() for _, b in model.named_buffers())
    # running_mean, running_var (float32) and num_batches_tracked (0-d int64 = 8 bytes)
    assert expected_buffers == 8 * 4 * 2 + 8

    with profiler(tmp_path, model=model) as scope:
        r = take(scope)
    c = r["categories_bytes"]
    assert c["parameters"] == expected_params
    assert c["buffers"] == expected_buffers
    assert c["gradients"] == 0
    assert c["optimizer_state"] == 0
    assert r["census_bytes"] == expected_params + expected_buffers
    assert r["tensor_count"] == len(named) + len(list(model.buffers()))
    for v in r["categories_bytes"].values():
        assert v is None or (isinstance(v, int) and v >= 0)


def test_gradients_appear_after_backward_and_vanish_after_zero_grad(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = MLP()
    model.head.requires_grad_(False)  # frozen: never gets a gradient
    trainable = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.SGD(trainable, lr=0.01)
    x = torch.randn(16, 32)
    with profiler(tmp_path, model=model, optimizer=opt) as scope:
        assert take(scope)["categories_bytes"]["gradients"] == 0

        model(x).pow(2).mean().backward()
        expected = sum(p.grad.numel() * p.grad.element_size() for p in trainable)
        assert expected == sum(nbytes(p) for p in trainable) > 0
        assert all(p.grad is None for p in model.head.parameters())
        assert take(scope, 1)["categories_bytes"]["gradients"] == expected

        opt.zero_grad(set_to_none=False)  # zeroed in place: still allocated
        assert take(scope, 2)["categories_bytes"]["gradients"] == expected

        opt.zero_grad(set_to_none=True)
        assert all(p.grad is None for p in model.parameters())
        assert take(scope, 3)["categories_bytes"]["gradients"] == 0

        model(x).pow(2).mean().backward()
        assert take(scope, 4)["categories_bytes"]["gradients"] == expected


def test_adam_state_is_two_moments_plus_step_counters(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = MLP()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    with profiler(tmp_path, model=model, optimizer=opt) as scope:
        assert take(scope)["categories_bytes"]["optimizer_state"] == 0  # state is lazy
        train_step(model, opt, torch.randn(8, 32))
        r = take(scope, 1)

    # How torch keeps Adam's state on CPU (not capturable, not fused): exp_avg and
    # exp_avg_sq like the parameter, and `step` as a 0-d float32 tensor per parameter.
    n_params = len(list(model.parameters()))
    assert len(opt.state) == n_params
    for p, st in opt.state.items():
        assert set(st) == {"step", "exp_avg", "exp_avg_sq"}
        assert torch.is_tensor(st["step"]) and st["step"].dim() == 0
        assert st["step"].dtype == torch.float32
        assert st["exp_avg"].shape == p.shape and st["exp_avg"].dtype == torch.float32
    step_bytes = sum(nbytes(st["step"]) for st in opt.state.values())
    assert step_bytes == 4 * n_params

    p_bytes = params_bytes(model)
    assert r["categories_bytes"]["optimizer_state"] == 2 * p_bytes + step_bytes
    assert r["categories_bytes"]["optimizer_state"] == optimizer_state_bytes(opt)
    assert r["categories_bytes"]["parameters"] == p_bytes
    assert r["categories_bytes"]["gradients"] == 0  # zero_grad(set_to_none=True)
    assert r["census_bytes"] == 3 * p_bytes + step_bytes


def test_sgd_momentum_state(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = MLP()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    train_step(model, opt, torch.randn(8, 32))
    assert all(set(st) == {"momentum_buffer"} for st in opt.state.values())
    with profiler(tmp_path, model=model, optimizer=opt) as scope:
        r = take(scope)
    assert r["categories_bytes"]["optimizer_state"] == params_bytes(model)


class TiedLM(nn.Module):
    def __init__(self, vocab: int = 500, dim: int = 32) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.mix = nn.Linear(dim, dim)
        self.lm_head = nn.Linear(dim, vocab, bias=False)
        self.lm_head.weight = self.embed.weight  # tied

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.lm_head(torch.tanh(self.mix(self.embed(ids))))
        return out


def test_tied_weights_count_once(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = TiedLM()
    opt = torch.optim.Adam(model.parameters())
    unique = {id(p): p for _, p in model.named_parameters(remove_duplicate=False)}
    assert len(list(model.named_parameters(remove_duplicate=False))) == len(unique) + 1
    expected = sum(nbytes(p) for p in unique.values())
    ids = torch.randint(0, 500, (4, 6))
    with profiler(tmp_path, model=model, optimizer=opt) as scope:
        r0 = take(scope)
        loss = model(ids).logsumexp(-1).mean()
        loss.backward()
        r1 = take(scope, 1)
        opt.step()
        r2 = take(scope, 2)
    assert r0["categories_bytes"]["parameters"] == expected
    assert r1["categories_bytes"]["gradients"] == expected  # one .grad for the tied weight
    assert r2["categories_bytes"]["optimizer_state"] == optimizer_state_bytes(opt)
    assert r2["categories_bytes"]["optimizer_state"] == 2 * expected + 4 * len(unique)
    assert r2["census_bytes"] == 4 * expected + 4 * len(unique)


class ViewHolder(nn.Module):
    """A big weight, a buffer that is a view of it, and a parameter that views a big buffer."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(256, 256))
        self.register_buffer("table", torch.randn(1000, 16))
        self.register_buffer("weight_rows", self.weight.detach()[:8])  # a view: no new bytes
        self.row = nn.Parameter(self.table[:4])  # a parameter viewing the table's storage
        self.row_t = nn.Parameter(self.row.detach().t())  # a view of a view


def test_views_registered_as_buffer_or_parameter_do_not_add(tmp_path: Path) -> None:
    model = ViewHolder()
    weight_bytes = nbytes(model.weight)
    table_bytes = nbytes(model.table)
    # torch agrees that these are views sharing storage
    assert model.weight_rows.untyped_storage().data_ptr() == model.weight.data_ptr()
    assert model.row.untyped_storage().data_ptr() == model.table.untyped_storage().data_ptr()
    with profiler(tmp_path, model=model) as scope:
        r = take(scope)
    c = r["categories_bytes"]
    assert r["census_bytes"] == weight_bytes + table_bytes
    assert c["parameters"] + c["buffers"] == weight_bytes + table_bytes
    assert r["tensor_count"] == 2
    assert r["dtypes_bytes"] == {"float32": weight_bytes + table_bytes}


def test_gc_scan_dedupes_views_of_model_tensors_too(tmp_path: Path) -> None:
    model = ViewHolder()
    with profiler(tmp_path, model=model, scan="gc") as scope:
        gc.collect()
        r0 = take(scope)
        views = [model.weight.detach()[3:9], model.table.view(-1)[:10], model.row.detach()]
        r1 = take(scope, 1)
        held = [torch.ones(100, 100)]
        held.append(held[0][:5])
        held.append(held[0].t())
        r2 = take(scope, 2)
    assert len(views) == 3 and len(held) == 3
    # views of model tensors are not "other"
    assert r1["categories_bytes"]["other"] == r0["categories_bytes"]["other"]
    assert r1["tensor_count"] == r0["tensor_count"]
    # a tensor outside the model counts once, whatever views of it exist
    assert r2["categories_bytes"]["other"] - r1["categories_bytes"]["other"] == 40_000
    assert r2["tensor_count"] - r1["tensor_count"] == 1
    assert r2["census_bytes"] - r1["census_bytes"] == 40_000


# -- densification: the census must not go stale ------------------------------------------


class Gaussians(nn.Module):
    """The shape of a Gaussian-splatting model: per-point parameters of (N, ...)."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self._xyz = nn.Parameter(torch.randn(n, 3))
        self._features_rest = nn.Parameter(torch.randn(n, 15, 3))
        self._opacity = nn.Parameter(torch.randn(n, 1))

    def forward(self) -> torch.Tensor:
        return self._xyz.sum() + self._features_rest.pow(2).sum() + self._opacity.sigmoid().sum()


def gs_optimizer(model: Gaussians) -> torch.optim.Adam:
    groups = [
        {"params": [model._xyz], "lr": 1e-3, "name": "xyz"},
        {"params": [model._features_rest], "lr": 1e-3, "name": "f_rest"},
        {"params": [model._opacity], "lr": 1e-2, "name": "opacity"},
    ]
    return torch.optim.Adam(groups, lr=0.0, eps=1e-15)


ATTR = {"xyz": "_xyz", "f_rest": "_features_rest", "opacity": "_opacity"}


def cat_tensors_to_optimizer(model: Gaussians, opt: torch.optim.Adam, n_new: int) -> None:
    """As 3D Gaussian splatting's densification does it: a new nn.Parameter in the
    optimizer's param_groups, the Adam moments extended, the old state dropped."""
    for group in opt.param_groups:
        old = group["params"][0]
        ext = torch.randn(n_new, *old.shape[1:])
        stored = opt.state.get(old, None)
        new = nn.Parameter(torch.cat((old.detach(), ext), dim=0).requires_grad_(True))
        if stored is not None:
            stored["exp_avg"] = torch.cat((stored["exp_avg"], torch.zeros_like(ext)), dim=0)
            stored["exp_avg_sq"] = torch.cat((stored["exp_avg_sq"], torch.zeros_like(ext)), dim=0)
            del opt.state[old]
            opt.state[new] = stored
        group["params"][0] = new
        setattr(model, ATTR[group["name"]], new)


def prune_optimizer(model: Gaussians, opt: torch.optim.Adam, keep: torch.Tensor) -> None:
    for group in opt.param_groups:
        old = group["params"][0]
        stored = opt.state.get(old, None)
        new = nn.Parameter(old.detach()[keep].requires_grad_(True))
        if stored is not None:
            stored["exp_avg"] = stored["exp_avg"][keep]
            stored["exp_avg_sq"] = stored["exp_avg_sq"][keep]
            del opt.state[old]
            opt.state[new] = stored
        group["params"][0] = new
        setattr(model, ATTR[group["name"]], new)


def expected_gs(model: Gaussians, opt: torch.optim.Adam) -> dict[str, int]:
    return {
        "parameters": params_bytes(model),
        "gradients": grads_bytes(model.parameters()),
        "optimizer_state": optimizer_state_bytes(opt),
    }


def gs_step(model: Gaussians, opt: torch.optim.Adam) -> None:
    model().backward()
    opt.step()


def test_densification_gaussian_splatting_style(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = Gaussians(2000)
    opt = gs_optimizer(model)
    per_point = (3 + 45 + 1) * 4
    with profiler(tmp_path, model=model, optimizer=opt) as scope:
        gs_step(model, opt)
        r = take(scope, 0)
        assert {k: r["categories_bytes"][k] for k in expected_gs(model, opt)} == expected_gs(
            model, opt
        )
        assert r["categories_bytes"]["parameters"] == 2000 * per_point
        exact = ("parameters", "gradients", "optimizer_state", "buffers")
        for i in range(2):  # nothing changed: the (cached) census still agrees
            again = take(scope, 1 + i)["categories_bytes"]
            assert {k: again[k] for k in exact} == {k: r["categories_bytes"][k] for k in exact}

        # densify: +1000 points; gradients of the old parameters die with them
        opt.zero_grad(set_to_none=True)
        cat_tensors_to_optimizer(model, opt, 1000)
        r = take(scope, 2)
        assert r["categories_bytes"]["parameters"] == 3000 * per_point
        assert r["categories_bytes"]["gradients"] == 0
        assert r["categories_bytes"]["optimizer_state"] == 2 * 3000 * per_point + 3 * 4
        assert sum(r["modules_bytes"].values()) == 3 * 3000 * per_point + 3 * 4

        gs_step(model, opt)  # gradients of the new size
        r = take(scope, 3)
        assert r["categories_bytes"]["gradients"] == 3000 * per_point
        exp = expected_gs(model, opt)
        assert {k: r["categories_bytes"][k] for k in exp} == exp

        # prune to 1500 points
        opt.zero_grad(set_to_none=True)
        prune_optimizer(model, opt, torch.arange(3000) % 2 == 0)
        gs_step(model, opt)
        r = take(scope, 4)
        exp = expected_gs(model, opt)
        assert exp["parameters"] == 1500 * per_point
        assert {k: r["categories_bytes"][k] for k in exp} == exp


def test_densification_by_replacing_data_and_fresh_state(tmp_path: Path) -> None:
    """``param.data`` replaced by a bigger tensor (same Parameter object) and the
    optimizer's state for it rebuilt from scratch, several times over."""
    torch.manual_seed(0)
    model = Gaussians(1000)
    opt = gs_optimizer(model)
    with profiler(tmp_path, model=model, optimizer=opt) as scope:
        for i, n in enumerate((1000, 1700, 2600, 2600, 1200)):
            for p in model.parameters():
                if p.shape[0] != n:
                    p.data = torch.randn(n, *p.shape[1:])
                    opt.state[p] = {}  # fresh state, rebuilt lazily by the next step
            opt.zero_grad(set_to_none=True)
            gs_step(model, opt)
            r = take(scope, i)
            exp = expected_gs(model, opt)
            assert exp["parameters"] == n * (3 + 45 + 1) * 4
            assert {k: r["categories_bytes"][k] for k in exp} == exp, n
            assert r["census_bytes"] == sum(exp.values())


# -- with and without model / optimizer ------------------------------------------------


def test_model_only(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = MLP()
    model(torch.randn(4, 32)).sum().backward()
    with profiler(tmp_path, model=model) as scope:
        r = take(scope)
    c = r["categories_bytes"]
    assert c["parameters"] == params_bytes(model)
    assert c["gradients"] == grads_bytes(model.parameters()) == params_bytes(model)
    assert c["optimizer_state"] == 0
    assert c["buffers"] == 0


def test_optimizer_only(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = MLP()
    opt = torch.optim.Adam(model.parameters())
    train_step(model, opt, torch.randn(4, 32), zero=False)
    with profiler(tmp_path, optimizer=opt, large_threshold_mb=4096 / MB) as scope:
        r = take(scope)
    c = r["categories_bytes"]
    assert c["parameters"] == params_bytes(model)
    assert c["gradients"] == grads_bytes(model.parameters())
    assert c["optimizer_state"] == optimizer_state_bytes(opt)
    assert c["buffers"] == 0
    assert r["device"] == "cpu"
    assert r["large_tensors"], "the 64x64 weight (16 KiB) is above a 4 KiB threshold"


def test_neither_model_nor_optimizer(tmp_path: Path) -> None:
    torch.manual_seed(0)
    # The CPU named, as there is nothing to take it from: the activations are then the
    # process heap's, which the 4 MB tensor below raises, on any machine.
    with profiler(tmp_path, device="cpu") as scope:
        r = take(scope)
        x = torch.randn(1000, 1000)  # noqa: F841 - alive while the second record is taken
        r2 = take(scope, 1)
    for r_ in (r, r2):
        c = r_["categories_bytes"]
        assert {k: c[k] for k in ("parameters", "gradients", "optimizer_state", "buffers")} == {
            "parameters": 0,
            "gradients": 0,
            "optimizer_state": 0,
            "buffers": 0,
        }
        assert c["other"] is None  # no heap scan asked for
        assert isinstance(c["activations"], int) and c["activations"] >= 0
        assert r_["census_bytes"] == 0 and r_["tensor_count"] == 0
        assert r_["modules_bytes"] == {} and r_["dtypes_bytes"] == {}
        assert r_["device"] == "cpu"
    # the 4 MB tensor alive at the second record shows up as heap above the floor
    assert r2["categories_bytes"]["activations"] >= 0.9 * 4_000_000


# -- per-module breakdown ---------------------------------------------------------------


def module_expectation(model: nn.Module, opt: torch.optim.Optimizer, depth: int) -> dict:
    """params + grads + optimizer state of every submodule at ``depth`` that has any."""
    expected: dict[str, int] = {}
    for name, module in model.named_modules():
        if not name or name.count(".") != depth - 1:
            continue
        total = 0
        for p in module.parameters():
            total += nbytes(p)
            if p.grad is not None:
                total += nbytes(p.grad)
            total += sum(nbytes(v) for v in opt.state[p].values() if torch.is_tensor(v))
        if total:
            expected[name] = total
    return expected


@pytest.mark.parametrize("depth", [1, 2])
def test_modules_bytes_by_depth(tmp_path: Path, depth: int) -> None:
    torch.manual_seed(0)
    model = MLP()
    opt = torch.optim.Adam(model.parameters())
    train_step(model, opt, torch.randn(8, 32), zero=False)  # grads and state both alive
    with profiler(tmp_path, model=model, optimizer=opt, module_depth=depth) as scope:
        r = take(scope)
    expected = module_expectation(model, opt, depth)
    if depth == 1:
        assert set(expected) == {"encoder", "head"}
    else:
        assert set(expected) == {"encoder.0", "encoder.2", "head.0"}
    assert r["modules_bytes"] == expected
    c = r["categories_bytes"]
    assert (
        sum(r["modules_bytes"].values()) == c["parameters"] + c["gradients"] + c["optimizer_state"]
    )


def test_modules_bytes_exclude_buffers(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = nn.Sequential(
        OrderedDict(
            stem=nn.Sequential(nn.Linear(16, 32), nn.BatchNorm1d(32)),
            head=nn.Linear(32, 4),
        )
    )
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    train_step(model, opt, torch.randn(8, 16), zero=False)
    assert buffers_bytes(model) > 0
    with profiler(tmp_path, model=model, optimizer=opt) as scope:
        r = take(scope)
    assert r["modules_bytes"] == module_expectation(model, opt, 1)


# -- dtypes, large tensors -------------------------------------------------------------


class Mixed(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.half_proj = nn.Linear(64, 64).to(torch.float16)
        self.full_proj = nn.Linear(64, 32)
        self.index = nn.Parameter(torch.arange(3000, dtype=torch.int64), requires_grad=False)
        self.register_buffer("counts", torch.zeros(500, dtype=torch.int64))
        self.register_buffer("scale", torch.ones(10, dtype=torch.float64))


def test_dtypes_bytes_mixed_model(tmp_path: Path) -> None:
    model = Mixed()
    expected: dict[str, int] = {}
    names = {torch.float16: "float16", torch.float32: "float32", torch.int64: "int64"}
    names[torch.float64] = "float64"
    for t in [*model.parameters(), *model.buffers()]:
        expected[names[t.dtype]] = expected.get(names[t.dtype], 0) + nbytes(t)
    assert expected["float16"] == (64 * 64 + 64) * 2
    assert expected["int64"] == (3000 + 500) * 8
    with profiler(tmp_path, model=model) as scope:
        r = take(scope)
    assert r["dtypes_bytes"] == expected
    assert sum(r["dtypes_bytes"].values()) == r["census_bytes"]


def test_large_tensors_named_and_sorted(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 1024))
    opt = torch.optim.Adam(model.parameters())
    train_step(model, opt, torch.randn(4, 256), zero=False)
    threshold_mb = 0.25  # 262144 bytes: the two weights (512 KiB, 2 MiB) and their kin
    with profiler(
        tmp_path, model=model, optimizer=opt, large_threshold_mb=threshold_mb, top_k=10
    ) as scope:
        r = take(scope)
    big = r["large_tensors"]
    expected_names = set()
    for pname in ("0.weight", "2.weight"):
        expected_names |= {
            pname,
            f"{pname}.grad",
            f"adam.exp_avg[{pname}]",
            f"adam.exp_avg_sq[{pname}]",
        }
    assert {t["name"] for t in big} == expected_names
    sizes = {"0.weight": (512 * 256 * 4, [512, 256]), "2.weight": (1024 * 512 * 4, [1024, 512])}
    for t in big:
        pname = t["name"].removesuffix(".grad").split("[")[-1].rstrip("]")
        assert (t["bytes"], t["shape"]) == sizes[pname], t
        assert t["dtype"] == "float32"
        assert isinstance(t["bytes"], int)
    assert [t["bytes"] for t in big] == sorted((t["bytes"] for t in big), reverse=True)
    assert all(t["bytes"] >= threshold_mb * MB for t in big)
    categories = {t["name"]: t["category"] for t in big}
    assert categories["2.weight"] == "parameters"
    assert categories["2.weight.grad"] == "gradients"
    assert categories["adam.exp_avg[2.weight]"] == "optimizer_state"

    with profiler(
        tmp_path / "top3", model=model, optimizer=opt, large_threshold_mb=threshold_mb, top_k=3
    ) as scope:
        top3 = take(scope)["large_tensors"]
    assert len(top3) == 3
    assert all(t["bytes"] == 1024 * 512 * 4 for t in top3)


# -- the gc scan -----------------------------------------------------------------------


def test_gc_scan_finds_tensor_held_outside_model_and_dedupes_views(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = MLP()
    opt = torch.optim.Adam(model.parameters())
    train_step(model, opt, torch.randn(4, 32))
    with profiler(
        tmp_path, model=model, optimizer=opt, scan="gc", large_threshold_mb=0.5, top_k=50
    ) as scope:
        gc.collect()
        before = take(scope)
        stash: list[torch.Tensor] = [torch.zeros(300, 1000)]  # 1.2 MB, only in this list
        stash.append(stash[0][10:20])  # views of it: no new bytes
        stash.append(stash[0].view(-1)[::7])
        stash.append(stash[0].t())
        after = take(scope, 1)
    own = nbytes(stash[0])
    assert own == 1_200_000
    cb, ca = before["categories_bytes"], after["categories_bytes"]
    assert isinstance(cb["other"], int) and isinstance(ca["other"], int)
    assert ca["other"] - cb["other"] == own
    assert after["tensor_count"] - before["tensor_count"] == 1
    assert after["census_bytes"] - before["census_bytes"] == own
    assert after["dtypes_bytes"]["float32"] - before["dtypes_bytes"]["float32"] == own
    # model and optimizer tensors stay in their own categories, not in `other`
    for key in ("parameters", "gradients", "optimizer_state", "buffers"):
        assert ca[key] == cb[key]
    assert ca["parameters"] == params_bytes(model)
    found = [t for t in after["large_tensors"] if t["bytes"] == own]
    assert len(found) == 1
    assert found[0]["category"] == "other" and found[0]["shape"] == [300, 1000]
    assert found[0]["name"] is None
    del stash


def test_fast_scan_does_not_report_other(tmp_path: Path) -> None:
    model = MLP()
    with profiler(tmp_path, model=model) as scope:
        stash = [torch.zeros(1000, 100)]  # noqa: F841
        r = take(scope)
    assert r["categories_bytes"]["other"] is None
    assert r["census_bytes"] == params_bytes(model)


class Hostile:
    """An object anywhere in the process whose ``__class__`` cannot be read (lazy proxies,
    half-torn-down wrappers): memory_profiler.py's ``gc.get_objects()`` walk skips such
    objects with try/except."""

    @property  # type: ignore[misc]
    def __class__(self) -> type:
        raise RuntimeError("no __class__ for you")


def test_gc_scan_survives_hostile_heap_object(tmp_path: Path) -> None:
    model = MLP()
    hostile = Hostile()
    with profiler(tmp_path, model=model, scan="gc") as scope, caught_warnings() as caught:
        r = scope.record(0)
    del hostile
    assert r is not None, [str(w.message) for w in caught]
    assert r["categories_bytes"]["parameters"] == params_bytes(model)


def test_gc_scan_emits_no_foreign_warnings(tmp_path: Path) -> None:
    import torch.distributed  # noqa: F401 - loaded by `import torch` anyway

    model = MLP()
    with profiler(tmp_path, model=model, scan="gc") as scope, caught_warnings() as caught:
        assert scope.record(0) is not None
    assert [str(w.message) for w in caught] == []


# -- census corner cases (regressions of bugs these tests found) -----------------------------------------------------------------


def test_sparse_gradient_counted_by_its_real_bytes(tmp_path: Path) -> None:
    emb = nn.Embedding(20_000, 16, sparse=True)
    emb(torch.tensor([1, 2, 3, 2])).sum().backward()
    grad = emb.weight.grad
    assert grad is not None and grad.is_sparse
    real = nbytes(grad._indices()) + nbytes(grad._values())
    assert real < 1000 < nbytes(emb.weight)
    with profiler(tmp_path, model=emb) as scope:
        r = take(scope)
    assert r["categories_bytes"]["gradients"] == real


def test_buffer_regrown_at_same_address_is_seen(tmp_path: Path) -> None:
    """A buffer freed and registered again bigger: the C allocator often hands back the same
    address, which must not leave the cached census stale (regression: the fingerprint
    once keyed buffers by address only)."""
    module = nn.Module()
    module.register_buffer("cache", torch.zeros(1000))
    reused = 0
    with profiler(tmp_path, model=module) as scope:
        assert take(scope)["categories_bytes"]["buffers"] == 4000
        for i, size in enumerate((1200, 1100, 1300, 1050, 1500, 1250, 1400)):
            old_ptr = module.cache.data_ptr()
            del module.cache
            module.register_buffer("cache", torch.zeros(size))
            reused += module.cache.data_ptr() == old_ptr
            assert take(scope, i + 1)["categories_bytes"]["buffers"] == size * 4
        # and a dtype change in place of the same number of bytes' worth of elements
        del module.cache
        module.register_buffer("cache", torch.zeros(700, dtype=torch.float64))
        r = take(scope, 99)
    assert r["categories_bytes"]["buffers"] == 5600
    assert r["dtypes_bytes"] == {"float64": 5600}


def tensors_in(value: object) -> list[torch.Tensor]:
    """Every tensor in an optimizer-state value, looking into lists, tuples and dicts."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in tensors_in(v)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in tensors_in(v)]
    return []


def test_lbfgs_history_counts_as_optimizer_state(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = nn.Linear(50, 20)
    opt = torch.optim.LBFGS(model.parameters(), history_size=5, max_iter=4)
    x, y = torch.randn(16, 50), torch.randn(16, 20)

    def closure() -> torch.Tensor:
        opt.zero_grad()
        loss = (model(x) - y).pow(2).mean()
        loss.backward()
        return loss

    for _ in range(3):
        opt.step(closure)
    (state,) = opt.state.values()
    assert len(state["old_dirs"]) == 5  # the history is there, in lists
    storages: dict[int, int] = {}
    for value in state.values():
        for t in tensors_in(value):
            storages[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
    expected = sum(storages.values())
    assert expected > 5 * 2 * nbytes(model.weight)
    with profiler(tmp_path, model=model, optimizer=opt) as scope:
        r = take(scope)
    assert r["categories_bytes"]["optimizer_state"] == expected


def test_a_replaced_parameter_is_not_kept_alive_by_the_profiler(tmp_path: Path) -> None:
    """Densification swaps parameters between records; gpuscope's cached lists must not
    hold the old ones (on a GPU that would be a memory spike until the next record)."""
    import weakref

    model = nn.Linear(64, 64)
    opt = torch.optim.Adam(model.parameters())
    with gpuscope.MemoryProfiler(tmp_path, model=model, optimizer=opt, every=1) as scope:
        scope.record(0)
        old = weakref.ref(model.weight)
        bigger = nn.Parameter(torch.randn(128, 64))
        opt.state.pop(model.weight, None)
        opt.param_groups[0]["params"][0] = bigger
        model.weight = bigger
        gc.collect()
        assert old() is None, "the replaced parameter is still referenced"
        record = scope.record(1)
    assert record is not None
    assert record["categories_bytes"]["parameters"] == (128 * 64 + 64) * 4
