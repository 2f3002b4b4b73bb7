//! TFRecord framing, the container of TensorBoard event files: each record is
//! `u64 length (LE) | u32 masked CRC32C of the length | data | u32 masked CRC32C of the data`.
//!
//! This module owns only the framing: it knows nothing of what the records contain.

use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use crate::{Error, Result};

const MASK_DELTA: u32 = 0xa282_ead8;
/// Bytes of framing before a record's data: length plus its checksum.
const HEADER_LEN: usize = 12;

/// The masked CRC32C that TFRecord stores, so that a CRC of data containing CRCs stays
/// well distributed.
pub fn masked_crc32c(data: &[u8]) -> u32 {
    let crc = crc32c::crc32c(data);
    crc.rotate_right(15).wrapping_add(MASK_DELTA)
}

/// Appends one framed record holding `data` to `out`.
pub fn write_record(out: &mut impl Write, data: &[u8]) -> io::Result<()> {
    let len = (data.len() as u64).to_le_bytes();
    out.write_all(&len)?;
    out.write_all(&masked_crc32c(&len).to_le_bytes())?;
    out.write_all(data)?;
    out.write_all(&masked_crc32c(data).to_le_bytes())
}

/// A record cut short at the end of a file: a writer was killed or is still writing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TruncatedTail {
    /// Byte offset where the incomplete record starts.
    pub offset: u64,
    /// Bytes present after that offset.
    pub bytes_present: u64,
}

/// Reads framed records one at a time, reusing one buffer: memory does not grow with the
/// file. A truncated last record ends the stream and is kept in [`Self::truncated`]; a
/// checksum mismatch is an error naming the byte offset.
pub struct RecordReader<R> {
    inner: R,
    path: PathBuf,
    offset: u64,
    buf: Vec<u8>,
    truncated: Option<TruncatedTail>,
}

impl<R: Read> RecordReader<R> {
    /// Wraps `inner`; `path` is only used in error messages.
    pub fn new(inner: R, path: impl Into<PathBuf>) -> Self {
        RecordReader {
            inner,
            path: path.into(),
            offset: 0,
            buf: Vec::new(),
            truncated: None,
        }
    }

    /// The file this reader reads, as given.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Byte offset of the next record.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Set once the stream ended inside a record.
    pub fn truncated(&self) -> Option<&TruncatedTail> {
        self.truncated.as_ref()
    }

    /// The next record's data, `None` at the end of the stream (clean or truncated).
    pub fn next_record(&mut self) -> Result<Option<&[u8]>> {
        if self.truncated.is_some() {
            return Ok(None);
        }
        let start = self.offset;
        let mut header = [0u8; HEADER_LEN];
        let got = self.read_up_to(&mut header)?;
        if got == 0 {
            return Ok(None);
        }
        if got < HEADER_LEN {
            return Ok(self.truncate(start, got as u64));
        }
        let (len_bytes, crc_bytes) = header.split_at(8);
        let stored = u32::from_le_bytes(crc_bytes.try_into().expect("4 bytes"));
        if masked_crc32c(len_bytes) != stored {
            return Err(self.corrupt(start, "length checksum mismatch"));
        }
        let len = u64::from_le_bytes(len_bytes.try_into().expect("8 bytes"));
        // Read through `take` so a huge (but checksummed) length cannot make us allocate
        // more than the file actually holds.
        self.buf.clear();
        let body = (&mut self.inner)
            .take(len.saturating_add(4))
            .read_to_end(&mut self.buf)
            .map_err(|e| Error::io(&self.path, e))? as u64;
        if body < len + 4 {
            return Ok(self.truncate(start, HEADER_LEN as u64 + body));
        }
        let (data, crc) = self.buf.split_at(len as usize);
        let stored = u32::from_le_bytes(crc.try_into().expect("4 bytes"));
        if masked_crc32c(data) != stored {
            return Err(self.corrupt(start, "data checksum mismatch"));
        }
        self.offset = start + HEADER_LEN as u64 + len + 4;
        Ok(Some(&self.buf[..len as usize]))
    }

    fn truncate<T>(&mut self, offset: u64, bytes_present: u64) -> Option<T> {
        self.truncated = Some(TruncatedTail {
            offset,
            bytes_present,
        });
        None
    }

