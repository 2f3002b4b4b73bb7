//! The fixed units of bytes that gpuscope's files and outputs keep, as conversions only:
//! `tensor_profile_<ts>.log` and the TensorBoard tags write memory in MB of 2^20 bytes,
//! nsys stats in MB of 10^6 bytes, `gpuscope monitor` in GB of 2^30 bytes. Readers,
//! writers and the sentences of the analyses convert through [`ByteUnit`]; how a figure
//! is written (decimals, sign, the unit's name) is `render::units`'s job.

/// A fixed unit of bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ByteUnit {
    /// 2^20 bytes: the text logs' and the TensorBoard tags' "MB".
    Mib,
    /// 2^30 bytes.
    Gib,
    /// 10^6 bytes: nsys stats' "MB", and the trace's copy sizes.
    DecimalMb,
}

impl ByteUnit {
    /// Bytes in one of this unit.
    pub const fn bytes(self) -> f64 {
        match self {
            ByteUnit::Mib => (1u64 << 20) as f64,
            ByteUnit::Gib => (1u64 << 30) as f64,
            ByteUnit::DecimalMb => 1e6,
        }
    }

    /// `bytes` in this unit.
    pub fn of(self, bytes: u64) -> f64 {
        self.of_f64(bytes as f64)
    }

    /// A byte figure that may be negative or fractional (a slope, a change) in this unit.
    pub fn of_f64(self, bytes: f64) -> f64 {
        bytes / self.bytes()
    }

    /// `figure` of this unit in bytes, rounded; negative and non-finite figures become 0.
    pub fn to_bytes(self, figure: f64) -> u64 {
        if figure.is_finite() && figure > 0.0 {
            (figure * self.bytes()).round() as u64
        } else {
            0
        }
    }
}

/// Bytes in binary units, for sentences and figures read alone (`render::units` says
/// where each convention is used): three significant figures, `512 B`, `1.50 KiB`, `51.1 GiB`.
pub fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut value = n as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    match unit {
        0 => format!("{n} B"),
        _ if value >= 100.0 => format!("{value:.0} {}", UNITS[unit]),
        _ if value >= 10.0 => format!("{value:.1} {}", UNITS[unit]),
        _ => format!("{value:.2} {}", UNITS[unit]),
    }
}

/// A count and its noun, the noun in the plural unless there is one:
/// `1 launch`, `3 launches`, `2 ranks`.
pub fn counted(n: usize, noun: &str) -> String {
    let consonant_y = noun
        .strip_suffix('y')
        .filter(|stem| !stem.ends_with(['a', 'e', 'i', 'o', 'u']));
    if n == 1 {
        format!("1 {noun}")
    } else if let Some(stem) = consonant_y {
        format!("{n} {stem}ies")
    } else if ["s", "sh", "ch", "x"].iter().any(|end| noun.ends_with(end)) {
        format!("{n} {noun}es")
    } else {
        format!("{n} {noun}s")
    }
}

#[cfg(test)]
mod tests {
    use super::{counted, ByteUnit};

    #[test]
    fn a_count_of_one_keeps_its_noun_singular() {
        assert_eq!(counted(1, "CUDA graph launch"), "1 CUDA graph launch");
        assert_eq!(counted(2, "launch"), "2 launches");
        assert_eq!(counted(0, "rank"), "0 ranks");
        assert_eq!(counted(3, "call site"), "3 call sites");
        assert_eq!(counted(60, "copy"), "60 copies");
        assert_eq!(counted(2, "key"), "2 keys");
    }

    #[test]
    fn units_convert_both_ways() {
        assert_eq!(ByteUnit::Mib.of(3 << 20), 3.0);
        assert_eq!(ByteUnit::Gib.of_f64(-((1u64 << 29) as f64)), -0.5);
        assert_eq!(ByteUnit::DecimalMb.of(2_500_000), 2.5);
        assert_eq!(ByteUnit::Mib.to_bytes(1.5), 3 << 19);
        assert_eq!(ByteUnit::Mib.to_bytes(-1.0), 0);
        assert_eq!(ByteUnit::Mib.to_bytes(f64::NAN), 0);
    }
}
