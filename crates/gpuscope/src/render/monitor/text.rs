//! GPU samples for people: the monitor's line (`GPU Memory: 15.6 GB / 16.0 GB (97%)`,
//! GB meaning 2^30 bytes, computed from MiB as nvidia-smi loops do), a gpustat-like table
//! for `--watch` that fits 80 columns, and the summary of peaks.

use crate::analysis::gpu_peaks::Peaks;
use crate::model::gpu::{share, GpuSample, HostSample, Sample, TreeSample};
use crate::render::short_names::clip;
use crate::render::units::{bytes, compact_bytes, in_unit, ByteUnit};
use crate::render::{right_align, table, write_table};
use std::io::{self, Write};

/// `15.6 GB`: bytes in GB of 2^30, one decimal.
fn gb(n: u64) -> String {
    in_unit(n, ByteUnit::Gib)
}

fn or_na<T>(value: Option<T>, show: impl FnOnce(T) -> String) -> String {
    value.map_or_else(|| "n/a".to_owned(), show)
}

/// `a / b (p%)` with `n/a` for what is unknown.
fn used_of(
    used: Option<u64>,
    total: Option<u64>,
    percent: Option<f64>,
    unit: fn(u64) -> String,
) -> String {
    let mut text = format!("{} / {}", or_na(used, unit), or_na(total, unit));
    if let Some(p) = percent {
        text += &format!(" ({p:.0}%)");
    }
    text
}

/// The columns the monitor's line keeps within.
const LINE_WIDTH: usize = 80;

/// The monitor's line (`GPU Memory: … | Host RAM: …`): with one GPU (or none) its
/// figures and the host's on one line; with several, a line per GPU and then the host's,
/// so a node of eight stays readable in 80 columns instead of one line of 600. Parts
/// that would carry a line past 80 columns start the next one.
pub fn line_text(sample: &Sample) -> String {
    let single = sample.gpus.len() <= 1;
    let gpus: Vec<String> = sample
        .gpus
        .iter()
        .map(|g| {
            let label = if single {
                "GPU".to_owned()
            } else {
                format!("GPU{}", g.index)
            };
            let mut text = format!(
                "{label} Memory: {}",
                used_of(
                    g.memory_used_bytes,
                    g.memory_total_bytes,
                    g.memory_percent(),
                    gb
                )
            );
            for extra in gpu_extras(g) {
                text += &format!(", {extra}");
            }
            text
        })
        .collect();
    let mut rest = Vec::new();
    if let Some(e) = &sample.gpu_error {
        rest.push(format!("GPUs unreadable: {e}"));
    }
    rest.push(host_text(&sample.host));
    if let Some(tree) = &sample.tree {
        rest.push(tree_text(tree));
    }
    let mut lines = if single {
        rest.splice(0..0, gpus);
        Vec::new()
    } else {
        gpus
    };
    lines.extend(packed(rest, LINE_WIDTH));
    lines.join("\n")
}

/// `parts` joined by ` | `, a new line started wherever the next would not fit in
/// `width` columns (a part wider than that alone on its line).
fn packed(parts: Vec<String>, width: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    for part in parts {
        match lines.last_mut() {
            Some(line) if line.chars().count() + 3 + part.chars().count() <= width => {
                line.push_str(" | ");
                line.push_str(&part);
            }
            _ => lines.push(part),
        }
    }
    lines
}

/// `98% util`, `75°C`, `223 W` for the figures that were measured.
fn gpu_extras(g: &GpuSample) -> Vec<String> {
    let mut extras = Vec::new();
    extras.extend(g.utilization_percent.map(|u| format!("{u:.0}% util")));
    extras.extend(g.temperature_c.map(|t| format!("{t:.0}°C")));
    extras.extend(g.power_w.map(|p| format!("{p:.0} W")));
    extras
}

fn host_text(host: &HostSample) -> String {
    let ram = used_of(
        host.ram_used_bytes,
        host.ram_total_bytes,
        host.ram_percent(),
        gb,
    );
    match host.cpu_percent {
        Some(cpu) => format!("Host CPU {cpu:.0}%, RAM {ram}"),
        None => format!("Host RAM {ram}"),
    }
}

fn tree_text(tree: &TreeSample) -> String {
    let mut text = format!(
        "Command: {} process{}, RSS {}",
        tree.pids.len(),
        if tree.pids.len() == 1 { "" } else { "es" },
        or_na(tree.rss_bytes, bytes)
    );
    if let Some(cpu) = tree.cpu_percent {
        text += &format!(", CPU {cpu:.0}%");
    }
    if let Some(gpu) = tree.gpu_memory_bytes {
        text += &format!(", GPU memory {}", bytes(gpu));
    }
    text
}

