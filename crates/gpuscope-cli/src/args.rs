//! The command line's definition (clap derive); doc comments here are the `--help` text.
//! No logic: commands/ does the work.

use gpuscope::{Format, Rule};
use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

#[derive(Debug, Parser)]
#[command(
    name = "gpuscope",
    version,
    about = "Where GPU memory and GPU time go when you train a PyTorch model",
    long_about = "Where GPU memory and GPU time go when you train a PyTorch model.\n\n\
        Reads what training runs leave behind — TensorBoard event files, PyTorch profiler \
        traces, CUDA allocator snapshots, gpuscope run logs, Nsight Systems exports — and \
        tells you what they say.",
    after_help = "Examples:\n  \
        gpuscope tb runs/exp1                 list the tags of a TensorBoard log directory\n  \
        gpuscope tb runs/exp1 --tag Loss/total --format csv\n  \
        gpuscope compare runs/main runs/branch --fail-on peak-memory=10%,nonfinite\n\n\
        Exit codes: 0 done, 2 input that cannot be used."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Read TensorBoard event files: list tags, print scalar series
    #[command(after_help = "Examples:\n  \
        gpuscope tb runs/exp1/tensorboard\n  \
        gpuscope tb runs/exp1 --tags\n  \
        gpuscope tb events.out.tfevents.1738277380.wn44.22511.0 --tag 'Training loss'\n  \
        gpuscope tb runs/exp1 --format json | jq '.tags[\"Loss/total\"].points[-1]'\n  \
        gpuscope tb runs/exp1 --tag Loss/total --format csv > loss.csv")]
    Tb(TbArgs),
    /// Diagnose runs from everything they left, then summarise their memory records
    #[command(after_help = "Examples:\n  \
        gpuscope report runs/exp1                    a run directory: its diagnosis, every rank\n  \
        gpuscope report latest                       the newest run under . or $GPUSCOPE_RUNS\n  \
        gpuscope report profiles/tensor_profile_20260128_140205.log\n  \
        gpuscope report runs/exp1/tensorboard        TensorProfiling/* or Memory/Tensor_* tags\n  \
        gpuscope report runs/before runs/after       compared side by side\n  \
        gpuscope report runs/exp1 --format html -o report.html\n  \
        gpuscope report runs/exp1 --format json | jq '.runs[0].leak'\n  \
        gpuscope report runs/exp1 --format json | jq '.diagnoses[0].findings[0]'")]
    Report(ReportArgs),
    /// Compare two runs (BASE, then NEW): memory, step time, verdicts; with --fail-on, a CI
    /// gate that exits 1 on a regression
    #[command(after_help = "Examples:\n  \
        gpuscope compare runs/main runs/branch\n  \
        gpuscope compare runs/main runs/branch --fail-on peak-memory=10%,step-time=5%\n  \
        gpuscope compare runs/main runs/branch --fail-on nonfinite,leak,oom\n  \
        gpuscope compare runs/main runs/branch --format json | jq '.regressions'\n  \
        gpuscope compare runs/main runs/branch --format html -o compare.html\n\n\
        --fail-on items: peak-memory=N% (a rank's peak allocated or reserved grew more than \
        N %), step-time=N% (a rank's step grew slower by more than N %), throughput=N% (a \
        rank's iterations per second fell by more than N %), nonfinite, leak, oom, \
        fragmentation (NEW has the verdict, BASE has not). Step time comes from the \
        profiler traces, else the timed sections, else the records' timestamps: the first \
        source both runs have.\n\n\
        Exit codes: 0 no regression (or no --fail-on), 1 a regression (one line each on \
        stderr), 2 input that cannot be used.")]
    Compare(CompareArgs),
    /// Analyse PyTorch profiler traces: GPU time, idle time, kernel types, top kernels
    #[command(after_help = "Examples:\n  \
        gpuscope trace profiler_traces/rank0.1738277380.pt.trace.json.gz\n  \
        gpuscope trace profiler_traces/              every rank's trace\n  \
        gpuscope trace trace.json --format json | jq '.ranks[0].temporal'\n  \
        gpuscope trace trace.json.gz --hta-compat    times rounded as HTA rounds them\n  \
        gpuscope trace before.json.gz --diff after.json.gz\n  \
        gpuscope trace traces/ --export parquet -o tables/\n    \
        then: duckdb -c \"select name, sum(dur_ns) from 'tables/kernels.parquet' group by 1\"\n  \
        gpuscope trace traces/ --summaries-out summaries/   a few KB per rank\n  \
        gpuscope trace summaries/                    the ranks compared from them\n\n\
        The last profiler step is left out when there are two or more, as HTA does.")]
    Trace(TraceArgs),
    /// Analyse CUDA allocator snapshots: what was alive at the peak, what accumulates,
    /// fragmentation
    #[command(after_help = "Examples:\n  \
        gpuscope snapshot memory_snapshot.pickle\n  \
        gpuscope snapshot snap.pickle --frames 3          three user frames per call site\n  \
        gpuscope snapshot snap.pickle --request 2GiB      could a 2 GiB tensor fit?\n  \
        gpuscope snapshot snap.pickle --format json | jq '.peak.by_site[0]'\n  \
        gpuscope snapshot snap.pickle --format json | jq '.never_freed[0].accumulating'\n  \
        gpuscope snapshot snap.pickle --format html -o snapshot.html\n  \
        gpuscope snapshot big.pickle --no-trace           the state at the dump, fast\n  \
        gpuscope snapshot before.pickle --diff after.pickle\n\n\
        Reads torch.cuda.memory._dump_snapshot() pickles without Python or torch. Nothing \
        in the file is executed: a pickle that would import or call code is refused.")]
    Snapshot(SnapshotArgs),
    /// Watch GPU memory, utilisation, temperature, power and processes, and the host
    #[command(after_help = "Examples:\n  \
        gpuscope monitor                          GPU Memory: 15.6 GB / 16.0 GB (97%) ... every 2 s\n  \
        gpuscope monitor --watch                  a table per GPU with its processes, redrawn\n  \
        gpuscope monitor --once --format json | jq '.gpus[0].memory_used_bytes'\n  \
        gpuscope monitor --interval 1 --log gpu.jsonl --tensorboard runs/exp1/tensorboard\n  \
        gpuscope monitor --log gpu.csv --count 60   one minute into a spreadsheet\n  \
        gpuscope monitor --from saved-nvidia-smi.txt   a saved nvidia-smi, -q -x or CSV output\n\n\
        GPUs are read through NVML, else `nvidia-smi --query-gpu` on PATH; with neither, \
        the host's CPU and RAM are still shown (exit 0; --require-gpu makes it exit 2). \
        Ctrl-C ends it with the peaks of each GPU.")]
    Monitor(MonitorArgs),
    /// Run a command (your training) and record GPU, host and process-tree figures
    #[command(after_help = "Examples:\n  \
        gpuscope run -- python train.py --epochs 3\n  \
        gpuscope run --logdir runs/exp1 -- python train.py\n  \
        gpuscope run --interval 0.5 -- torchrun --nproc-per-node 2 train.py\n\n\
        The command runs with GPUSCOPE_RUN_DIR set to the run directory (default: \
        $GPUSCOPE_RUN_DIR, else a new runs/<YYYYmmdd_HHMMSS>), so gpuscope inside the \
        training writes there too. Samples go to <run dir>/gpu.jsonl and TensorBoard GPU/* \
        and Host/* tags in <run dir>/tensorboard/. SIGINT and SIGTERM sent to gpuscope are \
        passed on to the command. Exit code: the command's (128+N if signal N killed it); \
        2 if it could not be started.")]
    Run(RunArgs),
    /// Nsight Systems: profile a command, snapshot a running training, summarise a capture
    #[command(after_help = "Examples:\n  \
        gpuscope nsys profile -- python train.py               whole run, recommended traces\n  \
        gpuscope nsys profile --capture-range -- python train.py\n      \
        only inside gpuscope.capture() or torch.cuda.profiler.start()/stop()\n  \
        gpuscope nsys launch -- python train.py                ready for snapshots\n  \
        gpuscope nsys attach --pid 4242 --duration 30          30 s of that training\n  \
        gpuscope nsys stats runs/gpuscope/nsys/profile_20260125_102642.sqlite\n  \
        gpuscope nsys stats report1.nsys-rep --format html -o nsys.html\n\n\
        profile, launch and attach run Nsight Systems' nsys (found on PATH, in \
        /opt/nvidia/nsight-systems*/bin or /usr/local/cuda/bin); stats reads the SQLite \
        export itself and needs nsys only to export a .nsys-rep.")]
    Nsys(NsysArgs),
}

