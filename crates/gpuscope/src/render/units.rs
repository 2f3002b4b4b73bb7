//! How a figure of bytes is written, in one place. Two conventions, on purpose:
//!
//! - [`bytes`] and [`signed_bytes`]: binary units chosen by size, three significant
//!   figures (`1.50 KiB`, `51.1 GiB`), as uv's `human_readable_bytes`; the snapshot, nsys
//!   and OOM figures, read alone.
//! - A fixed unit ([`ByteUnit`]) where the figures are read beside another tool's or a
//!   file's: `gpuscope report` writes MB of 2^20 bytes as the text logs and the TensorBoard
//!   tags do ([`in_unit`], [`figure`]); nsys stats' sizes and the trace's copies are MB of
//!   10^6 bytes as nsys and the profiler write them; `gpuscope monitor` writes GB of 2^30
//!   bytes, and [`compact_bytes`] in its `--watch` table.
//!
//! The conversions themselves are [`ByteUnit`]'s, in the model, because readers and
//! writers of those files need them too.

pub(crate) use crate::model::units::{human_bytes as bytes, ByteUnit};

/// Signed bytes in binary units: `+1.50 GiB`, `-20.0 MiB`.
pub(crate) fn signed_bytes(n: i64) -> String {
    let sign = if n < 0 { '-' } else { '+' };
    format!("{sign}{}", bytes(n.unsigned_abs()))
}

/// `bytes` in `unit` with `decimals` places, without the unit's name, for a column whose
/// header names it: `12.3`.
pub(crate) fn figure(bytes: f64, unit: ByteUnit, decimals: usize) -> String {
    format!("{:.*}", decimals, unit.of_f64(bytes))
}

/// `bytes` in `unit`, one decimal, and the unit's name as the outputs that keep it write
/// it: `12.3 MB` (2^20 bytes, as the text logs), `15.6 GB` (2^30 bytes, `gpuscope
/// monitor`).
pub(crate) fn in_unit(bytes: u64, unit: ByteUnit) -> String {
    let name = match unit {
        ByteUnit::Mib | ByteUnit::DecimalMb => "MB",
        ByteUnit::Gib => "GB",
    };
    format!("{} {name}", figure(bytes as f64, unit, 1))
}

/// Bytes in at most five characters, for `gpuscope monitor --watch`'s table: `10.5G`
/// from 1 GiB up, whole MiB below (`389M`).
pub(crate) fn compact_bytes(n: u64) -> String {
    if n >= 1 << 30 {
        format!("{:.1}G", ByteUnit::Gib.of(n))
    } else {
        format!("{}M", ByteUnit::Mib.of(n).round())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_read_in_binary_units() {
        assert_eq!(bytes(0), "0 B");
        assert_eq!(bytes(1023), "1023 B");
        assert_eq!(bytes(1536), "1.50 KiB");
        assert_eq!(bytes(20 << 20), "20.0 MiB");
        assert_eq!(bytes(61_111_009_280), "56.9 GiB");
        assert_eq!(bytes(300 << 30), "300 GiB");
        assert_eq!(bytes(u64::MAX), "16384 PiB");
        assert_eq!(signed_bytes(-(20 << 20)), "-20.0 MiB");
        assert_eq!(signed_bytes(0), "+0 B");
    }

    #[test]
    fn fixed_units_keep_their_convention() {
        assert_eq!(in_unit(1536 << 10, ByteUnit::Mib), "1.5 MB");
        assert_eq!(in_unit(15974 << 20, ByteUnit::Gib), "15.6 GB");
        assert_eq!(in_unit(2_500_000, ByteUnit::DecimalMb), "2.5 MB");
        assert_eq!(figure(2_500_000.0, ByteUnit::DecimalMb, 3), "2.500");
        assert_eq!(figure(-(3 << 20) as f64, ByteUnit::Mib, 1), "-3.0");
    }

    #[test]
    fn compact_bytes_fit_five_characters() {
        assert_eq!(compact_bytes(389 << 20), "389M");
        assert_eq!(compact_bytes((105 << 30) / 10), "10.5G");
        assert_eq!(compact_bytes(1023 << 20), "1023M");
        assert_eq!(compact_bytes(0), "0M");
    }
}
