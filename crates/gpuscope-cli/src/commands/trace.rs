//! `gpuscope trace`: analyse PyTorch profiler traces, or compare two.

use std::path::{Path, PathBuf};

use gpuscope::render::memory_timeline::Timeline;
use gpuscope::render::trace::tables::{write_tables, TableFormat, TABLES};
use gpuscope::{
    analyze_traces, category_timeline, create_dir, diff_traces, is_memory_timeline, load_traces,
    read_memory_timeline, write_file, Clock, Compared, TraceFile,
};

use crate::args::{ExportFormat, ReportFormat, TraceArgs};
use crate::{output, Failure};

pub fn run(args: TraceArgs) -> Result<(), Failure> {
    let clock = if args.hta_compat {
        Clock::HtaRounded
    } else {
        Clock::Exact
    };
    // A comparison is text or JSON; asked for HTML it is refused before anything is read
    // (JSON in a `.html` file is not the page that was asked for).
    if let (Some(_), ReportFormat::Html) = (&args.diff, args.format) {
        return Err(Failure::Usage(
            "trace --diff has no HTML page: use --format text or --format json for the \
             comparison"
                .to_owned(),
        ));
    }
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
        return export(&traces, format, &dir);
    }
    let output = args.output.as_deref();
    if let Some(other) = &args.diff {
        let others = load(other)?;
        let (a, b) = (&traces[0], &others[0]);
        let diff = diff_traces(a, b, clock);
        let comparison = Compared {
            a: &a.path,
            b: &b.path,
            diff: &diff,
        };
        return output::emit(args.format, output, &comparison);
    }
    output::emit(
        args.format,
        output,
        &analyze_traces(&traces, clock, args.top),
    )
}

/// torch.profiler's raw memory timeline by category.
fn memory_timeline(args: &TraceArgs) -> Result<(), Failure> {
    let events = read_memory_timeline(&args.path, &mut output::progress("reading"))?;
    let Some(timeline) = category_timeline(events) else {
        return Err(Failure::Usage(format!(
            "{}: the memory timeline has no events",
            args.path.display()
        )));
    };
    let page = Timeline {
        path: &args.path,
        timeline: &timeline,
    };
    output::emit(args.format, args.output.as_deref(), &page)
}

/// Writes `kernels.<ext>` and `operators.<ext>` of `traces` into `dir` (created when
/// missing), naming each file written on stderr.
fn export(traces: &[TraceFile], format: TableFormat, dir: &Path) -> Result<(), Failure> {
    create_dir(dir)?;
    for (name, of) in TABLES {
        let path = dir.join(format!("{name}.{}", format.extension()));
        write_file(&path, |out| write_tables(traces, of, format, out))?;
        eprintln!("wrote {}", path.display());
    }
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
