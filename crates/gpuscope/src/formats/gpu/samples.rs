//! Reads `gpu.jsonl` back: the samples `gpuscope run` and `monitor --log` wrote, one JSON
//! object a line. A line that is not a sample (a run killed mid-line, another program's
//! output) is counted and left out rather than failing the file.

use std::io::BufRead;
use std::path::Path;

use crate::model::gpu::Sample;
use crate::{Error, Result};

/// The samples of `path`, in file order, and how many lines were left out.
pub fn read_samples(path: &Path) -> Result<(Vec<Sample>, usize)> {
    let file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    let mut samples = Vec::new();
    let mut skipped = 0;
    for line in std::io::BufReader::new(file).lines() {
        let line = line.map_err(|e| Error::io(path, e))?;
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<Sample>(&line) {
            Ok(sample) => samples.push(sample),
            Err(_) => skipped += 1,
        }
    }
    Ok((samples, skipped))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cut_off_line_is_counted_not_fatal() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gpu.jsonl");
        let whole = r#"{"schema":"gpuscope.gpu_sample/1","time":1.5,"source":"none","gpus":[],"host":{"cpu_percent":null,"ram_used_bytes":1,"ram_total_bytes":2}}"#;
        std::fs::write(&path, format!("{whole}\n{whole}\n{}", &whole[..40])).unwrap();
        let (samples, skipped) = read_samples(&path).unwrap();
        assert_eq!((samples.len(), skipped), (2, 1));
        assert_eq!(samples[1].time, 1.5);
    }
}
