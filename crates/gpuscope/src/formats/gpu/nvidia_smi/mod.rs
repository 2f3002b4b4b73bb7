//! nvidia-smi as a GPU source and its outputs as formats. The sampler runs
//! `--query-gpu` and `--query-compute-apps` as CSV (stable, documented for scripts); the
//! default table and `-q -x` XML are read too, for saved outputs (`gpuscope monitor --from
//! FILE`), which is how this code is tested on real files without a GPU.

pub mod query_csv;
pub mod table;
pub mod value;
pub mod xml;

use std::io::ErrorKind;
use std::process::Command;

use crate::model::gpu::GpuSample;

/// The GPUs in a saved nvidia-smi output: `-q -x` XML, the default table, or
/// `--query-gpu` CSV (with or without header and units), told apart by their first bytes.
pub fn parse_saved(text: &str) -> Result<Vec<GpuSample>, String> {
    let start = text.trim_start();
    if start.is_empty() {
        return Err("the file is empty".into());
    }
    let gpus = if start.starts_with("<?xml") || start.starts_with("<nvidia_smi_log") {
        xml::parse(text)
    } else if text.lines().any(|l| l.starts_with("|===")) {
        table::parse(text)
    } else if start.lines().next().is_some_and(|l| l.contains(',')) {
        query_csv::parse_gpus(text)
    } else {
        return Err("not an nvidia-smi output: no XML, no table, no CSV".into());
    }?;
    if gpus.is_empty() {
        return Err("no GPU in it".into());
    }
    Ok(gpus)
}

/// The `nvidia-smi` on PATH.
#[derive(Debug)]
pub struct NvidiaSmi {
    program: String,
}

impl NvidiaSmi {
    /// Finds nvidia-smi and checks it can list GPUs; the error says why not, in a few
    /// words (`nvidia-smi not on PATH`, `nvidia-smi failed: <its message>`).
    pub fn probe() -> Result<NvidiaSmi, String> {
        let smi = NvidiaSmi {
            program: "nvidia-smi".into(),
        };
        smi.read()?;
        Ok(smi)
    }

    /// Every GPU with its compute processes.
    pub fn read(&self) -> Result<Vec<GpuSample>, String> {
        let gpus = self.query(&format!("--query-gpu={}", query_csv::GPU_FIELDS.join(",")))?;
        let mut gpus = query_csv::parse_gpus(&gpus).map_err(|e| format!("nvidia-smi: {e}"))?;
        // Process lists fail on some drivers and in some containers; GPUs stay usable.
        let apps = self
            .query(&format!(
                "--query-compute-apps={}",
                query_csv::APP_FIELDS.join(",")
            ))
            .and_then(|text| query_csv::parse_apps(&text));
        if let Ok(apps) = apps {
            query_csv::attach(&mut gpus, apps);
        }
        Ok(gpus)
    }

    fn query(&self, query: &str) -> Result<String, String> {
        let output = Command::new(&self.program)
            .args([query, "--format=csv,noheader,nounits"])
            .output()
            .map_err(|e| match e.kind() {
                ErrorKind::NotFound => "nvidia-smi not on PATH".to_owned(),
                _ => format!("nvidia-smi could not be started: {e}"),
            })?;
        if !output.status.success() {
            let said = String::from_utf8_lossy(&output.stdout).to_string()
                + &String::from_utf8_lossy(&output.stderr);
            let first = said.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
            return Err(format!("nvidia-smi failed: {}", first.trim()));
        }
        String::from_utf8(output.stdout).map_err(|_| "nvidia-smi wrote non-UTF-8 output".into())
    }
}
