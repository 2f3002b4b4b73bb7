//! `gpuscope trace`: analyse PyTorch profiler traces, or compare two.

use std::cell::RefCell;
use std::io::{self, Write};
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

use gpuscope::analysis::trace::summary::{
    merge_rank_summaries, parse_summary, rank_summary, MAX_SUMMARY_FILE,
};
use gpuscope::analysis::trace::{analyze_rank, AcrossRanks};
use gpuscope::formats::trace::load::{map_traces, trace_files};
use gpuscope::formats::trace::summaries::read_summaries;
use gpuscope::render::memory_timeline::Timeline;
use gpuscope::render::trace::stream::RankStream;
use gpuscope::render::trace::summary_json;
use gpuscope::render::trace::tables::{write_tables, TableFormat, TABLES};
use gpuscope::{
    analyze_traces, category_timeline, create_dir, diff_traces, is_memory_timeline, load_traces,
    read_memory_timeline, write_file, Clock, Compared, Format, Render, TraceFile,
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
    if let Some(dir) = &args.summaries_out {
        return write_summaries(&args.path, clock, dir);
    }
    if let Some(summaries) = read_summaries(&args.path, MAX_SUMMARY_FILE, parse_summary)? {
        let merged = merge_rank_summaries(&summaries);
        return output::emit(args.format, args.output.as_deref(), &merged);
    }
    if args.path.is_dir() && args.export.is_none() && args.diff.is_none() {
        return directory(&args, clock);
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

/// The ranks of the directory at `args.path`, each analysed as soon as it is read and
/// written out before the next, so that thousands of ranks hold a few traces and their
/// summaries at a time; a file that is not a usable trace is named on stderr.
fn directory(args: &TraceArgs, clock: Clock) -> Result<(), Failure> {
    let listing = trace_files(&args.path)?;
    left_out(&listing.copies);
    let ranks = Ranks {
        files: listing.files,
        clock,
        top: args.top,
        unusable: RefCell::new(None),
    };
    output::emit(args.format, args.output.as_deref(), &ranks)?;
    match ranks.unusable.into_inner() {
        Some(e) => Err(e.into()),
        None => Ok(()),
    }
}

/// The trace files of a directory, rendered rank by rank.
struct Ranks {
    files: Vec<(PathBuf, u64)>,
    clock: Clock,
    top: usize,
    /// Why nothing was written: no file was a usable trace.
    unusable: RefCell<Option<gpuscope::Error>>,
}

impl Render for Ranks {
    fn render(&self, format: Format, width: u16, out: &mut dyn Write) -> io::Result<()> {
        let (clock, top) = (self.clock, self.top);
        let mut stream = RankStream::new(format, width, clock, out)?;
        let mut across = AcrossRanks::default();
        let mut progress = output::progress("reading");
        let total = self.files.iter().map(|(_, size)| size).sum();
        let (mut done, mut written, mut first_error) = (0, Ok(()), None);
        let analyze =
            |trace: gpuscope::Result<TraceFile>| trace.map(|file| analyze_rank(&file, clock, top));
        map_traces(&self.files, &analyze, &mut |(_, size), part| {
            done += size;
            progress(done, total);
            match part {
                Ok(part) => written = stream.rank(across.keep(part)),
                Err(e) => {
                    eprintln!("skipped {e}");
                    first_error.get_or_insert(e);
                }
            }
            // Output that cannot be written (a closed pipe: `| head`) ends the reading.
            match written {
                Ok(()) => ControlFlow::Continue(()),
                Err(_) => ControlFlow::Break(()),
            }
        });
        written?;
        if stream.ranks() == 0 {
            *self.unusable.borrow_mut() = first_error;
            return Ok(());
        }
        let (health, merged) = across.finish();
        stream.finish(&health, merged.comparison.as_ref())
    }
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

/// Writes `<rank>.summary.json` of each trace at `path` into `dir` (created when
/// missing), a few traces in memory at a time (the directory reader's pipeline).
fn write_summaries(path: &Path, clock: Clock, dir: &Path) -> Result<(), Failure> {
    create_dir(dir)?;
    let files = if path.is_dir() {
        let listing = trace_files(path)?;
        left_out(&listing.copies);
        listing.files
    } else {
        vec![(path.to_path_buf(), 0)]
    };
    let (mut written, mut failed) = (0, None);
    let summarize = |trace: gpuscope::Result<TraceFile>| trace.map(|f| rank_summary(&f, clock));
    map_traces(&files, &summarize, &mut |_, summary| match summary {
        Ok(summary) => {
            let out = dir.join(format!("{}.summary.json", summary.rank));
            match write_file(&out, |w| summary_json(&summary, w)) {
                Ok(()) => {
                    written += 1;
                    ControlFlow::Continue(())
                }
                Err(e) => {
                    failed = Some(e);
                    ControlFlow::Break(())
                }
            }
        }
        Err(e) => {
            eprintln!("skipped {e}");
            ControlFlow::Continue(())
        }
    });
    if let Some(e) = failed {
        return Err(e.into());
    }
    let summaries = if written == 1 { "summary" } else { "summaries" };
    eprintln!("wrote {written} {summaries} into {}", dir.display());
    Ok(())
}

/// The traces at `path`; files of a directory that are not traces, and copies of traces
/// gpuscope wrote there, are named on stderr.
fn load(path: &Path) -> Result<Vec<TraceFile>, Failure> {
    let loaded = load_traces(path, &mut output::progress("reading"))?;
    for why in &loaded.skipped {
        eprintln!("skipped {why}");
    }
    left_out(&loaded.copies);
    Ok(loaded.traces)
}

/// Names on stderr the copies of traces a directory's listing left out.
fn left_out(copies: &[String]) {
    for copy in copies {
        eprintln!("left out {copy}");
    }
}
