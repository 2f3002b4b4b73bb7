//! Renders torch.profiler's raw memory timeline by category: the
//! `gpuscope.memory-timeline/1` JSON document here, text in [`text`], a page with a
//! stacked chart in [`html`].

mod html;
mod text;

pub use html::html;
pub use text::text;

use std::io::{self, Write};
use std::path::Path;

use serde::Serialize;

use crate::analysis::memory_timeline::CategoryTimeline;
use crate::render::units::{figure, ByteUnit};

/// JSON schema name and version of [`json`]'s output.
pub const SCHEMA: &str = "gpuscope.memory-timeline/1";

/// The figures in MB of 2^20 bytes, one decimal, as the other memory outputs.
fn mb(bytes: i64) -> String {
    figure(bytes as f64, ByteUnit::Mib, 1)
}

#[derive(Serialize)]
struct JsonDoc<'a> {
    schema: &'static str,
    path: &'a Path,
    #[serde(flatten)]
    timeline: &'a CategoryTimeline,
}

/// The `gpuscope.memory-timeline/1` document.
pub fn json(path: &Path, t: &CategoryTimeline, out: &mut dyn Write) -> io::Result<()> {
    let doc = JsonDoc {
        schema: SCHEMA,
        path,
        timeline: t,
    };
    serde_json::to_writer_pretty(&mut *out, &doc).map_err(io::Error::from)?;
    writeln!(out)
}
