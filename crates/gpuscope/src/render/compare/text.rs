//! `gpuscope compare` as text: the two runs, each rank's figures and verdicts, the sites
//! at the snapshot peaks, then the gate with one line per regression.

use std::io::{self, Write};

use super::{figure_rows, gate_headline, site_rows, step_label, verdict, Row};
use crate::model::compare::{RunComparison, Side};
use crate::render::{paragraph, right_align, table, write_table};

/// The comparison in `width` columns.
pub fn text(c: &RunComparison, width: u16, out: &mut dyn Write) -> io::Result<()> {
    writeln!(out, "{}", "=".repeat(width.min(80) as usize))?;
    writeln!(out, "COMPARISON: NEW against BASE")?;
    writeln!(out, "{}", "=".repeat(width.min(80) as usize))?;
    paragraph(out, &format!("BASE: {}", describe(&c.base)), width)?;
    paragraph(out, &format!("NEW:  {}", describe(&c.new)), width)?;
    if c.step_source.is_none() {
        paragraph(
            out,
            "Step time: the runs share no source of it (profiler steps, timed sections, or \
             two records apart in time).",
            width,
        )?;
    }
    let step = step_label(c);
    for rank in &c.ranks {
        writeln!(out)?;
        figures(
            out,
            &format!("rank {}", rank.rank),
            &figure_rows(rank, &step),
            width,
        )?;
        let mut t = table(width);
        t.set_header(["verdict", "base", "new"]);
        for pair in &rank.checks {
            t.add_row([
                pair.check.to_string(),
                verdict(&pair.base).to_owned(),
                verdict(&pair.new).to_owned(),
            ]);
        }
        writeln!(out)?;
        write_table(out, &t)?;
        for pair in &rank.checks {
            for (which, finding) in [("BASE", &pair.base), ("NEW", &pair.new)] {
                if let Some(f) = finding.as_ref().filter(|f| f.found) {
                    paragraph(out, &format!("{which} {}: {}", pair.check, f.detail), width)?;
                }
            }
        }
    }
    let sites = site_rows(c);
    if !sites.is_empty() {
        writeln!(out)?;
        writeln!(out, "Call sites alive at the snapshot peak:")?;
        figures(out, "site", &sites, width)?;
    }
    writeln!(out)?;
    paragraph(out, &format!("Gate: {}", gate_headline(c)), width)?;
    for r in &c.regressions {
        paragraph(out, &format!("  {}", r.line), width)?;
    }
    for u in &c.unchecked {
        paragraph(
            out,
            &format!("  not checked: {}: {}", u.rule, u.reason),
            width,
        )?;
    }
    Ok(())
}

/// `path (ranks 0, 1; 17 records; 1 trace; timed sections; snapshot iter30.pickle)`.
fn describe(side: &Side) -> String {
    let ranks: Vec<String> = side.ranks.iter().map(ToString::to_string).collect();
    let mut parts = vec![
        format!(
            "rank{} {}",
            if ranks.len() == 1 { "" } else { "s" },
            ranks.join(", ")
        ),
        format!("{} records", side.records),
    ];
    match side.traces.len() {
        0 => {}
        1 => parts.push("1 trace".to_owned()),
        n => parts.push(format!("{n} traces")),
    }
    if side.sections {
        parts.push("timed sections".to_owned());
    }
    if let Some(snapshot) = &side.snapshot {
        let name = snapshot.file_name().unwrap_or(snapshot.as_os_str());
        parts.push(format!("snapshot {}", name.to_string_lossy()));
    }
    format!("{} ({})", side.path.display(), parts.join("; "))
}

/// A table of rows named in its first column `name`, base, new and change right-aligned.
fn figures(out: &mut dyn Write, name: &str, rows: &[Row], width: u16) -> io::Result<()> {
    let mut t = table(width);
    t.set_header([name, "base", "new", "change"]);
    for r in rows {
        t.add_row(r.iter());
    }
    right_align(&mut t, &[1, 2, 3]);
    write_table(out, &t)
}
