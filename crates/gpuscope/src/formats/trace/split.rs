//! Splits a JSON document read from a stream into the raw bytes of its top-level object's
//! values, and of the elements of one array value, without parsing them.
//!
//! Written by hand because nothing else does this job: serde_json reads an `io::Read`
//! byte by byte through its `IoRead` (slower than parsing the same bytes from a slice)
//! and hands out values only as they are deserialized, one at a time; a trace's
//! `traceEvents` array is hundreds of MB. Cutting it into elements here lets serde_json
//! parse batches of them from slices, on every core, while memory holds a few batches. The
//! splitter only tracks strings, escapes and nesting; serde_json checks in full every
//! element that is used (the reader passes over flow events unparsed).

use std::io::Read;

use wide::u8x16;

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
/// checks every element that is used in full afterwards. That lets [`Scan::block`] look at 64 bytes
/// at a time through four bit masks instead of at every byte.
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
            // Whole blocks at a time inside a container; byte by byte through a block
            // with a backslash in it, at the end of the chunk, and in a top-level string.
            let bytes_to = match chunk.get(i..i + BLOCK) {
                Some(block) if self.depth > 0 && !self.escaped => {
                    match self.block(block.try_into().expect("BLOCK bytes")) {
                        Block::Ends(at) => return Some(i + at),
                        Block::Passed => {
                            i += BLOCK;
                            continue;
                        }
                        Block::HasBackslash => i + BLOCK,
                    }
                }
                _ => chunk.len().min(i + BLOCK),
            };
            if let Some(at) = self.bytes(&chunk[i..bytes_to]) {
                return Some(i + at);
            }
            i = bytes_to;
        }
        None
    }

    /// Follows `bytes` one at a time; the length up to the value's end when it ends there.
    fn bytes(&mut self, bytes: &[u8]) -> Option<usize> {
        for (k, &b) in bytes.iter().enumerate() {
            if self.escaped {
                self.escaped = false;
            } else if self.in_string {
                match b {
                    b'\\' => self.escaped = true,
                    b'"' => {
                        self.in_string = false;
                        if self.depth == 0 {
                            return Some(k + 1);
                        }
                    }
                    _ => {}
                }
            } else if b == b'"' {
                self.in_string = true;
            } else if b == self.open {
                self.depth += 1;
            } else if b == self.close {
                self.depth -= 1;
                if self.depth == 0 {
                    return Some(k + 1);
                }
            }
        }
        None
    }

    /// Follows a block inside a container from bit masks of its quotes and brackets:
    /// the quotes' running parity says which bytes are inside strings, so only the
    /// brackets outside them are visited. Escapes are rare in traces; a block with a
    /// backslash is left to [`Scan::bytes`].
    fn block(&mut self, block: &[u8; BLOCK]) -> Block {
        let [quotes, backslashes, opens, closes] =
            masks(block, [b'"', b'\\', self.open, self.close]);
        if backslashes != 0 {
            return Block::HasBackslash;
        }
        let carried = if self.in_string { !0 } else { 0 };
        let in_string = prefix_xor(quotes) ^ carried;
        self.in_string = in_string >> 63 == 1;
        let mut brackets = (opens | closes) & !in_string;
        while brackets != 0 {
            let at = brackets.trailing_zeros();
            brackets &= brackets - 1;
            if opens >> at & 1 == 1 {
                self.depth += 1;
            } else {
                self.depth -= 1;
                if self.depth == 0 {
                    return Block::Ends(at as usize + 1);
                }
            }
        }
        Block::Passed
    }
}

/// Bytes looked at together by [`Scan::block`]: one bit each in a `u64`.
const BLOCK: usize = 64;

/// What a block held.
enum Block {
    /// The value ends after this many bytes of it.
    Ends(usize),
    /// The value goes on after it.
    Passed,
    /// Nothing was done: it has a backslash.
    HasBackslash,
}

/// For each of `wanted`, a mask of where it is in `block` (bit k for byte k), from 16-byte
/// vector compares (SSE2 on x86-64, NEON on ARM, plain code elsewhere: `wide` picks).
fn masks(block: &[u8; BLOCK], wanted: [u8; 4]) -> [u64; 4] {
    let mut out = [0u64; 4];
    for (lane, bytes) in block.chunks_exact(16).enumerate() {
        let v = u8x16::new(bytes.try_into().expect("16 bytes"));
        for (mask, byte) in out.iter_mut().zip(wanted) {
            let found = v.cmp_eq(u8x16::splat(byte)).move_mask() as u16;
            *mask |= u64::from(found) << (16 * lane);
        }
    }
    out
}

/// Bit k of the result is the parity of bits 0..=k of `x`.
fn prefix_xor(mut x: u64) -> u64 {
    for shift in [1, 2, 4, 8, 16, 32] {
        x ^= x << shift;
    }
    x
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

    /// Hands out its input in reads of a few dozen bytes, so blocks straddle chunks.
    struct Dribble<'a>(&'a [u8], usize);

    impl Read for Dribble<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            self.1 = self.1 % 61 + 7;
            let n = self.0.len().min(buf.len()).min(self.1);
            buf[..n].copy_from_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            Ok(n)
        }
    }

    #[test]
    fn long_elements_split_the_same_in_blocks_and_byte_by_byte() {
        // Strings full of brackets, quotes and backslashes, of lengths that put them
        // across every position of a 64-byte block.
        let pieces = [
            r"{", r"}", r"[", r"]", r#"\""#, r"\\", r#"\\\""#, ",", " ", "é",
        ];
        let mut state = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = |n: usize| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % n as u64) as usize
        };
        let mut events = Vec::new();
        for k in 0..300 {
            let mut text = String::new();
            for _ in 0..next(40) {
                text.push_str(pieces[next(pieces.len())]);
                text.push_str(&"x".repeat(next(9)));
            }
            let nested = if k % 3 == 0 {
                r#", "args": {"a": [1, {"b": "}"}]}"#
            } else {
                ""
            };
            events.push(format!(r#"{{"name": "{text}", "n": {k}{nested}}}"#));
        }
        let json = format!("[{}]", events.join(",\n  "));
        let expected: Vec<serde_json::Value> = serde_json::from_str(&json).unwrap();
        let whole = split(Splitter::new(json.as_bytes()));
        assert_eq!(split(Splitter::new(Dribble(json.as_bytes(), 0))), whole);
        assert_eq!(whole, events);
        let parsed: Vec<serde_json::Value> = whole
            .iter()
            .map(|e| serde_json::from_str(e).unwrap())
            .collect();
        assert_eq!(parsed, expected);
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
