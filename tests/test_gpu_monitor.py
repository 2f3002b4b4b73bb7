"""``gpuscope monitor`` and ``gpuscope run`` through the pip-installed command: the monitor's
TensorBoard scalars read back with TensorBoard's own EventAccumulator, Ctrl-C ending the
monitor with its peaks (no traceback), and ``gpuscope run`` around a real CPU training
(examples/tiny_train.py) that writes into the same run directory."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from _helpers import (
    REPO_ROOT,
    SHARED_DATA,
    accumulator,
    f32,
    gpuscope_cli,
    shared_data_absent,
)

RTX2070 = SHARED_DATA / "nvidia-smi" / "nvidia-htop__FAKE_STDIN_NEW_FORMAT__driver450_RTX2070.txt"


@pytest.fixture
def saved_table() -> Path:
    """A real driver-450 nvidia-smi table with two GPUs (RTX 2070, GTX 750 Ti)."""
    if not RTX2070.is_file():
        shared_data_absent(RTX2070)
    return RTX2070


def test_monitor_scalars_read_back_with_event_accumulator(
    tmp_path: Path, saved_table: Path
) -> None:
    tb = tmp_path / "tb"
    args: list[str | Path] = ["monitor", "--count", "3", "--interval", "0.1", "--from", saved_table]
    result = gpuscope_cli(*args, "--tensorboard", tb)
    assert result.returncode == 0, result.stderr
    acc = accumulator(tb)
    tags = set(acc.Tags()["scalars"])
    assert {"GPU/0/memory_used_MB", "GPU/1/power_W", "Host/ram_used_MB"} <= tags
    assert not any(t.startswith("System/") for t in tags)
    used = acc.Scalars("GPU/0/memory_used_MB")
    assert [e.step for e in used] == [0, 1, 2]
    assert {e.value for e in used} == {749.0}
    # 871 MiB of 2002 MiB in use on the GTX 750 Ti, by the table.
    share = acc.Scalars("GPU/1/memory_percent")[0].value
    assert share == f32(871 / 2002 * 100)
    assert acc.Scalars("GPU/0/utilization_percent")[0].value == 2.0
    assert used[0].wall_time > 1.7e9


def test_ctrl_c_ends_the_pip_installed_monitor_with_its_peaks(saved_table: Path) -> None:
    cmd = [sys.executable, "-m", "gpuscope", "monitor", "--interval", "0.2", "--from"]
    with subprocess.Popen(
        [*cmd, str(saved_table)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as proc:
        time.sleep(2.0)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert "Traceback" not in err
    assert "Peaks over " in out
    assert "GPU 0 GeForce RTX 2070: peak memory 749 MiB" in out


def test_run_records_a_cpu_training_into_its_run_directory(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    train = REPO_ROOT / "examples" / "tiny_train.py"
    args: list[str | Path] = ["run", "--logdir", run_dir, "--interval", "0.25", "--"]
    args += [sys.executable, train]
    result = gpuscope_cli(*args, timeout=600)
    assert result.returncode == 0, result.stderr
    samples = [json.loads(line) for line in (run_dir / "gpu.jsonl").read_text().splitlines()]
    assert len(samples) >= 2
    assert all(s["schema"] == "gpuscope.gpu_sample/1" for s in samples)
    trees = [s["tree"] for s in samples if "tree" in s]
    assert trees, "no sample of the training's process tree"
    # Python with torch imported holds well over 50 MiB resident.
    assert max(t["rss_bytes"] for t in trees) > 50 << 20
    assert all(t["root_pid"] == trees[0]["root_pid"] for t in trees)
    # The training wrote its own files into the run directory it was given.
    assert (run_dir / "profiles" / "memory.jsonl").stat().st_size > 0
    assert list((run_dir / "profiles").glob("tensor_profile_*.log"))
    assert len(list((run_dir / "tensorboard").glob("events.out.tfevents.*"))) >= 2
    assert f"wrote {run_dir}" in result.stdout
    assert "exited with code 0" in result.stderr
    assert "Command: peak RSS " in result.stderr


def test_run_passes_on_a_death_by_signal(tmp_path: Path) -> None:
    result = gpuscope_cli("run", "--logdir", tmp_path, "--", "sh", "-c", "kill -TERM $$")
    assert result.returncode == 128 + signal.SIGTERM, result.stderr
