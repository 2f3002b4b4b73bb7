//! `gpuscope snapshot`: analyse a CUDA allocator snapshot, or compare two.

use std::path::Path;

use gpuscope::model::snapshot::Snapshot;
use gpuscope::{diff_snapshots, read_snapshot, snapshot_report, Compared, Parts, SnapshotOptions};

use crate::args::SnapshotArgs;
use crate::{output, Failure};

pub fn run(args: SnapshotArgs) -> Result<(), Failure> {
    output::not_an_input(
        args.output.as_deref(),
        &[Some(&args.path), args.diff.as_deref()],
    )?;
    if let Some(other) = &args.diff {
        // A comparison is of the blocks alive at each dump: the traces are not needed.
        let before = read(&args.path, Parts::Segments)?;
        let diff = diff_snapshots(&before, &read(other, Parts::Segments)?, args.frames);
        let comparison = Compared {
            a: &args.path,
            b: other,
            diff: &diff,
        };
        return output::emit(args.format, args.output.as_deref(), &comparison);
    }
    let options = SnapshotOptions {
        frames: args.frames,
        top: args.top,
        requests: args.request.clone(),
        ..SnapshotOptions::default()
    };
    let parts = if args.no_trace {
        Parts::Segments
    } else {
        Parts::All
    };
    let snapshot = read(&args.path, parts)?;
    let report = snapshot_report(&snapshot, args.path.clone(), &options);
    output::emit(args.format, args.output.as_deref(), &report)
}

fn read(path: &Path, parts: Parts) -> Result<Snapshot, Failure> {
    Ok(read_snapshot(
        path,
        parts,
        &mut output::progress("reading"),
    )?)
}
