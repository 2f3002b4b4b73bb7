//! Splits a JSON document read from a stream into the raw bytes of its top-level object's
//! values, and of the elements of one array value, without parsing them.
//!
//! Written by hand because nothing else does this job: serde_json reads an `io::Read`
//! byte by byte through its `IoRead` (slower than parsing the same bytes from a slice)
//! and hands out values only as they are deserialized, one at a time; a trace's
//! `traceEvents` array is hundreds of MB. Cutting it into elements here lets serde_json
//! parse batches of them from slices, on every core, while memory holds two batches. The
//! splitter only tracks strings, escapes and nesting; serde_json still checks every
//! element in full.

use std::io::Read;

/// What went wrong while splitting.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SplitError {
    /// The input ended inside the document.
    Truncated,
    /// A byte that cannot be there.
    Unexpected {
        /// The byte.
        byte: u8,
        /// Its offset in the (decompressed) input.
        at: u64,
    },
    /// Reading failed.
    Io(String),
}

impl std::fmt::Display for SplitError {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        match self {
            SplitError::Truncated => f.write_str("ends in the middle of the JSON (truncated?)"),
            SplitError::Unexpected { byte, at } => write!(
                f,
                "not a valid trace: unexpected {:?} at byte {at}",
                char::from(*byte)
            ),
            SplitError::Io(e) => write!(f, "cannot be read to the end ({e}; a truncated .gz?)"),
        }
    }
}

const CHUNK: usize = 1 << 20;

/// Where a scan through one value is: how deep in its containers, inside a string or
/// not, after a backslash or not. It carries over from one chunk to the next.
///
/// Only the value's own kind of bracket is counted (`{}` for an object, `[]` for an
/// array): in valid JSON the other kind nests inside and balances itself, and serde_json
/// checks every element in full afterwards. That lets `memchr3` jump from one quote or
/// bracket to the next instead of looking at every byte.
#[derive(Debug, Default, Clone, Copy)]
struct Scan {
    depth: usize,
    in_string: bool,
    escaped: bool,
    open: u8,
    close: u8,
}

impl Scan {
    /// The length of the value's bytes in `chunk` when the value ends there.
    fn end_in(&mut self, chunk: &[u8]) -> Option<usize> {
        let mut i = 0;
        if self.depth == 0 && !self.in_string {
            match chunk.first()? {
                b'"' => {
                    self.in_string = true;
                    i = 1;
                }
                &b @ (b'{' | b'[') => {
                    (self.open, self.close) = (b, if b == b'{' { b'}' } else { b']' });
                    self.depth = 1;
                    i = 1;
                }
                // A number or literal: it ends at the first delimiter.
                _ => {
                    return chunk.iter().position(|&b| {
                        matches!(b, b',' | b':' | b']' | b'}') || b.is_ascii_whitespace()
                    });
                }
            }
        }
        while i < chunk.len() {
            if self.escaped {
                self.escaped = false;
                i += 1;
                continue;
            }
            let rest = &chunk[i..];
            if self.in_string {
                let at = i + memchr::memchr2(b'"', b'\\', rest)?;
                if chunk[at] == b'\\' {
                    self.escaped = true;
                } else {
                    self.in_string = false;
                    if self.depth == 0 {
                        return Some(at + 1);
                    }
                }
                i = at + 1;
                continue;
            }
            let at = i + memchr::memchr3(b'"', self.open, self.close, rest)?;
            match chunk[at] {
                b'"' => self.in_string = true,
                b if b == self.open => self.depth += 1,
                _ => {
                    self.depth -= 1;
                    if self.depth == 0 {
                        return Some(at + 1);
                    }
                }
            }
            i = at + 1;
        }
        None
    }
}

/// A JSON document being split, read in chunks.
pub struct Splitter<R> {
    input: R,
    /// Zeroed once and reused: `buf[pos..end]` is the input not consumed yet.
    buf: Vec<u8>,
    end: usize,
    pos: usize,
    /// Bytes dropped from the front of `buf` so far.
    offset: u64,
}

impl<R: Read> Splitter<R> {
    /// Splits what `input` yields.
    pub fn new(input: R) -> Self {
        Splitter {
            input,
            buf: Vec::new(),
            end: 0,
            pos: 0,
            offset: 0,
        }
    }

    /// Skips a UTF-8 byte-order mark at the start, which some editors write.
    pub fn skip_bom(&mut self) -> Result<(), SplitError> {
        while self.end < 3 && self.refill_more()? {}
        if self.buf[..self.end].starts_with(b"\xEF\xBB\xBF") {
            self.pos = 3;
        }
        Ok(())
    }

