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
use crate::render::{unsupported, Format, Render};

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

/// A memory timeline by category with the path it was read from.
pub struct Timeline<'a> {
    /// The exported file.
    pub path: &'a Path,
    /// Its events by category.
    pub timeline: &'a CategoryTimeline,
}

impl Render for Timeline<'_> {
    fn render(&self, format: Format, width: u16, out: &mut dyn Write) -> io::Result<()> {
        match format {
            Format::Text => text(self.path, self.timeline, width, out),
            Format::Json => json(self.path, self.timeline, out),
            Format::Html => html(self.path, self.timeline, out),
            Format::Csv => Err(unsupported("a memory timeline", format)),
        }
    }
}
