//! The one place where engine errors become Python exceptions: gpuscope's own under
//! `GpuscopeError` (`BadInputError`, `WriterError`), plus the built-in `OSError` family
//! (with errno and filename) for files that cannot be opened and `ValueError` for bad
//! arguments, so callers catch them the way they already catch such errors.

use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyOSError};
use pyo3::prelude::*;

create_exception!(
    gpuscope._native,
    GpuscopeError,
    PyException,
    "Base class of every error gpuscope raises."
);
create_exception!(
    gpuscope._native,
    BadInputError,
    GpuscopeError,
    "An input file that cannot be used: wrong kind, corrupt, truncated beyond use."
);
create_exception!(
    gpuscope._native,
    WriterError,
    GpuscopeError,
    "A writer could not write (disk full, directory removed) or was used after close()."
);

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("GpuscopeError", py.get_type::<GpuscopeError>())?;
    m.add("BadInputError", py.get_type::<BadInputError>())?;
    m.add("WriterError", py.get_type::<WriterError>())?;
    Ok(())
}

/// Converts an engine error into the matching Python exception.
pub fn to_py(e: gpuscope::Error) -> PyErr {
    use gpuscope::Error;
    let message = e.to_string();
    match e {
        // OSError(errno, strerror, filename) becomes FileNotFoundError, PermissionError...
        Error::Io { path, source } | Error::Output { path, source } => {
            match source.raw_os_error() {
                Some(errno) => PyOSError::new_err((errno, source.to_string(), path)),
                None => PyErr::from(std::io::Error::new(source.kind(), message)),
            }
        }
        Error::BadInput { .. } => BadInputError::new_err(message),
        Error::InvalidArgument(_) => pyo3::exceptions::PyValueError::new_err(message),
        Error::WriterStopped { .. } => WriterError::new_err(message),
    }
}

/// `?`-friendly conversion of engine results.
pub trait IntoPy<T> {
    /// The result with its error converted by [`to_py`].
    fn py_err(self) -> PyResult<T>;
}

impl<T> IntoPy<T> for gpuscope::Result<T> {
    fn py_err(self) -> PyResult<T> {
        self.map_err(to_py)
    }
}
