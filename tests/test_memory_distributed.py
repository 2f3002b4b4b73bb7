"""Two real processes under torch.distributed (gloo, CPU), training a DistributedDataParallel
model with one ``gpuscope.MemoryProfiler`` each on the same run directory: one set of files
per rank, named as docs/run-dir.md says, every record carrying its rank, and the end-of-run
summary gathered over the ranks and printed by rank 0 only."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from _helpers import accumulator
from _memory_helpers import read_jsonl

WORLD = 2
ITERS = 6
EVERY = 2

WORKER = textwrap.dedent(
    """
    import json, os, sys, warnings
    import torch
    import torch.distributed as dist
    from torch import nn
    import gpuscope

    run_dir, out_dir = sys.argv[1], sys.argv[2]
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
    ddp = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.Adam(ddp.parameters(), lr=1e-2)
    scope = gpuscope.MemoryProfiler(run_dir, model=ddp, optimizer=opt, every=%(every)d)
    torch.manual_seed(100 + rank)
    x, y = torch.randn(8, 16), torch.randn(8, 4)
    for it in range(%(iters)d):
        loss = (ddp(x) - y).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        scope.step(it, losses={"mse": loss})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "CUDA is not available"
        try:
            with gpuscope.oom_guard(profiler=scope):
                raise torch.cuda.OutOfMemoryError("rank %%d ran out" %% rank)
        except torch.cuda.OutOfMemoryError:
            pass
    summaries = scope.print_summary()
    scope.close()
    expected = {
        "rank": rank,
        "world": dist.get_world_size(),
        "params": sum(p.numel() * p.element_size() for p in model.parameters()),
        "state": sum(
            v.numel() * v.element_size()
            for st in opt.state.values() for v in st.values() if torch.is_tensor(v)
        ),
        "summaries": summaries,
    }
    dist.barrier()
    dist.destroy_process_group()
    with open(os.path.join(out_dir, "rank%%d.json" %% rank), "w") as f:
        json.dump(expected, f)
    """
) % {"every": EVERY, "iters": ITERS}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def ranked_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    base = tmp_path_factory.mktemp("dist")
    script = base / "worker.py"
    script.write_text(WORKER)
    run_dir = base / "run"
    port = free_port()
    procs = []
    for rank in range(WORLD):
        env = dict(os.environ)
        env.update(
            MASTER_ADDR="127.0.0.1",
            MASTER_PORT=str(port),
            RANK=str(rank),
            WORLD_SIZE=str(WORLD),
            LOCAL_RANK=str(rank),
            GLOO_SOCKET_IFNAME="lo",
            OMP_NUM_THREADS="1",
        )
        env.pop("GPUSCOPE_PROFILE", None)
        procs.append(
            subprocess.Popen(
                [sys.executable, str(script), str(run_dir), str(base)],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    outputs = []
    try:
        for p in procs:
            out, err = p.communicate(timeout=120)
            outputs.append((p.returncode, out, err))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    for rank, (code, out, err) in enumerate(outputs):
        assert code == 0, f"rank {rank} failed:\n{out}\n{err[-3000:]}"
    expected = [json.loads((base / f"rank{r}.json").read_text()) for r in range(WORLD)]
    return {"run_dir": run_dir, "outputs": outputs, "expected": expected}


def test_one_set_of_files_per_rank(ranked_run: dict[str, Any]) -> None:
    run_dir: Path = ranked_run["run_dir"]
    profiles = run_dir / "profiles"
    assert sorted(p.name for p in profiles.glob("memory*.jsonl")) == [
        "memory.rank0.jsonl",
        "memory.rank1.jsonl",
    ]
    logs = sorted(p.name for p in profiles.glob("tensor_profile_*.log"))
    assert len(logs) == WORLD
    for rank, name in enumerate(logs):
        assert re.fullmatch(rf"tensor_profile_\d{{8}}_\d{{6}}\.rank{rank}\.log", name), logs
    tb = run_dir / "tensorboard"
    assert sorted(p.name for p in tb.iterdir()) == ["rank0", "rank1"]
    for rank in range(WORLD):
        events = list((tb / f"rank{rank}").glob("events.out.tfevents.*"))
        assert len(events) == 1


def test_records_carry_their_rank(ranked_run: dict[str, Any]) -> None:
    run_dir: Path = ranked_run["run_dir"]
    for rank in range(WORLD):
        expected = ranked_run["expected"][rank]
        assert expected["rank"] == rank and expected["world"] == WORLD
        records = read_jsonl(run_dir / "profiles" / f"memory.rank{rank}.jsonl")
        due = [r for r in records if r["iteration"] % EVERY == 0 and r["losses"]]
        assert [r["iteration"] for r in due] == list(range(0, ITERS, EVERY))
        for r in records:
            assert r["rank"] == rank
            assert r["device"] == "cpu"
            assert r["categories_bytes"]["parameters"] == expected["params"]
            assert r["categories_bytes"]["optimizer_state"] == expected["state"]
        text = next((run_dir / "profiles").glob(f"tensor_profile_*.rank{rank}.log")).read_text()
        assert re.findall(r"Iteration (\d+)", text) == [str(r["iteration"]) for r in records]
        acc = accumulator(run_dir / "tensorboard" / f"rank{rank}")
        steps = [e.step for e in acc.Scalars("TensorProfiling/Tensor_Category/parameters_MB")]
        assert steps == [r["iteration"] for r in records]
        losses = {e.step: e.value for e in acc.Scalars("Loss/component_mse")}
        assert sorted(losses) == list(range(0, ITERS, EVERY))


def test_summary_gathered_and_printed_by_rank0_only(ranked_run: dict[str, Any]) -> None:
    (_, out0, _), (_, out1, _) = ranked_run["outputs"]
    assert "gpuscope memory summary" in out0
    assert "gpuscope memory summary" not in out1
    rows = [line.split() for line in out0.splitlines() if re.match(r"\s+\d+\s+\d+\s", line)]
    assert [row[0] for row in rows] == ["0", "1"]
    for rank in range(WORLD):
        expected = ranked_run["expected"][rank]
        summaries = expected["summaries"]  # all_gather_object: every rank gets all
        assert [s["rank"] for s in summaries] == [0, 1]
        mine = summaries[rank]
        # 3 scheduled records + the one oom_guard took
        assert mine["records"] == ITERS // EVERY + 1
        assert mine["peak_census_bytes"] == expected["params"] + expected["state"]


def test_oom_reports_per_rank(ranked_run: dict[str, Any]) -> None:
    snapshots = ranked_run["run_dir"] / "snapshots"
    reports = sorted(snapshots.glob("*.txt"))
    assert len(reports) == WORLD
    for rank in range(WORLD):
        (mine,) = [p for p in reports if f"rank{rank}" in p.name]
        assert f"rank {rank} ran out" in mine.read_text()


def test_oom_report_names_follow_run_dir_doc(ranked_run: dict[str, Any]) -> None:
    snapshots = ranked_run["run_dir"] / "snapshots"
    names = sorted(p.name for p in snapshots.iterdir())
    for rank in range(WORLD):
        assert any(re.fullmatch(rf"oom\.rank{rank}\.\d{{8}}_\d{{6}}\.txt", n) for n in names), names