#[derive(Debug, clap::Args)]
pub struct TbArgs {
    /// An event file, or a log directory (searched recursively; each sub-directory is a run)
    pub path: PathBuf,
    /// List tags only (kind, count, steps), without values
    #[arg(long, conflicts_with = "tag")]
    pub tags: bool,
    /// Print the values of this tag (repeatable); default: a table of all tags
    #[arg(long, value_name = "TAG")]
    pub tag: Vec<String>,
    /// Output format
    #[arg(long, value_enum, default_value_t = TbFormat::Text)]
    pub format: TbFormat,
    /// Write to FILE instead of stdout
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// On a damaged record, keep what came before it instead of failing
    #[arg(long)]
    pub keep_going: bool,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum TbFormat {
    Text,
    Json,
    Csv,
}

impl From<TbFormat> for Format {
    fn from(f: TbFormat) -> Format {
        match f {
            TbFormat::Text => Format::Text,
            TbFormat::Json => Format::Json,
            TbFormat::Csv => Format::Csv,
        }
    }
}

#[derive(Debug, clap::Args)]
pub struct ReportArgs {
    /// Run directories, memory*.jsonl files, tensor_profile_*.log text logs or
    /// TensorBoard event files/directories; `latest` is the newest run under the current
    /// directory (or $GPUSCOPE_RUNS)
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    /// Output format
    #[arg(long, value_enum, default_value_t = ReportFormat::Text)]
    pub format: ReportFormat,
    /// Write to FILE instead of stdout
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
}

/// The formats of the commands that make a page (report, trace, snapshot, nsys stats).
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum ReportFormat {
    Text,
    Json,
    /// One self-contained page with charts (write it to a file with -o)
    Html,
}

impl From<ReportFormat> for Format {
    fn from(f: ReportFormat) -> Format {
        match f {
            ReportFormat::Text => Format::Text,
            ReportFormat::Json => Format::Json,
            ReportFormat::Html => Format::Html,
        }
    }
}

#[derive(Debug, clap::Args)]
pub struct CompareArgs {
    /// The run compared against (a run directory, as gpuscope report reads it)
    pub base: PathBuf,
    /// The run judged
    pub new: PathBuf,
    /// Rules that make NEW fail (exit 1), comma-separated: peak-memory=N%, step-time=N%,
    /// throughput=N%, nonfinite, leak, oom, fragmentation
    #[arg(long, value_name = "RULES", value_delimiter = ',', value_parser = parse_rule)]
    pub fail_on: Vec<Rule>,
    /// Output format
    #[arg(long, value_enum, default_value_t = ReportFormat::Text)]
    pub format: ReportFormat,
    /// Write to FILE instead of stdout
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
}

/// One `--fail-on` item, as the engine spells the rules.
fn parse_rule(text: &str) -> Result<Rule, String> {
    text.parse()
}

#[derive(Debug, clap::Args)]
pub struct TraceArgs {
    /// A trace (.json or .json.gz), a directory of per-rank traces, or a memory timeline
    /// from torch.profiler's export_memory_timeline (raw, .raw.json.gz, or coalesced,
    /// .json / .json.gz)
    pub path: PathBuf,
    /// Output format
    #[arg(long, value_enum, default_value_t = ReportFormat::Text)]
    pub format: ReportFormat,
    /// Write to FILE instead of stdout
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// How many kernels to list by name before summing the rest as "others"
    #[arg(long, value_name = "N", default_value_t = 10)]
    pub top: usize,
    /// Round times to whole microseconds as Holistic Trace Analysis does (start up, end
    /// down), to compare with its figures; default: exact nanoseconds
    #[arg(long)]
    pub hta_compat: bool,
    /// Compare with this trace instead: kernels and operators added, removed, slower,
    /// faster (the first rank of each when given directories); text or JSON
    #[arg(long, value_name = "TRACE", conflicts_with = "export")]
    pub diff: Option<PathBuf>,
    /// Write the kernel and operator tables, one row per event, as kernels.<ext> and
    /// operators.<ext> into the directory given by -o (default: the current one),
    /// instead of a report
    #[arg(long, value_enum, value_name = "FORMAT")]
    pub export: Option<ExportFormat>,
    /// Write one summary per rank (a few KB of JSON, gpuscope.rank_summary/1) as
    /// <rank>.summary.json into DIR, reading one trace at a time, instead of a report;
    /// `gpuscope trace DIR` then compares the ranks from the summaries alone
    #[arg(long, value_name = "DIR", conflicts_with_all = ["export", "diff"])]
    pub summaries_out: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum ExportFormat {
    Csv,
    Parquet,
}

#[derive(Debug, clap::Args)]
pub struct SnapshotArgs {
    /// A snapshot pickle from torch.cuda.memory._dump_snapshot()
    pub path: PathBuf,
    /// Output format
    #[arg(long, value_enum, default_value_t = ReportFormat::Text)]
    pub format: ReportFormat,
    /// Write to FILE instead of stdout
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// User frames naming a call site (the first frame of your own Python code, then its
    /// callers); frames in torch, installed packages and the standard library are skipped
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = parse_count)]
    pub frames: usize,
    /// Call sites listed per table before the rest are summed in one row
    #[arg(long, value_name = "N", default_value_t = 15, value_parser = parse_count)]
    pub top: usize,
    /// Also test whether a request of SIZE (bytes, or with KiB/MiB/GiB) fits the free
    /// blocks (repeatable)
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub request: Vec<u64>,
    /// Compare with this snapshot instead: bytes alive by call site, what grew
    #[arg(long, value_name = "SNAPSHOT")]
    pub diff: Option<PathBuf>,
    /// Read only the state at the dump (segments, blocks, fragmentation, what is alive):
    /// stops where the trace begins and only checks the rest, several times faster on
    /// large files; no timeline, peak, leaks, churn, OOMs or allocator settings
    #[arg(long)]
    pub no_trace: bool,
}