    /// Appends more input to the buffer; false at the end.
    fn refill_more(&mut self) -> Result<bool, SplitError> {
        let start = self.end;
        if self.buf.len() < start + CHUNK {
            self.buf.resize(start + CHUNK, 0);
        }
        loop {
            match self.input.read(&mut self.buf[start..start + CHUNK]) {
                Ok(n) => {
                    self.end = start + n;
                    return Ok(n > 0);
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(SplitError::Io(e.to_string())),
            }
        }
    }

    /// Reads the next chunk; false at the end of the input.
    fn refill(&mut self) -> Result<bool, SplitError> {
        self.offset += self.pos as u64;
        self.buf.copy_within(self.pos..self.end, 0);
        self.end -= self.pos;
        self.pos = 0;
        self.refill_more()
    }

    /// The next byte that is not whitespace, without consuming it; `None` at the end.
    pub fn peek(&mut self) -> Result<Option<u8>, SplitError> {
        loop {
            while self.pos < self.end {
                let b = self.buf[self.pos];
                if !b.is_ascii_whitespace() {
                    return Ok(Some(b));
                }
                self.pos += 1;
            }
            if !self.refill()? {
                return Ok(None);
            }
        }
    }

    /// Consumes `expected` (after whitespace), or fails.
    pub fn expect(&mut self, expected: u8) -> Result<(), SplitError> {
        match self.peek()? {
            Some(b) if b == expected => {
                self.pos += 1;
                Ok(())
            }
            Some(byte) => Err(self.unexpected(byte)),
            None => Err(SplitError::Truncated),
        }
    }

    fn unexpected(&self, byte: u8) -> SplitError {
        SplitError::Unexpected {
            byte,
            at: self.offset + self.pos as u64,
        }
    }

    /// Consumes a comma and returns true, or consumes `close` and returns false.
    pub fn next_or_close(&mut self, close: u8) -> Result<bool, SplitError> {
        match self.peek()? {
            Some(b',') => {
                self.pos += 1;
                Ok(true)
            }
            Some(b) if b == close => {
                self.pos += 1;
                Ok(false)
            }
            Some(byte) => Err(self.unexpected(byte)),
            None => Err(SplitError::Truncated),
        }
    }

    /// Appends the raw bytes of the next value (object, array, string, number, literal)
    /// to `out` and consumes them.
    pub fn value(&mut self, out: &mut Vec<u8>) -> Result<(), SplitError> {
        let first = self.peek()?.ok_or(SplitError::Truncated)?;
        if matches!(first, b'}' | b']' | b',' | b':') {
            return Err(self.unexpected(first));
        }
        let mut scan = Scan::default();
        loop {
            let chunk = &self.buf[self.pos..self.end];
            match scan.end_in(chunk) {
                Some(n) => {
                    out.extend_from_slice(&chunk[..n]);
                    self.pos += n;
                    return Ok(());
                }
                None => {
                    out.extend_from_slice(chunk);
                    self.pos = self.end;
                    if !self.refill()? {
                        // A number or literal may end with the input; nothing else may.
                        return if scan.depth == 0 && !scan.in_string && first != b'"' {
                            Ok(())
                        } else {
                            Err(SplitError::Truncated)
                        };
                    }
                }
            }
        }
    }

    /// Reads the key of an object member and consumes the colon after it.
    pub fn key(&mut self) -> Result<String, SplitError> {
        let mut raw = Vec::new();
        let at = self.offset + self.pos as u64;
        self.value(&mut raw)?;
        let key: String = serde_json::from_slice(&raw).map_err(|_| SplitError::Unexpected {
            byte: raw.first().copied().unwrap_or(b'?'),
            at,
        })?;
        self.expect(b':')?;
        Ok(key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Hands out its input a byte per read, so every value crosses chunk boundaries.
    struct ByteAtATime<'a>(&'a [u8]);

    impl Read for ByteAtATime<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let Some((&first, rest)) = self.0.split_first() else {
                return Ok(0);
            };
            buf[0] = first;
            self.0 = rest;
            Ok(1)
        }
    }

    fn values(json: &str) -> Vec<String> {
        let whole = split(Splitter::new(json.as_bytes()));
        assert_eq!(split(Splitter::new(ByteAtATime(json.as_bytes()))), whole);
        whole
    }

    fn split<R: Read>(mut s: Splitter<R>) -> Vec<String> {
        s.expect(b'[').unwrap();
        let mut out = Vec::new();
        if s.peek().unwrap() == Some(b']') {
            return out;
        }
        loop {
            let mut raw = Vec::new();
            s.value(&mut raw).unwrap();
            out.push(String::from_utf8(raw).unwrap());
            if !s.next_or_close(b']').unwrap() {
                return out;
            }
        }
    }

    #[test]
    fn elements_come_out_whole() {
        assert_eq!(
            values(r#"[ {"a": "x}\"]", "b": [1, {"c": 2}]}, 12.5e3 , "s,t", true, [] ]"#),
            vec![
                r#"{"a": "x}\"]", "b": [1, {"c": 2}]}"#,
                "12.5e3",
                r#""s,t""#,
                "true",
                "[]"
            ]
        );
        assert_eq!(
            values(r#"[[[1], {"k": "]\\"}, "[\"{"], {"a": {"b": {}}, "c": "\\\""}, -0.5]"#),
            vec![
                r#"[[1], {"k": "]\\"}, "[\"{"]"#,
                r#"{"a": {"b": {}}, "c": "\\\""}"#,
                "-0.5"
            ]
        );
        assert!(values("[]").is_empty());
    }

    #[test]
    fn a_cut_document_is_truncated_not_garbage() {
        let mut s = Splitter::new(r#"[{"a": "unfinished"#.as_bytes());
        s.expect(b'[').unwrap();
        let mut raw = Vec::new();
        assert_eq!(s.value(&mut raw), Err(SplitError::Truncated));
        let mut s = Splitter::new("[1 2]".as_bytes());
        s.expect(b'[').unwrap();
        s.value(&mut Vec::new()).unwrap();
        assert!(matches!(
            s.next_or_close(b']'),
            Err(SplitError::Unexpected { byte: b'2', .. })
        ));
    }
}
