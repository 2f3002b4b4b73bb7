//! `gpuscope snapshot`: analyse a CUDA allocator snapshot, or compare two.

use std::path::Path;

use gpuscope::analysis::snapshot::diff::diff;
use gpuscope::analysis::snapshot::{snapshot_report, Options};
use gpuscope::model::snapshot::Snapshot;
use gpuscope::render::snapshot as render;

use gpuscope::formats::snapshot::{read_snapshot, Parts};

use crate::args::{ReportFormat, SnapshotArgs};
use crate::{output, Failure};

pub fn run(args: SnapshotArgs) -> Result<(), Failure> {
    output::not_an_input(
        args.output.as_deref(),
        &[Some(&args.path), args.diff.as_deref()],
    )?;
    let width = output::text_width();
    if let Some(other) = &args.diff {
        // A comparison is of the blocks alive at each dump: the traces are not needed.
        let before = read(&args.path, Parts::Segments)?;
        let d = diff(&before, &read(other, Parts::Segments)?, args.frames);
        let mut out = output::open(args.output.as_deref())?;
        match args.format {
            ReportFormat::Text => render::diff_text(&args.path, other, &d, width, &mut out)?,
            ReportFormat::Json => render::diff_json(&args.path, other, &d, &mut out)?,
            ReportFormat::Html => render::html::diff_html(&args.path, other, &d, &mut out)?,
        }
        out.flush()?;
        return Ok(());
    }
    let options = Options {
        frames: args.frames,
        top: args.top,
        requests: args.request.clone(),
        ..Options::default()
    };
    let parts = if args.no_trace {
        Parts::Segments
    } else {
        Parts::All
    };
    let snapshot = read(&args.path, parts)?;
    let report = snapshot_report(&snapshot, args.path.clone(), &options);
    let mut out = output::open(args.output.as_deref())?;
    match args.format {
        ReportFormat::Text => render::text(&report, width, &mut out)?,
        ReportFormat::Json => render::json(&report, &mut out)?,
        ReportFormat::Html => render::html::html(&report, &mut out)?,
    }
    out.flush()?;
    Ok(())
}

fn read(path: &Path, parts: Parts) -> Result<Snapshot, Failure> {
    Ok(read_snapshot(
        path,
        parts,
        &mut output::progress("reading"),
    )?)
}
