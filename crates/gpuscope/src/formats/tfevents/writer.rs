//! A log directory's writer with the behaviour of `torch.utils.tensorboard.SummaryWriter`
//! that people rely on, so that switching to it changes nothing in TensorBoard:
//! `add_scalars` writes one sub-run per key (`<log_dir>/<main_tag>_<key>/`, tag `main_tag`),
//! and text tags get SummaryWriter's `/text_summary` suffix.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use super::encode;
use super::file_writer::{now_unix, EventFileWriter, WriterOptions};
use crate::model::tensorboard::{ChartGroup, Histogram};
use crate::{Error, Result};

/// Suffix SummaryWriter appends to text tags; kept so dashboards keep their tag names.
pub const TEXT_TAG_SUFFIX: &str = "/text_summary";

/// Writes the event files of one log directory.
pub struct EventWriter {
    log_dir: PathBuf,
    options: WriterOptions,
    main: EventFileWriter,
    sub_runs: Mutex<HashMap<String, EventFileWriter>>,
}

impl EventWriter {
    /// Opens a new event file in `log_dir` (created if missing).
    pub fn create(log_dir: impl Into<PathBuf>, options: WriterOptions) -> Result<Self> {
        let log_dir = log_dir.into();
        let main = EventFileWriter::create(&log_dir, &options)?;
        Ok(EventWriter {
            log_dir,
            options,
            main,
            sub_runs: Mutex::new(HashMap::new()),
        })
    }

    /// The log directory.
    pub fn log_dir(&self) -> &Path {
        &self.log_dir
    }

    /// The main event file.
    pub fn path(&self) -> &Path {
        self.main.path()
    }

    /// One scalar; `wall_time` defaults to now.
    pub fn add_scalar(
        &self,
        tag: &str,
        value: f64,
        step: i64,
        wall_time: Option<f64>,
    ) -> Result<()> {
        let t = wall_time.unwrap_or_else(now_unix);
        self.main.write(&encode::scalar(tag, value, step, t))
    }

    /// One scalar as a rank-0 tensor (float64 when `double`), as SummaryWriter writes with
    /// `new_style=True`; readers see the same scalar.
    pub fn add_scalar_tensor(
        &self,
        tag: &str,
        value: f64,
        double: bool,
        step: i64,
        wall_time: Option<f64>,
    ) -> Result<()> {
        let t = wall_time.unwrap_or_else(now_unix);
        self.main
            .write(&encode::scalar_tensor(tag, value, double, step, t))
    }

    /// Several scalars on one chart, SummaryWriter-style: each key goes to its own sub-run
    /// directory `<main_tag with / as _>_<key>` under the log directory, with tag `main_tag`.
    pub fn add_scalars(
        &self,
        main_tag: &str,
        values: &[(String, f64)],
        step: i64,
        wall_time: Option<f64>,
    ) -> Result<()> {
        let t = wall_time.unwrap_or_else(now_unix);
        let mut sub_runs = self.lock_sub_runs()?;
        for (key, value) in values {
            let run = format!("{}_{}", main_tag.replace('/', "_"), key);
            let writer = match sub_runs.entry(run) {
                std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
                std::collections::hash_map::Entry::Vacant(e) => {
                    let dir = self.log_dir.join(e.key());
                    e.insert(EventFileWriter::create(&dir, &self.options)?)
                }
            };
            writer.write(&encode::scalar(main_tag, *value, step, t))?;
        }
        Ok(())
    }

    /// Text for TensorBoard's text plugin, under `<tag>/text_summary` as SummaryWriter names it.
    pub fn add_text(&self, tag: &str, text: &str, step: i64, wall_time: Option<f64>) -> Result<()> {
        let t = wall_time.unwrap_or_else(now_unix);
        let tag = format!("{tag}{TEXT_TAG_SUFFIX}");
        self.main.write(&encode::text(&tag, text, step, t))
    }

    /// A histogram.
    pub fn add_histogram(
        &self,
        tag: &str,
        histogram: &Histogram,
        step: i64,
        wall_time: Option<f64>,
    ) -> Result<()> {
        let t = wall_time.unwrap_or_else(now_unix);
        self.main.write(&encode::histogram(tag, histogram, step, t))
    }

    /// The custom-scalars layout: which tags share a chart.
    pub fn add_custom_scalars_layout(&self, groups: &[ChartGroup]) -> Result<()> {
        self.main
            .write(&encode::custom_scalars_layout(groups, now_unix()))
    }

    /// Waits until everything written so far has reached the operating system.
    pub fn flush(&self) -> Result<()> {
        self.main.flush()?;
        for writer in self.lock_sub_runs()?.values() {
            writer.flush()?;
        }
        Ok(())
    }

    /// Flushes and closes every file. Idempotent.
    pub fn close(&mut self) -> Result<()> {
        let main = self.main.close();
        let mut first_error = main.err();
        for writer in self.lock_sub_runs()?.values_mut() {
            if let Err(e) = writer.close() {
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    fn lock_sub_runs(&self) -> Result<std::sync::MutexGuard<'_, HashMap<String, EventFileWriter>>> {
        self.sub_runs
            .lock()
            .map_err(|_| Error::InvalidArgument("event writer poisoned by a panic".into()))
    }
}

/// The directory SummaryWriter picks when given none: `runs/<Mon><DD>_<HH-MM-SS>_<host><comment>`.
pub fn default_log_dir(comment: &str) -> PathBuf {
    let now = chrono::Local::now().format("%b%d_%H-%M-%S");
    let host = gethostname::gethostname();
    PathBuf::from("runs").join(format!("{now}_{}{comment}", host.to_string_lossy()))
}
