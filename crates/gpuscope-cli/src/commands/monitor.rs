//! `gpuscope monitor`: samples GPUs and the host every `--interval`, prints each sample
//! (one line per sample, `--watch`'s table, or JSON), logs them (`--log`, `--tensorboard`),
//! and on Ctrl-C, SIGTERM or after `--count` samples prints the peaks and exits 0.

use std::io::{self, IsTerminal, Write};
use std::time::{Duration, Instant};

use gpuscope::model::gpu::Sample;
use gpuscope::render::monitor as render;
use gpuscope::{Peaks, SampleLog, Sampler};

use crate::args::{MonitorArgs, MonitorFormat};
use crate::signals::{sleep_until, Stop};
use crate::{output, Failure};

/// Moves the cursor home and clears the screen, so `--watch` redraws in place.
const CLEAR: &str = "\x1b[H\x1b[2J";

pub fn run(args: MonitorArgs) -> Result<(), Failure> {
    output::not_an_input(args.log.as_deref(), &[args.from.as_deref()])?;
    let mut sampler = match &args.from {
        Some(path) => Sampler::from_saved(path)?,
        None => Sampler::detect(),
    };
    if let Some(reason) = sampler.no_gpu_reason() {
        if args.require_gpu {
            return Err(Failure::Usage(format!(
                "no NVIDIA GPU found: {reason} (--require-gpu was given)"
            )));
        }
        eprintln!("no NVIDIA GPU found: {reason}");
    }
    let mut log = SampleLog::default();
    if let Some(path) = &args.log {
        log.add_file(path)?;
        let earlier = log.earlier_samples();
        if earlier > 0 {
            eprintln!(
                "{} already holds {earlier} samples; new ones are appended{}",
                path.display(),
                if args.tensorboard.is_some() {
                    format!(", TensorBoard steps continuing from {earlier}")
                } else {
                    String::new()
                }
            );
        }
    }
    if let Some(dir) = &args.tensorboard {
        log.add_tensorboard(dir)?;
    }
    let stop = Stop::catch()?;
    let count = if args.once { Some(1) } else { args.count };
    if count == Some(1) {
        sampler.prime_cpu();
        std::thread::sleep(Duration::from_millis(250));
    }
    let interval = Duration::from_secs_f64(args.interval);
    let terminal = io::stdout().is_terminal();
    let mut out = io::stdout().lock();
    let mut peaks = Peaks::default();
    loop {
        let started = Instant::now();
        let sample = sampler.sample();
        peaks.add(&sample);
        log.write(&sample)?;
        show(&sample, &args, terminal, peaks.samples, &mut out)?;
        if count.is_some_and(|n| peaks.samples >= n as u64) {
            break;
        }
        sleep_until(started + interval, || stop.received().is_some());
        if stop.received().is_some() {
            break;
        }
    }
    log.close()?;
    if peaks.samples > 1 {
        summary(&peaks, &sampler.source_name(), args.format, &mut out)?;
    }
    out.flush()?;
    Ok(())
}

fn show(
    sample: &Sample,
    args: &MonitorArgs,
    terminal: bool,
    n: u64,
    out: &mut dyn Write,
) -> io::Result<()> {
    match (args.format, args.watch) {
        (MonitorFormat::Json, _) => render::json_line(sample, out)?,
        (MonitorFormat::Text, true) => {
            if terminal {
                write!(out, "{CLEAR}")?;
            } else if n > 1 {
                writeln!(out)?;
            }
            render::watch(sample, output::text_width(), out)?;
        }
        (MonitorFormat::Text, false) => writeln!(out, "{}", render::line_text(sample))?,
    }
    out.flush()
}

fn summary(
    peaks: &Peaks,
    source: &str,
    format: MonitorFormat,
    out: &mut dyn Write,
) -> io::Result<()> {
    let duration = peaks.duration_seconds();
    match format {
        MonitorFormat::Json => render::summary_json(peaks, duration, out),
        MonitorFormat::Text => {
            writeln!(
                out,
                "Peaks over {} samples in {:.0} s ({source}):",
                peaks.samples,
                duration.unwrap_or(0.0)
            )?;
            render::summary_text(peaks, out)
        }
    }
}
