//! GPU and host samples: where GPU figures come from (NVML, then `nvidia-smi` on PATH,
//! else none — or a saved nvidia-smi output), the host and process-tree figures beside
//! them, and the files they are logged to (`gpu.jsonl`, CSV, TensorBoard `GPU/`, `Host/`).
//! `GPUSCOPE_NO_GPU` ([`NO_GPU_VAR`]) rules the live sources out, read here and nowhere
//! else.

pub mod log;
pub mod nvidia_smi;
pub mod nvml;
pub mod process_tree;
pub mod samples;
pub mod tags;

use std::path::Path;

use crate::formats::tfevents::file_writer::now_unix;
use crate::model::gpu::{GpuSample, Sample, SAMPLE_SCHEMA};
use crate::{Error, Result};
use nvidia_smi::NvidiaSmi;
use nvml::NvmlSource;
use process_tree::HostSampler;

/// The environment variable that rules GPU sources out: `nvml` skips NVML (nvidia-smi is
/// still tried); any other value but `0`, `false`, `no`, `off` or nothing skips both, so
/// that the monitor and `gpuscope run` behave on a GPU machine as on one without.
pub const NO_GPU_VAR: &str = "GPUSCOPE_NO_GPU";

/// What [`NO_GPU_VAR`] rules out, with its value as given (for the message).
#[derive(Debug, PartialEq, Eq)]
enum RuledOut {
    Nothing,
    Nvml(String),
    Both(String),
}

impl RuledOut {
    fn from_env() -> RuledOut {
        RuledOut::from_value(std::env::var_os(NO_GPU_VAR).map(|v| v.to_string_lossy().into()))
    }

    fn from_value(value: Option<String>) -> RuledOut {
        let Some(value) = value else {
            return RuledOut::Nothing;
        };
        match value.trim().to_ascii_lowercase().as_str() {
            "" | "0" | "false" | "no" | "off" => RuledOut::Nothing,
            "nvml" => RuledOut::Nvml(value),
            _ => RuledOut::Both(value),
        }
    }
}

/// Where GPU figures come from.
enum Source {
    /// Boxed: NVML's function table is 12 kB.
    Nvml(Box<NvmlSource>),
    NvidiaSmi(NvidiaSmi),
    /// A saved nvidia-smi output, read once: every sample shows the same GPUs.
    Saved {
        path: String,
        gpus: Vec<GpuSample>,
    },
    None,
}

/// Takes [`Sample`]s: GPUs from one source, the host, and optionally a process tree.
pub struct Sampler {
    source: Source,
    host: HostSampler,
    tree_root: Option<u32>,
    no_gpu_reason: Option<String>,
}

impl Sampler {
    /// Tries NVML, then nvidia-smi on PATH, unless [`NO_GPU_VAR`] rules them out; with
    /// neither, samples the host only and [`Self::no_gpu_reason`] says why (`NVML not
    /// loadable, nvidia-smi not on PATH`; `NVML and nvidia-smi not tried
    /// (GPUSCOPE_NO_GPU=1)`).
    pub fn detect() -> Sampler {
        let nvml = match RuledOut::from_env() {
            RuledOut::Nothing => NvmlSource::open(),
            RuledOut::Nvml(value) => Err(format!("NVML not tried ({NO_GPU_VAR}={value})")),
            RuledOut::Both(value) => {
                let reason = format!("NVML and nvidia-smi not tried ({NO_GPU_VAR}={value})");
                return Sampler::with_source(Source::None, Some(reason));
            }
        };
        let (source, reason) = match nvml {
            Ok(nvml) => (Source::Nvml(Box::new(nvml)), None),
            Err(nvml_failed) => match NvidiaSmi::probe() {
                Ok(smi) => (Source::NvidiaSmi(smi), None),
                Err(smi_failed) => (Source::None, Some(format!("{nvml_failed}, {smi_failed}"))),
            },
        };
        Sampler::with_source(source, reason)
    }

    /// GPUs from a saved `nvidia-smi`, `nvidia-smi -q -x` or `--query-gpu` CSV output.
    pub fn from_saved(path: &Path) -> Result<Sampler> {
        let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
        let gpus = nvidia_smi::parse_saved(&text).map_err(|what| {
            Error::bad_input(
                path,
                format!(
                    "{what} (give a saved nvidia-smi, nvidia-smi -q -x or --query-gpu CSV output)"
                ),
            )
        })?;
        let source = Source::Saved {
            path: path.display().to_string(),
            gpus,
        };
        Ok(Sampler::with_source(source, None))
    }

    fn with_source(source: Source, no_gpu_reason: Option<String>) -> Sampler {
        Sampler {
            source,
            host: HostSampler::new(),
            tree_root: None,
            no_gpu_reason,
        }
    }

    /// Also samples the process tree under `pid` from now on.
    pub fn follow_tree(&mut self, pid: u32) {
        self.tree_root = Some(pid);
    }

    /// Takes a first CPU reading now, so that the next sample has CPU figures (CPU use is
    /// measured between two readings, at least 200 ms apart).
    pub fn prime_cpu(&mut self) {
        self.host.host();
    }

    /// Why there is no GPU source, when there is none.
    pub fn no_gpu_reason(&self) -> Option<&str> {
        self.no_gpu_reason.as_deref()
    }

    /// The source's name as written in each sample's `source`.
    pub fn source_name(&self) -> String {
        match &self.source {
            Source::Nvml(_) => "nvml".into(),
            Source::NvidiaSmi(_) => "nvidia-smi".into(),
            Source::Saved { path, .. } => path.clone(),
            Source::None => "none".into(),
        }
    }

    /// Everything now. A source that fails leaves `gpus` empty and says why in `gpu_error`.
    pub fn sample(&mut self) -> Sample {
        let time = now_unix();
        let read = match &self.source {
            Source::Nvml(nvml) => nvml.read(),
            Source::NvidiaSmi(smi) => smi.read(),
            Source::Saved { gpus, .. } => Ok(gpus.clone()),
            Source::None => Ok(Vec::new()),
        };
        let (mut gpus, gpu_error) = match read {
            Ok(gpus) => (gpus, None),
            Err(e) => (Vec::new(), Some(e)),
        };
        let host = self.host.host();
        let has_processes = gpus.iter().any(|g| !g.processes.is_empty());
        if self.tree_root.is_some() || has_processes {
            self.host.refresh_processes();
        }
        if !matches!(self.source, Source::Saved { .. }) {
            self.host.name_processes(&mut gpus);
        }
        let tree = self.tree_root.and_then(|root| self.host.tree(root, &gpus));
        Sample {
            schema: SAMPLE_SCHEMA.into(),
            time,
            source: self.source_name(),
            gpus,
            gpu_error,
            host,
            tree,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::RuledOut;

    #[test]
    fn no_gpu_values() {
        let of = |v: &str| RuledOut::from_value(Some(v.to_owned()));
        assert_eq!(RuledOut::from_value(None), RuledOut::Nothing);
        for off in ["", "0", " Off ", "false", "no"] {
            assert_eq!(of(off), RuledOut::Nothing, "{off:?}");
        }
        assert_eq!(of("NVML"), RuledOut::Nvml("NVML".into()));
        for on in ["1", "true", "yes", "all"] {
            assert_eq!(of(on), RuledOut::Both(on.into()));
        }
    }
}
