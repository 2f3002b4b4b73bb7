//! The default `nvidia-smi` table, as people paste it and tools save it. No library reads
//! it (it is meant for eyes), so it is read here by its box layout: GPU blocks between
//! `+---+` rules, each starting with `| <index> <name> <persistence> | <bus id> ... |` and
//! then `| <fan> <temp> <perf> <power> / <cap> | <used> / <total> | <util> ... |`; a third
//! line (the `MIG M.` column of drivers 450+) is skipped. The `Processes:` box lists
//! `<gpu> [<GI> <CI>] <pid> <type> <name> <memory>`, GI/CI only when the header has them.
//! Drivers 390, 440 (a container with no processes) and 450 are tested on real files.

use super::value;
use crate::model::gpu::{GpuProcess, GpuSample};

/// Parses a whole table: the GPUs, each with its processes.
pub fn parse(text: &str) -> Result<Vec<GpuSample>, String> {
    let lines: Vec<&str> = text.lines().collect();
    let header_end = lines
        .iter()
        .position(|l| l.starts_with("|==="))
        .ok_or("no nvidia-smi table here (no |=== header rule)")?;
    let mut gpus = Vec::new();
    let mut block: Vec<&str> = Vec::new();
    // The first line after the GPU boxes (the blank line before `Processes:`).
    let mut end = None;
    for (i, line) in lines.iter().enumerate().skip(header_end + 1) {
        if line.starts_with('|') {
            block.push(line);
            continue;
        }
        if !block.is_empty() {
            gpus.push(gpu_block(&block)?);
            block.clear();
        }
        if !line.starts_with('+') {
            end = Some(i);
            break;
        }
    }
    // nvidia-smi always prints something after its GPUs: a text ending among them is cut
    // off, and more GPUs may have followed.
    let Some(end) = end else {
        return Err(format!(
            "the table ends among its GPU boxes, after {} whole GPU{}: the output is cut off",
            gpus.len(),
            if gpus.len() == 1 { "" } else { "s" }
        ));
    };
    if gpus.is_empty() {
        return Err("an nvidia-smi table without any GPU".into());
    }
    for (gpu, process) in processes(&lines[end..])? {
        if let Some(g) = gpus.iter_mut().find(|g| g.index == gpu) {
            g.processes.push(process);
        }
    }
    Ok(gpus)
}

/// The cells of a `| a | b | c |` line, without the outer bars.
fn cells(line: &str) -> Vec<&str> {
    line.trim()
        .trim_matches('|')
        .split('|')
        .map(str::trim)
        .collect()
}

fn gpu_block(block: &[&str]) -> Result<GpuSample, String> {
    let (Some(first), Some(second)) = (block.first(), block.get(1)) else {
        return Err(format!("a GPU block of one line: {:?}", block.first()));
    };
    let first = cells(first);
    let second = cells(second);
    let words: Vec<&str> = first[0].split_whitespace().collect();
    let index = words
        .first()
        .and_then(|w| w.parse::<u32>().ok())
        .ok_or_else(|| format!("no GPU index in {:?}", first[0]))?;
    // The last word is the persistence mode (On/Off); the name lies between.
    let name = words[1..words.len().saturating_sub(1)].join(" ");
    let status: Vec<&str> = second[0].split_whitespace().collect();
    let temperature = status.iter().find(|w| w.ends_with('C'));
    let (power, cap) = match status.iter().position(|w| *w == "/") {
        Some(slash) => (status.get(slash - 1), status.get(slash + 1)),
        None => (None, None),
    };
    let (used, total) = second
        .get(1)
        .and_then(|m| m.split_once('/'))
        .unwrap_or(("", ""));
    let util = second
        .get(2)
        .and_then(|c| c.split_whitespace().next())
        .unwrap_or("");
    Ok(GpuSample {
        index,
        name,
        uuid: None,
        memory_used_bytes: value::bytes(used),
        memory_total_bytes: value::bytes(total),
        utilization_percent: value::number(util),
        temperature_c: temperature.and_then(|t| value::number(t)),
        power_w: power.and_then(|p| value::number(p)),
        power_limit_w: cap.and_then(|p| value::number(p)),
        processes: Vec::new(),
    })
}

