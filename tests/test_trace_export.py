"""`gpuscope trace --export csv|parquet`: the kernel and operator tables of real traces,
read back by DuckDB (an engine people query such tables with), agree with the traces'
own events counted here from the JSON, and the CSV and Parquet files agree row for row."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

duckdb = pytest.importorskip("duckdb")

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data" / "traces"
RANKS = ["sampled_rank0.json.gz", "sampled_rank1.json.gz"]
GPU_CATEGORIES = {"kernel", "gpu_memcpy", "gpu_memset", "Kernel", "Memcpy", "Memset"}


def events(name: str) -> list[dict[str, Any]]:
    with gzip.open(SHARED / name) as f:
        doc: dict[str, Any] = json.load(f)
    return [e for e in doc["traceEvents"] if e.get("ph") == "X"]


@pytest.fixture(scope="module")
def tables(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("export")
    traces = root / "traces"
    traces.mkdir()
    for name in RANKS:
        (traces / name).symlink_to(SHARED / name)
    out = root / "tables"
    for fmt in ("csv", "parquet"):
        subprocess.run(
            [
                sys.executable,
                "-m",
                "gpuscope",
                "trace",
                str(traces),
                "--export",
                fmt,
                "-o",
                str(out),
            ],
            check=True,
            capture_output=True,
        )
    return out


def query(sql: str) -> list[tuple[Any, ...]]:
    rows: list[tuple[Any, ...]] = duckdb.sql(sql).fetchall()
    return rows


def test_every_gpu_event_is_a_row_with_its_exact_duration(tables: Path) -> None:
    parquet = tables / "kernels.parquet"
    for rank, name in enumerate(RANKS):
        gpu = [e for e in events(name) if e.get("cat") in GPU_CATEGORIES]
        ((count, total),) = query(
            f"select count(*), sum(dur_ns) from '{parquet}' where rank = {rank}"
        )
        assert count == len(gpu)
        assert total == sum(round(e["dur"] * 1000) for e in gpu)


def test_every_cpu_operator_is_a_row(tables: Path) -> None:
    parquet = tables / "operators.parquet"
    for rank, name in enumerate(RANKS):
        ops = [e for e in events(name) if e.get("cat") in ("cpu_op", "Operator")]
        ((count,),) = query(f"select count(*) from '{parquet}' where rank = {rank}")
        assert count == len(ops)
        top = max(ops, key=lambda e: e["dur"])
        ((dur,),) = query(
            f"select max(dur_ns) from '{parquet}' where rank = {rank} and name = '{top['name']}'"
        )
        assert dur == round(top["dur"] * 1000)


@pytest.mark.parametrize("table", ["kernels", "operators"])
def test_csv_and_parquet_hold_the_same_rows(tables: Path, table: str) -> None:
    parquet, csv = tables / f"{table}.parquet", tables / f"{table}.csv"
    columns = "rank, name, ts_ns, dur_ns"
    difference = query(
        f"(select {columns} from '{parquet}' except all select {columns} from read_csv_auto('{csv}'))"
        f" union all "
        f"(select {columns} from read_csv_auto('{csv}') except all select {columns} from '{parquet}')"
    )
    assert difference == []
