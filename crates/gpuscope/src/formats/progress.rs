//! Progress of reading: a reader that counts the bytes read through it, across several
//! files, and tells a callback (the CLI draws a bar with it).

use std::io::Read;

/// Bytes read so far out of a known total, told to a callback after every read.
pub struct Progress<'a> {
    done: u64,
    total: u64,
    report: &'a mut dyn FnMut(u64, u64),
}

impl<'a> Progress<'a> {
    /// Progress over `total` bytes, told to `report(done, total)`.
    pub fn new(total: u64, report: &'a mut dyn FnMut(u64, u64)) -> Self {
        Progress {
            done: 0,
            total,
            report,
        }
    }

    /// `inner`, counted into this progress.
    pub fn reader<R: Read>(&mut self, inner: R) -> Counted<'_, 'a, R> {
        Counted {
            inner,
            progress: self,
        }
    }
}

/// A reader that counts what is read of it into a [`Progress`].
pub struct Counted<'p, 'a, R> {
    inner: R,
    progress: &'p mut Progress<'a>,
}

impl<R: Read> Read for Counted<'_, '_, R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        let p = &mut *self.progress;
        p.done += n as u64;
        (p.report)(p.done, p.total);
        Ok(n)
    }
}
