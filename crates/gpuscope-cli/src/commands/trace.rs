//! `gpuscope trace`: analyse PyTorch profiler traces, or compare two.

use std::path::{Path, PathBuf};

use gpuscope::analysis::memory_timeline::category_timeline;
use gpuscope::analysis::trace::diff::diff;
use gpuscope::analysis::trace::ranks::compare_ranks;
use gpuscope::analysis::trace::report::report;
use gpuscope::analysis::trace::scope::{scope, Clock};
use gpuscope::formats::trace::export::{self as export, TableFormat};
use gpuscope::render::memory_timeline as memory;
use gpuscope::render::trace as render;

use gpuscope::formats::memory_timeline::{is_memory_timeline, read_memory_timeline};
use gpuscope::formats::trace::{load_traces, TraceFile};

use crate::args::{ExportFormat, TraceArgs, TraceFormat};
use crate::{output, Failure};

pub fn run(args: TraceArgs) -> Result<(), Failure> {
    let (clock, clock_name) = if args.hta_compat {
        (Clock::HtaRounded, "hta-rounded")
    } else {
        (Clock::Exact, "exact")
    };
    // A comparison is text or JSON; asked for HTML it is refused before anything is read
    // (JSON in a `.html` file is not the page that was asked for).
    let diff_in_json = match (&args.diff, args.format) {
        (Some(_), TraceFormat::Html) => {
            return Err(Failure::Usage(
                "trace --diff has no HTML page: use --format text or --format json for the \
                 comparison"
                    .to_owned(),
            ))
        }
        (_, format) => matches!(format, TraceFormat::Json),
    };
    output::not_an_input(
        args.output.as_deref(),
        &[Some(&args.path), args.diff.as_deref()],
    )?;
    if args.path.is_file() && is_memory_timeline(&args.path) {
        return memory_timeline(&args);
    }
    let traces = load(&args.path)?;
    if let Some(format) = args.export {
        let dir = args.output.clone().unwrap_or_else(|| PathBuf::from("."));
        let format = match format {
            ExportFormat::Csv => TableFormat::Csv,
            ExportFormat::Parquet => TableFormat::Parquet,
        };
        for path in export::export(&traces, format, &dir)? {
            eprintln!("wrote {}", path.display());
        }
        return Ok(());
    }
    let mut out = output::open(args.output.as_deref())?;
    if let Some(other) = &args.diff {
        let others = load(other)?;
        let (a, b) = (&traces[0], &others[0]);
        let d = diff(
            (&a.trace, &scope(&a.trace, clock)),
            (&b.trace, &scope(&b.trace, clock)),
        );
        if diff_in_json {
            render::diff_json(&a.path, &b.path, &d, &mut out)?;
        } else {
            render::diff_text(&a.path, &b.path, &d, output::text_width(), &mut out)?;
        }
        out.flush()?;
        return Ok(());
    }
    let ranks = report(&traces, clock, args.top);
    let comparison = compare_ranks(&ranks);
    match args.format {
        TraceFormat::Text => {
            let width = output::text_width();
            render::text(&ranks, width, &mut out)?;
            if let Some(c) = &comparison {
                render::ranks_text(c, width, &mut out)?;
            }
        }
        TraceFormat::Json => render::json(&ranks, comparison.as_ref(), clock_name, &mut out)?,
        TraceFormat::Html => render::html::html(&ranks, comparison.as_ref(), &mut out)?,
    }
    out.flush()?;
    Ok(())
}

/// torch.profiler's raw memory timeline by category.
fn memory_timeline(args: &TraceArgs) -> Result<(), Failure> {
    let events = read_memory_timeline(&args.path, &mut output::progress("reading"))?;
    let Some(t) = category_timeline(events) else {
        return Err(Failure::Usage(format!(
            "{}: the memory timeline has no events",
            args.path.display()
        )));
    };
    let mut out = output::open(args.output.as_deref())?;
    match args.format {
        TraceFormat::Text => memory::text(&args.path, &t, output::text_width(), &mut out)?,
        TraceFormat::Json => memory::json(&args.path, &t, &mut out)?,
        TraceFormat::Html => memory::html(&args.path, &t, &mut out)?,
    }
    out.flush()?;
    Ok(())
}

/// The traces at `path`; files of a directory that are not traces are named on stderr.
fn load(path: &Path) -> Result<Vec<TraceFile>, Failure> {
    let loaded = load_traces(path, &mut output::progress("reading"))?;
    for why in &loaded.skipped {
        eprintln!("skipped {why}");
    }
    Ok(loaded.traces)
}
