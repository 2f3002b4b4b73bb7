//! The byte stream under the opcode interpreter: a cursor over a buffer of the input that
//! counts the offset and tells a clean end of input from a read error.
//!
//! Lengths in a pickle are untrusted: [`Input::read_n`] appends what the input really
//! holds (through `Read::take`), so a claimed length of 2^63 bytes ends as "truncated",
//! not as an allocation of 2^63 bytes.
//!
//! Almost every read is a few bytes that are already in the buffer: each method first
//! takes them from there with an index and a bounds check, and goes to the reader only at
//! the buffer's end (a `BufReader` between would add its own bookkeeping to every byte).

use std::io::{self, Read, Write};

const BUFFER: usize = 64 * 1024;

pub(crate) struct Input<R> {
    reader: R,
    buf: Box<[u8]>,
    /// The next byte to read in `buf`.
    at: usize,
    /// The end of the bytes read into `buf`.
    end: usize,
    /// Offset in the input of `buf[0]`.
    base: u64,
}

impl<R: Read> Input<R> {
    pub(crate) fn new(reader: R) -> Self {
        Input {
            reader,
            buf: vec![0; BUFFER].into_boxed_slice(),
            at: 0,
            end: 0,
            base: 0,
        }
    }

    /// Bytes consumed so far.
    #[inline]
    pub(crate) fn pos(&self) -> u64 {
        self.base + self.at as u64
    }

    /// The bytes buffered and not consumed yet.
    #[inline]
    pub(crate) fn buffered(&self) -> &[u8] {
        self.buf.get(self.at..self.end).unwrap_or_default()
    }

    /// Consumes `n` bytes of [`Input::buffered`].
    #[inline]
    pub(crate) fn consume(&mut self, n: usize) {
        self.at = (self.at + n).min(self.end);
    }

    /// Refills the empty buffer; `false` at the end of the input.
    #[cold]
    fn refill(&mut self) -> io::Result<bool> {
        self.base += self.at as u64;
        self.at = 0;
        self.end = 0;
        loop {
            match self.reader.read(&mut self.buf) {
                Ok(n) => {
                    self.end = n;
                    return Ok(n > 0);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
    }

    /// The next byte, or `None` at the end of the input.
    #[inline]
    pub(crate) fn byte(&mut self) -> io::Result<Option<u8>> {
        if self.at >= self.end && !self.refill()? {
            return Ok(None);
        }
        let Some(&byte) = self.buf.get(self.at) else {
            return Ok(None);
        };
        self.at += 1;
        Ok(Some(byte))
    }

    /// The next `N` bytes, or `None` if the input ends first.
    #[inline]
    pub(crate) fn array<const N: usize>(&mut self) -> io::Result<Option<[u8; N]>> {
        if let Some(&out) = self.buffered().first_chunk::<N>() {
            self.at += N;
            return Ok(Some(out));
        }
        self.array_across()
    }

    /// [`Input::array`] across the buffer's end.
    #[cold]
    fn array_across<const N: usize>(&mut self) -> io::Result<Option<[u8; N]>> {
        let mut out = [0u8; N];
        for slot in &mut out {
            match self.byte()? {
                Some(b) => *slot = b,
                None => return Ok(None),
            }
        }
        Ok(Some(out))
    }

    /// Appends the next `n` bytes to `out`; `false` if the input ends first (`out` then
    /// holds what there was). Memory grows with the bytes read, never with `n`.
    pub(crate) fn read_n(&mut self, n: u64, out: &mut Vec<u8>) -> io::Result<bool> {
        self.pass_n(n, out)
    }

    /// Reads past the next `n` bytes; `false` if the input ends first.
    pub(crate) fn skip(&mut self, n: u64) -> io::Result<bool> {
        self.pass_n(n, &mut io::sink())
    }

    /// Writes the next `n` bytes to `out`; `false` if the input ends first.
    fn pass_n<W: Write>(&mut self, n: u64, out: &mut W) -> io::Result<bool> {
        let buffered = self.buffered();
        let now = usize::try_from(n).map_or(buffered.len(), |n| n.min(buffered.len()));
        out.write_all(&buffered[..now])?;
        self.at += now;
        let rest = n - now as u64;
        if rest == 0 {
            return Ok(true);
        }
        // The buffer is empty: the rest comes straight from the reader.
        self.base += self.at as u64;
        self.at = 0;
        self.end = 0;
        let got = io::copy(&mut (&mut self.reader).take(rest), out)?;
        self.base += got;
        Ok(got == rest)
    }

    /// Reads through the next `\n` into `out` (cleared first), without the newline;
    /// `false` if the input ends before a newline.
    pub(crate) fn line(&mut self, out: &mut Vec<u8>) -> io::Result<bool> {
        out.clear();
        loop {
            let buffered = self.buffered();
            if let Some(k) = buffered.iter().position(|&b| b == b'\n') {
                out.extend_from_slice(&buffered[..k]);
                self.at += k + 1;
                return Ok(true);
            }
            out.extend_from_slice(buffered);
            self.at = self.end;
            if !self.refill()? {
                return Ok(false);
            }
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

    /// A reader that hands out one byte per call, so every read crosses a buffer's end.
    struct Trickle<'a>(&'a [u8]);

    impl Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let Some((&first, rest)) = self.0.split_first() else {
                return Ok(0);
            };
            match buf.first_mut() {
                Some(slot) => *slot = first,
                None => return Ok(0),
            }
            self.0 = rest;
            Ok(1)
        }
    }

    #[test]
    fn reads_across_the_buffers_end_count_the_offset() {
        let mut input = Input::new(Trickle(b"12\nxyzabcdef"));
        let mut line = Vec::new();
        assert!(input.line(&mut line).unwrap());
        assert_eq!(line, b"12");
        assert_eq!(input.array::<4>().unwrap(), Some(*b"xyza"));
        let mut out = Vec::new();
        assert!(input.read_n(3, &mut out).unwrap());
        assert_eq!(out, b"bcd");
        assert_eq!(input.pos(), 10);
        assert_eq!(input.byte().unwrap(), Some(b'e'));
        assert_eq!(input.array::<2>().unwrap(), None);
        assert_eq!(input.pos(), 12);
    }

    #[test]
    fn skips_count_the_offset_and_tell_a_short_input() {
        let mut input = Input::new(Trickle(b"abcdefgh"));
        assert_eq!(input.byte().unwrap(), Some(b'a'));
        assert!(input.skip(3).unwrap());
        assert_eq!(input.byte().unwrap(), Some(b'e'));
        assert!(!input.skip(u64::MAX).unwrap());
        assert_eq!(input.pos(), 8);
        let mut input = Input::new(&b"abcdefgh"[..]);
        assert!(input.skip(8).unwrap());
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
