//! `gpuscope trace DIR` written rank by rank: each report is rendered as it arrives and
//! then dropped, so a directory of thousands of ranks never holds their reports. The JSON
//! is written as it goes: the `gpuscope.trace/1` document of [`super::json`], its members
//! in another order (what needs every rank, the health and the comparison, after
//! `ranks`). The text sets each rank's lines aside in an unnamed temporary file (gone when
//! closed), so that it opens with the health as a single trace's does without holding
//! them. The HTML page needs every report at once and keeps them.

use std::fs::File;
use std::io::{self, BufWriter, Seek, SeekFrom, Write};

use crate::analysis::trace::health::HealthIssue;
use crate::analysis::trace::ranks::RankComparison;
use crate::analysis::trace::report::RankReport;
use crate::analysis::trace::scope::Clock;
use crate::render::{unsupported, Format};

use super::{health_text, html, ranks_text, text, SCHEMA};

/// Spaces before a rank's members in the pretty document (inside `{` and `"ranks": [`).
const RANK_INDENT: &[u8] = b"\n    ";
/// Spaces before a top-level member's nested lines.
const MEMBER_INDENT: &[u8] = b"\n  ";

/// A trace report written as its ranks arrive.
pub struct RankStream<'a> {
    format: Format,
    width: u16,
    clock: Clock,
    out: &'a mut dyn Write,
    /// Ranks written so far.
    written: usize,
    /// The ranks' text, written after the health (created at the first rank).
    text: Option<BufWriter<File>>,
    /// The reports an HTML page waits for.
    kept: Vec<RankReport>,
}

impl<'a> RankStream<'a> {
    /// A report in `format` into `out`; nothing is written before the first rank, so a
    /// directory without any usable trace leaves `out` untouched.
    pub fn new(
        format: Format,
        width: u16,
        clock: Clock,
        out: &'a mut dyn Write,
    ) -> io::Result<RankStream<'a>> {
        if format == Format::Csv {
            return Err(unsupported("a trace report", format));
        }
        Ok(RankStream {
            format,
            width,
            clock,
            out,
            written: 0,
            text: None,
            kept: Vec::new(),
        })
    }

    /// Ranks written (or kept for the page) so far.
    pub fn ranks(&self) -> usize {
        self.written
    }

    /// Writes the report of the next rank.
    pub fn rank(&mut self, report: RankReport) -> io::Result<()> {
        self.written += 1;
        match self.format {
            Format::Json => {
                if self.written == 1 {
                    write!(
                        self.out,
                        "{{\n  \"schema\": \"{SCHEMA}\",\n  \"clock\": \"{}\",\n  \"ranks\": [",
                        self.clock.name()
                    )?;
                } else {
                    write!(self.out, ",")?;
                }
                self.out.write_all(RANK_INDENT)?;
                indented(&report, RANK_INDENT, self.out)
            }
            Format::Text => {
                let aside = match &mut self.text {
                    Some(aside) => aside,
                    None => self.text.insert(BufWriter::new(tempfile::tempfile()?)),
                };
                text(std::slice::from_ref(&report), self.width, aside)
            }
            _ => {
                self.kept.push(report);
                Ok(())
            }
        }
    }

    /// Ends the report with what spans the ranks.
    pub fn finish(
        self,
        health: &[HealthIssue],
        comparison: Option<&RankComparison>,
    ) -> io::Result<()> {
        match self.format {
            Format::Json => {
                write!(self.out, "\n  ],\n  \"health\": ")?;
                indented(&health, MEMBER_INDENT, self.out)?;
                if let Some(c) = comparison {
                    write!(self.out, ",\n  \"rank_comparison\": ")?;
                    indented(c, MEMBER_INDENT, self.out)?;
                }
                writeln!(self.out, "\n}}")
            }
            Format::Text => {
                health_text(health, self.width, self.out)?;
                if let Some(aside) = self.text {
                    let mut file = aside.into_inner().map_err(|e| e.into_error())?;
                    file.seek(SeekFrom::Start(0))?;
                    io::copy(&mut file, self.out)?;
                }
                comparison.map_or(Ok(()), |c| ranks_text(c, self.width, self.out))
            }
            _ => html::html(health, &self.kept, comparison, self.out),
        }
    }
}

/// `value` as pretty JSON whose nested lines start with `indent` (a newline and spaces).
fn indented(value: &impl serde::Serialize, indent: &[u8], out: &mut dyn Write) -> io::Result<()> {
    let json = serde_json::to_vec_pretty(value).map_err(io::Error::from)?;
    for (k, line) in json.split(|&b| b == b'\n').enumerate() {
        if k > 0 {
            out.write_all(indent)?;
        }
        out.write_all(line)?;
    }
    Ok(())
}
