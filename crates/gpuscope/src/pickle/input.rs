//! The byte stream under the opcode interpreter: buffered reads that count the offset and
//! tell a clean end of input from a read error.
//!
//! Lengths in a pickle are untrusted: [`Input::read_n`] appends what the input really
//! holds (through `Read::take`), so a claimed length of 2^63 bytes ends as "truncated",
//! not as an allocation of 2^63 bytes.
//!
//! Almost every read is a few bytes that are already in the buffer: each method first
//! takes them from there, and goes through the `Read` machinery only at a buffer's end.

use std::io::{self, BufRead, BufReader, Read};

pub(crate) struct Input<R> {
    inner: BufReader<R>,
    pos: u64,
}

impl<R: Read> Input<R> {
    pub(crate) fn new(reader: R) -> Self {
        Input {
            inner: BufReader::with_capacity(64 * 1024, reader),
            pos: 0,
        }
    }

    /// Bytes consumed so far.
    pub(crate) fn pos(&self) -> u64 {
        self.pos
    }

    /// The next byte, or `None` at the end of the input.
    #[inline]
    pub(crate) fn byte(&mut self) -> io::Result<Option<u8>> {
        if let Some(&byte) = self.inner.buffer().first() {
            self.inner.consume(1);
            self.pos += 1;
            return Ok(Some(byte));
        }
        self.byte_refilled()
    }

    /// [`Input::byte`] when the buffer is empty.
    #[cold]
    fn byte_refilled(&mut self) -> io::Result<Option<u8>> {
        let buf = loop {
            match self.inner.fill_buf() {
                Ok(buf) => break buf,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        };
        let Some(&byte) = buf.first() else {
            return Ok(None);
        };
        self.inner.consume(1);
        self.pos += 1;
        Ok(Some(byte))
    }

    /// The next `N` bytes, or `None` if the input ends first.
    #[inline]
    pub(crate) fn array<const N: usize>(&mut self) -> io::Result<Option<[u8; N]>> {
        if let Some(&out) = self.inner.buffer().first_chunk::<N>() {
            self.inner.consume(N);
            self.pos += N as u64;
            return Ok(Some(out));
        }
        let mut out = [0u8; N];
        match self.inner.read_exact(&mut out) {
            Ok(()) => {
                self.pos += N as u64;
                Ok(Some(out))
            }
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Appends the next `n` bytes to `out`; `false` if the input ends first (`out` then
    /// holds what there was). Memory grows with the bytes read, never with `n`.
    pub(crate) fn read_n(&mut self, n: u64, out: &mut Vec<u8>) -> io::Result<bool> {
        let buffered = self.inner.buffer();
        if let Some(bytes) = usize::try_from(n).ok().and_then(|n| buffered.get(..n)) {
            out.extend_from_slice(bytes);
            self.inner.consume(bytes.len());
            self.pos += n;
            return Ok(true);
        }
        let got = (&mut self.inner).take(n).read_to_end(out)? as u64;
        self.pos += got;
        Ok(got == n)
    }

    /// Reads through the next `\n` into `out` (cleared first), without the newline;
    /// `false` if the input ends before a newline.
    pub(crate) fn line(&mut self, out: &mut Vec<u8>) -> io::Result<bool> {
        out.clear();
        let got = self.inner.read_until(b'\n', out)? as u64;
        self.pos += got;
        if out.last() == Some(&b'\n') {
            out.pop();
            Ok(true)
        } else {
            Ok(false)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_huge_claimed_length_reads_only_what_is_there() {
        let mut input = Input::new(&b"abc"[..]);
        let mut out = Vec::new();
        assert!(!input.read_n(u64::MAX, &mut out).unwrap());
        assert_eq!(out, b"abc");
        assert_eq!(input.pos(), 3);
        assert_eq!(input.byte().unwrap(), None);
    }

    #[test]
    fn lines_arrays_and_bytes_count_the_offset() {
        let mut input = Input::new(&b"12\nxyz"[..]);
        let mut line = Vec::new();
        assert!(input.line(&mut line).unwrap());
        assert_eq!(line, b"12");
        assert_eq!(input.array::<2>().unwrap(), Some(*b"xy"));
        assert_eq!(input.pos(), 5);
        assert_eq!(input.array::<2>().unwrap(), None);
        let mut input = Input::new(&b"no newline"[..]);
        assert!(!input.line(&mut line).unwrap());
        assert_eq!(input.pos(), 10);
    }
}