/// `123`, `64KiB`, `1.5 GiB`, `20MB` (decimal units are taken as binary ones, as
/// nvidia-smi's MiB are often written MB).
fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let value: f64 = number
        .trim()
        .parse()
        .map_err(|_| format!("not a size: {text:?} (try 512MiB or 2GiB)"))?;
    let scale = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1u64,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        "t" | "tb" | "tib" => 1 << 40,
        other => {
            return Err(format!(
                "unknown unit {other:?} in {text:?} (B, KiB, MiB, GiB, TiB)"
            ))
        }
    };
    if !(value.is_finite() && value > 0.0) {
        return Err(format!("not a positive size: {text:?}"));
    }
    Ok((value * scale as f64).round() as u64)
}

#[derive(Debug, clap::Args)]
#[command(arg_required_else_help = false)]
pub struct NsysArgs {
    #[command(subcommand)]
    pub command: NsysCommand,
}

#[derive(Debug, Subcommand)]
pub enum NsysCommand {
    /// Run a command under nsys profile with the recommended traces (cuda, nvtx, osrt,
    /// cublas, cudnn) and CUDA memory usage; writes <run dir>/nsys/profile_<time>.nsys-rep
    /// and its .sqlite export
    #[command(after_help = "Examples:\n  \
        gpuscope nsys profile -- python train.py --epochs 1\n  \
        gpuscope nsys profile --capture-range -- python train.py\n  \
        gpuscope nsys profile --duration 60 --logdir runs/exp1 -- python train.py\n  \
        gpuscope nsys profile --dry-run -- python train.py     print the nsys command only\n\n\
        Exit code: the one nsys returns.")]
    Profile(NsysProfileArgs),
    /// Start a command under nsys launch, so that gpuscope nsys attach can later record
    /// a snapshot of it (Nsight Systems can only record processes it started)
    #[command(after_help = "Examples:\n  \
        gpuscope nsys launch -- python train.py\n  \
        gpuscope nsys launch --session exp1 -- torchrun --nproc-per-node 2 train.py\n\n\
        Exit code: the one nsys returns (the command's own).")]
    Launch(NsysLaunchArgs),
    /// Record a snapshot of a training started with gpuscope nsys launch: nsys start,
    /// DURATION seconds, nsys stop; writes <run dir>/nsys/snapshot_<pid>_<time>.nsys-rep
    #[command(after_help = "Examples:\n  \
        gpuscope nsys attach --pid 4242                     30 seconds, the session found \
        from the process\n  \
        gpuscope nsys attach --session exp1 --duration 10\n\n\
        The training must have been started by gpuscope nsys launch (or by nsys launch \
        --session-new NAME, then give --session NAME): Nsight Systems cannot attach to a \
        process it did not start.")]
    Attach(NsysAttachArgs),
    /// Summarise a capture: kernels, memory copies by time and size, CUDA API, NVTX ranges
    /// and GPU memory usage over time, with the columns nsys stats prints
    #[command(after_help = "Examples:\n  \
        gpuscope nsys stats report1.sqlite\n  \
        gpuscope nsys stats report1.nsys-rep              exported first (needs nsys)\n  \
        gpuscope nsys stats report1.sqlite --base         kernels by base name\n  \
        gpuscope nsys stats report1.sqlite --format json | jq '.kernels[0]'\n  \
        gpuscope nsys stats report1.sqlite --format html -o nsys.html\n\n\
        Reads `nsys export --type sqlite` files of Nsight Systems 2026.1; a part the capture \
        lacks (no kernels, no NVTX, no --cuda-memory-usage) is named with the reason and the \
        rest is reported.")]
    Stats(NsysStatsArgs),
}

#[derive(Debug, clap::Args)]
pub struct NsysProfileArgs {
    /// Record only between cudaProfilerStart() and cudaProfilerStop() (gpuscope.capture(),
    /// torch.cuda.profiler.start()/stop()); nsys ends the program at the stop
    #[arg(long)]
    pub capture_range: bool,
    /// Stop recording after S seconds (nsys then ends the program)
    #[arg(long, value_name = "S")]
    pub duration: Option<u32>,
    #[command(flatten)]
    pub run: NsysRunArgs,
    /// The command to profile, after `--`
    #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
    pub command: Vec<std::ffi::OsString>,
}

#[derive(Debug, clap::Args)]
pub struct NsysLaunchArgs {
    /// Name of the nsys session (default: gpuscope-<time>)
    #[arg(long, value_name = "NAME")]
    pub session: Option<String>,
    #[command(flatten)]
    pub run: NsysRunArgs,
    /// The command to start, after `--`
    #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
    pub command: Vec<std::ffi::OsString>,
}

#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("training").args(["pid", "session"]).required(true).multiple(true)))]
pub struct NsysAttachArgs {
    /// A process of the training (its session is read from its environment)
    #[arg(long, value_name = "PID")]
    pub pid: Option<u32>,
    /// The nsys session to record, instead of the one of --pid
    #[arg(long, value_name = "NAME")]
    pub session: Option<String>,
    /// Seconds to record
    #[arg(long, value_name = "S", default_value_t = 30)]
    pub duration: u32,
    #[command(flatten)]
    pub run: NsysRunArgs,
}

/// Where nsys writes, and whether to run it at all.
#[derive(Debug, clap::Args)]
pub struct NsysRunArgs {
    /// Run directory; nsys files go to its nsys/ (default: $GPUSCOPE_RUN_DIR, else
    /// runs/gpuscope)
    #[arg(long, value_name = "DIR")]
    pub logdir: Option<PathBuf>,
    /// Print the nsys commands without running them
    #[arg(long)]
    pub dry_run: bool,
}

#[derive(Debug, clap::Args)]
pub struct NsysStatsArgs {
    /// An `nsys export --type sqlite` file, or a .nsys-rep report (exported beside it
    /// first, with nsys)
    pub path: PathBuf,
    /// Output format
    #[arg(long, value_enum, default_value_t = ReportFormat::Text)]
    pub format: ReportFormat,
    /// Write to FILE instead of stdout
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Name and group kernels by base name (cuda_gpu_kern_sum:base) instead of the
    /// demangled signature
    #[arg(long)]
    pub base: bool,
}

#[derive(Debug, clap::Args)]
pub struct MonitorArgs {
    /// Seconds between samples
    #[arg(long, value_name = "SECONDS", default_value_t = 2.0, value_parser = parse_interval)]
    pub interval: f64,
    /// A table of every GPU with its processes, redrawn in place (gpustat-like)
    #[arg(long)]
    pub watch: bool,
    /// One sample, then exit
    #[arg(long, conflicts_with = "count")]
    pub once: bool,
    /// Stop after N samples (default: until Ctrl-C)
    #[arg(long, value_name = "N", value_parser = parse_count)]
    pub count: Option<usize>,
    /// Output format: text (one line per sample, or --watch's table) or json (one line per sample)
    #[arg(long, value_enum, default_value_t = MonitorFormat::Text, conflicts_with = "watch")]
    pub format: MonitorFormat,
    /// Also append every sample to FILE: .csv for one row per GPU, else JSON lines (gpu.jsonl's)
    #[arg(long, value_name = "FILE")]
    pub log: Option<PathBuf>,
    /// Also write TensorBoard scalars (GPU/<i>/*, Host/*) into a new event file in DIR
    #[arg(long, value_name = "DIR")]
    pub tensorboard: Option<PathBuf>,
    /// Exit 2 when no GPU can be read, instead of showing the host alone
    #[arg(long)]
    pub require_gpu: bool,
    /// Read GPUs from a saved `nvidia-smi`, `nvidia-smi -q -x` or `--query-gpu` CSV output
    /// instead of this machine's
    #[arg(long, value_name = "FILE")]
    pub from: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum MonitorFormat {
    Text,
    Json,
}

#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// Run directory (default: $GPUSCOPE_RUN_DIR, else a new runs/<YYYYmmdd_HHMMSS>)
    #[arg(long, value_name = "DIR")]
    pub logdir: Option<PathBuf>,
    /// Seconds between samples
    #[arg(long, value_name = "SECONDS", default_value_t = 1.0, value_parser = parse_interval)]
    pub interval: f64,
    /// The command and its arguments, after `--`
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "COMMAND"
    )]
    pub command: Vec<std::ffi::OsString>,
}

/// A count of at least one.
fn parse_count(text: &str) -> Result<usize, String> {
    match text.trim().parse::<usize>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(format!("not a count of at least 1: {text:?}")),
    }
}

/// Seconds between samples: positive, at most a day.
fn parse_interval(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(s) if s > 0.0 && s <= 86_400.0 => Ok(s),
        _ => Err(format!(
            "not an interval in seconds: {text:?} (try 0.5 or 2)"
        )),
    }
}
