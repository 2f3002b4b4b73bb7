//! gpuscope's engine: readers and writers for the files of GPU profiling (formats), the
//! typed data they hold (model), pure analyses over that data, and renderers.
//!
//! The engine never prints and never sees a Python object; the CLI and the Python bindings
//! are thin doors onto it.

pub mod analysis;
pub mod error;
pub mod formats;
pub mod model;
pub mod render;

pub use error::{Error, Result};

// What the CLI and the bindings call, one level deep: read (formats), analyse, then hand the
// result to `render::Render` in the format asked for.
pub use analysis::compare_runs::compare_runs;
pub use analysis::diagnosis::report_runs;
pub use analysis::gpu_peaks::Peaks;
pub use analysis::memory_timeline::category_timeline;
pub use analysis::nsys::{nsys_report, KernelNames};
pub use analysis::report::{report, Report};
pub use analysis::snapshot::diff::diff as diff_snapshots;
pub use analysis::snapshot::{snapshot_report, Options as SnapshotOptions, SnapshotReport};
pub use analysis::trace::scope::Clock;
pub use analysis::trace::{analyze_traces, diff_traces, TraceAnalysis};
pub use formats::gpu::{log::SampleLog, Sampler};
pub use formats::memory_timeline::{is_memory_timeline, read_memory_timeline};
pub use formats::nsys::read_export;
pub use formats::output::{create_dir, write_file};
pub use formats::process::{heap_in_use, ProcessSampler};
pub use formats::runlog::load::{latest_run, load_run};
pub use formats::runlog::paths::{given_run_dir, RUN_DIR_VAR};
pub use formats::runlog::whole::read_run;
pub use formats::runlog::{RunWriter, RunWriterOptions};
pub use formats::snapshot::{read_snapshot, read_snapshot_bytes, Parts};
pub use formats::tfevents::{load_log_dir, load_with_histograms, EventWriter, LoadOptions};
pub use formats::trace::load_traces;
pub use model::compare::{Rule, RunComparison};
pub use model::trace::TraceFile;
pub use render::{Compared, Format, Render};
