//! The kernel and operator tables of traces as flat files, one row per event, for the
//! engines people already query thousands of rank files with (DuckDB, Spark, pandas):
//! `kernels.csv` (GPU work) and `operators.csv` (CPU operators).

use std::io::{self, Write};

use crate::analysis::trace::kernel_type::KernelType;
use crate::model::trace::{Kind, NONE, NO_SHAPES};
use crate::trace::TraceFile;

/// Columns of `kernels.csv`.
pub const KERNEL_COLUMNS: [&str; 11] = [
    "rank",
    "name",
    "kind",
    "kernel_type",
    "ts_us",
    "dur_us",
    "stream",
    "device",
    "correlation",
    "external_id",
    "bytes",
];

/// Columns of `operators.csv`.
pub const OPERATOR_COLUMNS: [&str; 8] = [
    "rank",
    "name",
    "ts_us",
    "dur_us",
    "pid",
    "tid",
    "external_id",
    "input_shapes",
];

fn optional(v: i64) -> String {
    if v == NONE {
        String::new()
    } else {
        v.to_string()
    }
}

fn us(ns: i64) -> String {
    format!("{:.3}", ns as f64 / 1000.0)
}

/// Writes every GPU event of `traces` as CSV.
pub fn kernels_csv(traces: &[TraceFile], out: &mut dyn Write) -> io::Result<()> {
    let mut w = csv::Writer::from_writer(out);
    w.write_record(KERNEL_COLUMNS)?;
    for t in traces {
        let (tr, e) = (&t.trace, &t.trace.events);
        for i in (0..e.len()).filter(|&i| e.kind[i].is_gpu()) {
            let name = tr.names.get(e.name[i]);
            w.write_record([
                tr.rank.to_string(),
                name.to_owned(),
                e.kind[i].label().to_owned(),
                KernelType::of(name).label().to_owned(),
                us(e.ts[i]),
                us(e.dur[i]),
                optional(e.stream[i]),
                optional(e.device[i]),
                optional(e.correlation[i]),
                optional(e.external_id[i]),
                optional(e.bytes[i]),
            ])?;
        }
    }
    w.flush()
}

/// Writes every CPU operator of `traces` as CSV.
pub fn operators_csv(traces: &[TraceFile], out: &mut dyn Write) -> io::Result<()> {
    let mut w = csv::Writer::from_writer(out);
    w.write_record(OPERATOR_COLUMNS)?;
    for t in traces {
        let (tr, e) = (&t.trace, &t.trace.events);
        for i in (0..e.len()).filter(|&i| e.kind[i] == Kind::CpuOp) {
            w.write_record([
                tr.rank.to_string(),
                tr.names.get(e.name[i]).to_owned(),
                us(e.ts[i]),
                us(e.dur[i]),
                optional(e.pid[i]),
                optional(e.tid[i]),
                optional(e.external_id[i]),
                if e.shapes[i] == NO_SHAPES {
                    String::new()
                } else {
                    tr.names.get(e.shapes[i]).to_owned()
                },
            ])?;
        }
    }
    w.flush()
}
