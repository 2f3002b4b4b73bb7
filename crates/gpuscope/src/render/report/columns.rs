//! A run directory's tables as columns, for `gpuscope.Run` in a notebook: the memory
//! records (nested figures flattened), the timed sections and gradient flow of each
//! record, the non-finite events, the GPU samples, and the diagnosis's findings.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use crate::analysis::diagnosis::Diagnosis;
use crate::model::run::RunRead;
use crate::render::columns::Columns;

/// The parts of a record that are tables of their own, left out of the `records` table.
const RECORD_PARTS: [&str; 5] = [
    "modules_bytes",
    "dtypes_bytes",
    "large_tensors",
    "sections",
    "gradients",
];

/// `value` (an object) with `extra` keys first.
fn with(extra: Value, value: Value) -> Value {
    let (Value::Object(mut out), Value::Object(rest)) = (extra, value) else {
        return Value::Null;
    };
    out.extend(rest);
    Value::Object(out)
}

fn value(x: impl serde::Serialize) -> Value {
    serde_json::to_value(x).unwrap_or(Value::Null)
}

/// The tables of `run` by name: `records`, `sections`, `gradients`, `nonfinite`,
/// `gpu_samples`; a table without rows is absent.
pub fn run_tables(run: &RunRead) -> BTreeMap<&'static str, Columns> {
    let mut t: BTreeMap<&'static str, Columns> = BTreeMap::new();
    for rank in &run.ranks {
        for r in &rank.records {
            let mut row = value(r);
            if let Value::Object(map) = &mut row {
                for part in RECORD_PARTS {
                    map.remove(part);
                }
            }
            t.entry("records").or_default().push(row, &[]);
            let at = json!({"iteration": r.iteration, "rank": r.rank});
            for (name, stats) in &r.sections {
                let row = with(with(at.clone(), json!({"section": name})), value(stats));
                t.entry("sections").or_default().push(row, &[]);
            }
            if let Some(g) = &r.gradients {
                let row = with(
                    json!({"record_iteration": r.iteration, "rank": r.rank}),
                    value(g),
                );
                t.entry("gradients").or_default().push(row, &[]);
            }
        }
        for e in &rank.nonfinite {
            let row = with(json!({"rank": rank.rank}), value(e));
            t.entry("nonfinite").or_default().push(row, &[]);
        }
    }
    for sample in &run.samples {
        for gpu in &sample.gpus {
            let row = with(
                json!({"time": sample.time, "source": sample.source}),
                value(gpu),
            );
            t.entry("gpu_samples").or_default().push(row, &[]);
        }
    }
    t
}

/// The findings of `diagnoses`, one row each (the evidence kept whole).
pub fn findings_table(diagnoses: &[Diagnosis]) -> Columns {
    let mut findings = Columns::default();
    for d in diagnoses {
        findings.extend(&d.findings, &["evidence"]);
    }
    findings
}
