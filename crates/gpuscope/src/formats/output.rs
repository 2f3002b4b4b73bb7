//! The files commands write their results into. Creating and writing them happens here,
//! not in the renderers (which write to any `io::Write`), so that every failure to write
//! is an [`Error::Output`], told apart from input that cannot be used.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;

use crate::{Error, Result};

/// Creates (or truncates) the file at `path` for writing.
pub fn create(path: &Path) -> Result<BufWriter<File>> {
    File::create(path)
        .map(BufWriter::new)
        .map_err(|e| Error::output(path, e))
}

/// Creates the directory `dir` and its parents when missing.
pub fn create_dir(dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(|e| Error::output(dir, e))
}

/// Creates the file at `path` and fills it with `write` (a renderer).
pub fn write_file(
    path: &Path,
    write: impl FnOnce(&mut BufWriter<File>) -> io::Result<()>,
) -> Result<()> {
    let mut out = create(path)?;
    write(&mut out)
        .and_then(|()| out.flush())
        .map_err(|e| Error::output(path, e))
}
