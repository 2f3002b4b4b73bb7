//! The engine's one error type. Every fallible engine call returns [`Result`]; the CLI maps
//! an [`Error`] to one line and an exit code (2 for what it was given, 1 for output it
//! could not write), the bindings map it to a Python exception.

use std::path::PathBuf;

/// Result alias used across the engine.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What can go wrong in the engine.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file or directory could not be opened, read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file the operation was on.
        path: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// The input exists but is not what it should be (wrong kind of file, corrupt data).
    #[error("{path}: {what}")]
    BadInput {
        /// The offending file.
        path: PathBuf,
        /// What is wrong with it, with a hint of what to do.
        what: String,
    },
    /// A result could not be written where it was asked to go (no such directory, no
    /// permission, disk full): the input was fine.
    #[error("{path}: cannot write: {source}")]
    Output {
        /// The file or directory being written.
        path: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// A caller passed an argument the engine cannot use.
    #[error("{0}")]
    InvalidArgument(String),
    /// A background writer stopped; records sent after this are not written.
    #[error("writer for {path} stopped: {why}")]
    WriterStopped {
        /// The file the writer was writing.
        path: PathBuf,
        /// Why it stopped.
        why: String,
    },
}

impl Error {
    /// An I/O error on `path`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }

    /// Output to `path` that could not be written.
    pub fn output(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Output {
            path: path.into(),
            source,
        }
    }

    /// Input at `path` that cannot be used, and why.
    pub fn bad_input(path: impl Into<PathBuf>, what: impl Into<String>) -> Self {
        Error::BadInput {
            path: path.into(),
            what: what.into(),
        }
    }
}

/// A CSV writer's error as the I/O error it wraps, when it does: the csv crate's own
/// conversion makes every error `Other`, and a closed pipe (`| head`) must stay one.
pub(crate) fn csv_io(e: csv::Error) -> std::io::Error {
    match e.into_kind() {
        csv::ErrorKind::Io(e) => e,
        other => std::io::Error::other(format!("{other:?}")),
    }
}