    fn corrupt(&self, offset: u64, what: &str) -> Error {
        let what = if offset == 0 {
            format!("not a TensorBoard event file ({what} in the first record)")
        } else {
            format!(
                "corrupt record at byte offset {offset} ({what}); the records before it are intact"
            )
        };
        Error::bad_input(&self.path, what)
    }

    /// Fills `buf` as far as the stream allows; returns how many bytes were read.
    fn read_up_to(&mut self, buf: &mut [u8]) -> Result<usize> {
        let mut filled = 0;
        while filled < buf.len() {
            match self.inner.read(&mut buf[filled..]) {
                Ok(0) => break,
                Ok(n) => filled += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(Error::io(&self.path, e)),
            }
        }
        Ok(filled)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32c_matches_published_vectors() {
        // RFC 3720 (iSCSI) appendix B.4 test vectors for CRC32C.
        assert_eq!(crc32c::crc32c(&[0u8; 32]), 0x8a91_36aa);
        assert_eq!(crc32c::crc32c(&[0xffu8; 32]), 0x62a8_ab43);
        let ascending: Vec<u8> = (0..32).collect();
        assert_eq!(crc32c::crc32c(&ascending), 0x46dd_794e);
    }

    #[test]
    fn masking_matches_tensorflow() {
        // Masking as tensorflow/core/lib/hash/crc32c.h defines it, on the standard check
        // value crc32c("123456789") = 0xe3069283. Real files are checked in tests/.
        let crc: u32 = 0xe306_9283;
        assert_eq!(crc32c::crc32c(b"123456789"), crc);
        // ((crc >> 15) | (crc << 17)) + 0xa282ead8 mod 2^32, worked out by hand.
        assert_eq!(masked_crc32c(b"123456789"), 0xc78ab0e5);
    }

    #[test]
    fn round_trip_and_truncation() {
        let mut file = Vec::new();
        write_record(&mut file, b"first").unwrap();
        write_record(&mut file, b"second record").unwrap();
        let whole = file.len();
        for cut in 0..whole {
            let mut reader = RecordReader::new(&file[..cut], "mem");
            let mut n = 0;
            while reader.next_record().unwrap().is_some() {
                n += 1;
            }
            let first_len = 12 + 5 + 4;
            let expected = usize::from(cut >= first_len);
            assert_eq!(n, expected, "cut at {cut}");
            assert_eq!(reader.truncated().is_some(), cut != 0 && cut != first_len);
        }
        let mut reader = RecordReader::new(&file[..], "mem");
        assert_eq!(reader.next_record().unwrap(), Some(&b"first"[..]));
        assert_eq!(reader.next_record().unwrap(), Some(&b"second record"[..]));
        assert_eq!(reader.next_record().unwrap(), None);
        assert!(reader.truncated().is_none());
    }

    #[test]
    fn flipped_byte_names_the_offset() {
        let mut file = Vec::new();
        write_record(&mut file, b"first").unwrap();
        let second_at = file.len();
        write_record(&mut file, b"second").unwrap();
        file[second_at + 14] ^= 0x01; // inside the second record's data
        let mut reader = RecordReader::new(&file[..], "f");
        assert!(reader.next_record().unwrap().is_some());
        let err = reader.next_record().unwrap_err().to_string();
        assert!(err.contains(&format!("byte offset {second_at}")), "{err}");
        assert!(err.contains("data checksum"), "{err}");

        let mut flipped_len = Vec::new();
        write_record(&mut flipped_len, b"x").unwrap();
        flipped_len[0] ^= 0x40;
        let err = RecordReader::new(&flipped_len[..], "f")
            .next_record()
            .unwrap_err()
            .to_string();
        assert!(err.contains("not a TensorBoard event file"), "{err}");
    }

    #[test]
    fn huge_declared_length_is_a_truncation_not_an_allocation() {
        let len = (u64::MAX / 2).to_le_bytes();
        let mut file = len.to_vec();
        file.extend_from_slice(&masked_crc32c(&len).to_le_bytes());
        file.extend_from_slice(b"tiny");
        let mut reader = RecordReader::new(&file[..], "f");
        assert_eq!(reader.next_record().unwrap(), None);
        assert_eq!(reader.truncated().unwrap().bytes_present, 16);
    }
}
