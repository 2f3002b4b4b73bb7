//! `nvidia-smi --query-gpu=... --format=csv[,noheader][,nounits]` and
//! `--query-compute-apps=...` output. With a header, columns are found by name (`memory.used
//! [MiB]` is `memory.used`), so any field list works, including tools' own (the exporter
//! file has no utilisation or power at all); without one, the columns must be the ones
//! [`GPU_FIELDS`] and [`APP_FIELDS`] list, in that order — the sampler's own query.

use super::value;
use crate::model::gpu::{GpuProcess, GpuSample};

/// The `--query-gpu` fields the sampler asks for, in order.
pub const GPU_FIELDS: &[&str] = &[
    "index",
    "name",
    "uuid",
    "memory.used",
    "memory.total",
    "utilization.gpu",
    "temperature.gpu",
    "power.draw",
    "power.limit",
];

/// The `--query-compute-apps` fields the sampler asks for, in order.
pub const APP_FIELDS: &[&str] = &["gpu_uuid", "pid", "process_name", "used_gpu_memory"];

/// Names nvidia-smi accepts for the same field.
const ALIASES: &[(&str, &str)] = &[
    ("gpu_name", "name"),
    ("enforced.power.limit", "power.limit"),
    ("used_memory", "used_gpu_memory"),
];

/// Rows of a CSV: each row's fields by the canonical field name.
struct Table {
    columns: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    fn read(text: &str, default_fields: &[&str]) -> Result<Table, String> {
        let mut reader = csv::ReaderBuilder::new()
            .has_headers(false)
            .flexible(true)
            .trim(csv::Trim::All)
            .from_reader(text.as_bytes());
        let mut rows = Vec::new();
        for record in reader.records() {
            let record = record.map_err(|e| format!("not CSV: {e}"))?;
            if record.iter().all(str::is_empty) {
                continue;
            }
            rows.push(record.iter().map(str::to_owned).collect::<Vec<_>>());
        }
        let header = rows
            .first()
            .filter(|r| is_header(r, default_fields))
            .cloned();
        let headed = header.is_some();
        let columns: Vec<String> = match header {
            Some(h) => {
                rows.remove(0);
                h.iter().map(|name| canonical(name)).collect()
            }
            None => default_fields.iter().map(|f| (*f).to_owned()).collect(),
        };
        for (n, row) in rows.iter().enumerate() {
            if row.len() != columns.len() {
                let expected = if headed {
                    format!("its header names {}", columns.len())
                } else {
                    // Without a header, the columns must be the sampler's own query.
                    format!(
                        "without a header gpuscope reads the {} fields of --query-gpu={}",
                        columns.len(),
                        default_fields.join(",")
                    )
                };
                return Err(format!(
                    "CSV row {} has {} fields, but {expected}",
                    n + 1 + usize::from(headed),
                    row.len(),
                ));
            }
        }
        Ok(Table { columns, rows })
    }

    fn get<'a>(&self, row: &'a [String], field: &str) -> Option<&'a str> {
        let i = self.columns.iter().position(|c| c == field)?;
        row.get(i).map(String::as_str)
    }
}

/// `memory.used [MiB]` → `memory.used`, aliases resolved.
fn canonical(header: &str) -> String {
    let name = header.split('[').next().unwrap_or(header).trim();
    ALIASES
        .iter()
        .find(|(alias, _)| *alias == name)
        .map_or(name, |(_, canon)| canon)
        .to_owned()
}

/// A first row is a header when it names a field the sampler knows and holds no number.
fn is_header(row: &[String], known: &[&str]) -> bool {
    row.iter().any(|f| known.contains(&canonical(f).as_str()))
        && row.iter().all(|f| value::number(f).is_none())
}

/// GPUs from `--query-gpu` output; a GPU without an `index` column gets its row number.
pub fn parse_gpus(text: &str) -> Result<Vec<GpuSample>, String> {
    let table = Table::read(text, GPU_FIELDS)?;
    let field = |row, name| table.get(row, name).unwrap_or("");
    Ok(table
        .rows
        .iter()
        .enumerate()
        .map(|(n, row)| GpuSample {
            index: value::number(field(row, "index")).map_or(n as u32, |i| i as u32),
            name: value::text(field(row, "name")).unwrap_or_default(),
            uuid: value::text(field(row, "uuid")),
            memory_used_bytes: value::bytes(field(row, "memory.used")),
            memory_total_bytes: value::bytes(field(row, "memory.total")),
            utilization_percent: value::number(field(row, "utilization.gpu")),
            temperature_c: value::number(field(row, "temperature.gpu")),
            power_w: value::number(field(row, "power.draw")),
            power_limit_w: value::number(field(row, "power.limit")),
            processes: Vec::new(),
        })
        .collect())
}

