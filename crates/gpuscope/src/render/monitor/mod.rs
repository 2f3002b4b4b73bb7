//! Renders GPU samples (`gpuscope monitor`, `gpuscope run`): one JSON line per sample and
//! the `gpuscope.gpu_summary/1` document of the peaks here; the monitor's line, the
//! `--watch` table and the summary of peaks as text in [`text`].

mod text;

pub use text::{line_text, summary_text, watch};

use std::io::{self, Write};

use serde::Serialize;

use crate::analysis::gpu_peaks::Peaks;
use crate::model::gpu::Sample;

/// The schema of the summary's JSON.
pub const SUMMARY_SCHEMA: &str = "gpuscope.gpu_summary/1";

/// One sample as one line of JSON (the same object as a `gpu.jsonl` line).
pub fn json_line(sample: &Sample, out: &mut dyn Write) -> io::Result<()> {
    serde_json::to_writer(&mut *out, sample).map_err(io::Error::from)?;
    writeln!(out)
}

#[derive(Serialize)]
struct SummaryDoc<'a> {
    schema: &'static str,
    duration_us: Option<u64>,
    #[serde(flatten)]
    peaks: &'a Peaks,
}

/// The peaks as one JSON line, with `schema` and `duration_us`.
pub fn summary_json(peaks: &Peaks, duration_s: Option<f64>, out: &mut dyn Write) -> io::Result<()> {
    let doc = SummaryDoc {
        schema: SUMMARY_SCHEMA,
        duration_us: duration_s.map(|s| (s * 1e6).round() as u64),
        peaks,
    };
    serde_json::to_writer(&mut *out, &doc).map_err(io::Error::from)?;
    writeln!(out)
}