/// The `--watch` screen: a title line (host, local time, source), one table row per GPU
/// with its processes, the host line; at most `width` columns.
pub fn watch(sample: &Sample, width: u16, out: &mut dyn Write) -> io::Result<()> {
    let title = format!(
        "{}  {}  {}",
        gethostname::gethostname().to_string_lossy(),
        local_time(sample.time, "%Y-%m-%d %H:%M:%S").unwrap_or_default(),
        sample.source
    );
    writeln!(out, "{}", clip(&title, width as usize))?;
    if !sample.gpus.is_empty() {
        let mut t = table(width);
        t.set_header([
            "GPU",
            "Name",
            "Temp",
            "Util",
            "Memory",
            "Power",
            "Processes",
        ]);
        for g in &sample.gpus {
            let processes: Vec<String> = g
                .processes
                .iter()
                .map(|p| {
                    let name = p.name.as_deref().unwrap_or("?");
                    let name = name.rsplit('/').next().unwrap_or(name);
                    format!(
                        "{name} {} {}",
                        p.pid,
                        or_na(p.used_memory_bytes, compact_bytes)
                    )
                })
                .collect();
            t.add_row([
                g.index.to_string(),
                clip(&g.name, 20),
                or_na(g.temperature_c, |c| format!("{c:.0}°C")),
                or_na(g.utilization_percent, |u| format!("{u:.0}%")),
                format!(
                    "{}/{}",
                    or_na(g.memory_used_bytes, compact_bytes),
                    or_na(g.memory_total_bytes, compact_bytes)
                ),
                or_na(g.power_w, |p| format!("{p:.0}W")),
                processes.join("\n"),
            ]);
        }
        right_align(&mut t, &[0, 2, 3, 4, 5]);
        write_table(out, &t)?;
    }
    if let Some(e) = &sample.gpu_error {
        writeln!(out, "GPUs unreadable: {e}")?;
    }
    writeln!(out, "{}", clip(&host_text(&sample.host), width as usize))?;
    if let Some(tree) = &sample.tree {
        writeln!(out, "{}", clip(&tree_text(tree), width as usize))?;
    }
    Ok(())
}

/// The peaks as text: one line per GPU, the host, and the command tree when there was one.
pub fn summary_text(peaks: &Peaks, out: &mut dyn Write) -> io::Result<()> {
    for g in &peaks.gpus {
        let percent = share(g.peak_memory_used_bytes, g.memory_total_bytes);
        let mut line = format!(
            "  GPU {} {}: peak memory {}",
            g.index,
            g.name,
            used_of(
                g.peak_memory_used_bytes,
                g.memory_total_bytes,
                percent,
                bytes
            )
        );
        if let Some(at) = g.peak_memory_time.and_then(|t| local_time(t, "%H:%M:%S")) {
            line += &format!(" at {at}");
        }
        line += &format!(
            ", max util {}, {}, {}",
            or_na(g.max_utilization_percent, |u| format!("{u:.0}%")),
            or_na(g.max_temperature_c, |c| format!("{c:.0}°C")),
            or_na(g.max_power_w, |p| format!("{p:.0} W")),
        );
        writeln!(out, "{line}")?;
    }
    writeln!(
        out,
        "  Host: peak RAM {}",
        used_of(
            peaks.peak_ram_used_bytes,
            peaks.ram_total_bytes,
            None,
            bytes
        )
    )?;
    if let Some(rss) = peaks.peak_command_rss_bytes {
        let mut line = format!("  Command: peak RSS {} (process tree)", bytes(rss));
        if let Some(n) = peaks.peak_command_processes {
            line += &format!(", up to {n} process{}", if n == 1 { "" } else { "es" });
        }
        if let Some(gpu) = peaks.peak_command_gpu_memory_bytes {
            line += &format!(", peak GPU memory {}", bytes(gpu));
        }
        writeln!(out, "{line}")?;
    }
    Ok(())
}

fn local_time(unix: f64, format: &str) -> Option<String> {
    let t = chrono::DateTime::from_timestamp(unix as i64, 0)?;
    Some(t.with_timezone(&chrono::Local).format(format).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::gpu::MIB;

    #[test]
    fn one_gpu_reads_like_an_nvidia_smi_loop() {
        let sample = Sample {
            gpus: vec![GpuSample {
                memory_used_bytes: Some(15974 * MIB),
                memory_total_bytes: Some(16384 * MIB),
                ..GpuSample::default()
            }],
            ..Sample::default()
        };
        assert!(line_text(&sample).starts_with("GPU Memory: 15.6 GB / 16.0 GB (97%) | Host RAM"));
    }

    #[test]
    fn unknown_figures_read_na() {
        let sample = Sample {
            gpus: vec![
                GpuSample::default(),
                GpuSample {
                    index: 1,
                    ..GpuSample::default()
                },
            ],
            ..Sample::default()
        };
        let text = line_text(&sample);
        assert!(
            text.starts_with("GPU0 Memory: n/a / n/a\nGPU1 Memory: n/a / n/a\nHost RAM n/a / n/a"),
            "{text}"
        );
    }
}