/// Processes from `--query-compute-apps` output, each with the uuid of its GPU.
pub fn parse_apps(text: &str) -> Result<Vec<(Option<String>, GpuProcess)>, String> {
    let table = Table::read(text, APP_FIELDS)?;
    let field = |row, name| table.get(row, name).unwrap_or("");
    Ok(table
        .rows
        .iter()
        .filter_map(|row| {
            let pid = value::number(field(row, "pid"))? as u32;
            let process = GpuProcess {
                pid,
                name: value::text(field(row, "process_name")),
                used_memory_bytes: value::bytes(field(row, "used_gpu_memory")),
            };
            Some((value::text(field(row, "gpu_uuid")), process))
        })
        .collect())
}

/// Hands each process to the GPU with its uuid (the only key `--query-compute-apps` and
/// `--query-gpu` share); a process whose GPU is unknown goes to the only GPU if there is
/// one, else nowhere.
pub fn attach(gpus: &mut [GpuSample], apps: Vec<(Option<String>, GpuProcess)>) {
    let only = gpus.len() == 1;
    for (uuid, process) in apps {
        let by_uuid = gpus.iter().position(|g| g.uuid.is_some() && g.uuid == uuid);
        if let Some(i) = by_uuid.or(only.then_some(0)) {
            gpus[i].processes.push(process);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::gpu::MIB;

    const NOHEADER_NOUNITS: &str =
        "0, Tesla V100-SXM2-16GB, GPU-aaa, 15974, 16160, 97, 71, 250.51, 300.00\n\
        1, Tesla V100-SXM2-16GB, GPU-bbb, 0, 16160, 0, 38, [N/A], [Not Supported]\n";

    #[test]
    fn noheader_nounits_in_the_samplers_order() {
        let gpus = parse_gpus(NOHEADER_NOUNITS).unwrap();
        assert_eq!(gpus.len(), 2);
        assert_eq!(gpus[0].memory_used_bytes, Some(15974 * MIB));
        assert_eq!(gpus[0].memory_total_bytes, Some(16160 * MIB));
        assert_eq!(gpus[0].utilization_percent, Some(97.0));
        assert_eq!(gpus[0].power_limit_w, Some(300.0));
        assert_eq!(gpus[1].power_w, None);
        assert_eq!(gpus[1].power_limit_w, None);
        assert_eq!(gpus[1].uuid.as_deref(), Some("GPU-bbb"));
    }

    #[test]
    fn header_with_units_in_any_order() {
        let text = "memory.total [MiB], memory.used [MiB], index, utilization.gpu [%]\n\
            16160 MiB, 1024 MiB, 3, 12 %\n";
        let gpus = parse_gpus(text).unwrap();
        assert_eq!(gpus[0].index, 3);
        assert_eq!(gpus[0].memory_used_bytes, Some(1024 * MIB));
        assert_eq!(gpus[0].memory_total_bytes, Some(16160 * MIB));
        assert_eq!(gpus[0].utilization_percent, Some(12.0));
        assert_eq!(gpus[0].temperature_c, None);
    }

    #[test]
    fn apps_with_na_memory_attach_by_uuid() {
        let mut gpus = parse_gpus(NOHEADER_NOUNITS).unwrap();
        let apps = parse_apps(
            "gpu_uuid, pid, process_name, used_gpu_memory [MiB]\n\
             GPU-bbb, 4242, python, [N/A]\nGPU-aaa, 17, /usr/bin/python3, 15000 MiB\n",
        )
        .unwrap();
        attach(&mut gpus, apps);
        assert_eq!(gpus[0].processes[0].pid, 17);
        assert_eq!(gpus[0].processes[0].used_memory_bytes, Some(15000 * MIB));
        assert_eq!(gpus[1].processes[0].used_memory_bytes, None);
        assert_eq!(gpus[1].processes[0].name.as_deref(), Some("python"));
    }

    #[test]
    fn ragged_rows_are_refused() {
        assert!(parse_gpus("0, a, GPU-a\n").is_err());
    }

    #[test]
    fn empty_output_means_no_rows() {
        assert!(parse_gpus("").unwrap().is_empty());
        assert!(
            parse_apps("gpu_uuid, pid, process_name, used_gpu_memory [MiB]\n")
                .unwrap()
                .is_empty()
        );
    }
}