/// `(gpu index, process)` for every row of the `Processes:` box.
fn processes(lines: &[&str]) -> Result<Vec<(u32, GpuProcess)>, String> {
    let Some(title) = lines.iter().position(|l| l.contains("Processes:")) else {
        return Ok(Vec::new());
    };
    let mig = lines[title..]
        .iter()
        .take_while(|l| !l.starts_with("|==="))
        .any(|l| l.split_whitespace().any(|w| w == "GI"));
    let Some(rule) = lines[title..].iter().position(|l| l.starts_with("|===")) else {
        return Ok(Vec::new());
    };
    let rows = &lines[title + rule + 1..];
    let count = rows.iter().take_while(|l| l.starts_with('|')).count();
    if !rows.get(count).is_some_and(|l| l.starts_with('+')) {
        return Err("the Processes box has no closing rule: the output is cut off".into());
    }
    let mut found = Vec::new();
    for line in &rows[..count] {
        let words: Vec<&str> = line.trim_matches('|').split_whitespace().collect();
        let (pid_at, name_at) = if mig { (3, 5) } else { (1, 3) };
        let gpu = words.first().and_then(|w| w.parse::<u32>().ok());
        let pid = words.get(pid_at).and_then(|w| w.parse::<u32>().ok());
        let (Some(gpu), Some(pid)) = (gpu, pid) else {
            continue; // "No running processes found"
        };
        if words.len() <= name_at {
            return Err(format!("a process row without name or memory: {line:?}"));
        }
        let process = GpuProcess {
            pid,
            name: value::text(&words[name_at..words.len() - 1].join(" ")),
            used_memory_bytes: value::bytes(words[words.len() - 1]),
        };
        found.push((gpu, process));
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::gpu::MIB;

    /// The layout of drivers 525+ (wider name cell, `N/A` fan), typed after it, with a
    /// process whose memory the driver does not report (a common troubleshooting case).
    const DRIVER_535: &str = "\
+---------------------------------------------------------------------------------------+
| NVIDIA-SMI 535.104.05             Driver Version: 535.104.05   CUDA Version: 12.2     |
|-----------------------------------------+----------------------+----------------------+
| GPU  Name                 Persistence-M | Bus-Id        Disp.A | Volatile Uncorr. ECC |
| Fan  Temp   Perf          Pwr:Usage/Cap |         Memory-Usage | GPU-Util  Compute M. |
|                                         |                      |               MIG M. |
|=========================================+======================+======================|
|   0  NVIDIA A100-SXM4-80GB          On  | 00000000:07:00.0 Off |                    0 |
| N/A   30C    P0              62W / 400W |   1234MiB / 81920MiB |     17%      Default |
|                                         |                      |             Disabled |
+-----------------------------------------+----------------------+----------------------+

+---------------------------------------------------------------------------------------+
| Processes:                                                                            |
|  GPU   GI   CI        PID   Type   Process name                            GPU Memory |
|        ID   ID                                                             Usage      |
|=======================================================================================|
|    0   N/A  N/A   2497455      C   python train.py                                N/A |
+---------------------------------------------------------------------------------------+
";

    #[test]
    fn newer_layout_with_unreported_process_memory() {
        let gpus = parse(DRIVER_535).unwrap();
        assert_eq!(gpus.len(), 1);
        assert_eq!(gpus[0].name, "NVIDIA A100-SXM4-80GB");
        assert_eq!(gpus[0].memory_used_bytes, Some(1234 * MIB));
        assert_eq!(gpus[0].utilization_percent, Some(17.0));
        assert_eq!(gpus[0].power_limit_w, Some(400.0));
        let process = &gpus[0].processes[0];
        assert_eq!(process.pid, 2_497_455);
        assert_eq!(process.name.as_deref(), Some("python train.py"));
        assert_eq!(process.used_memory_bytes, None);
    }

    #[test]
    fn text_without_a_table_is_refused() {
        assert!(parse("Failed to initialize NVML: Driver/library version mismatch").is_err());
        assert!(parse("|===|\n").is_err());
    }
}
