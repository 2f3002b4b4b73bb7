//! One field of nvidia-smi output as a number: `749MiB`, `575 MiB`, `27W`, `66.92 W`,
//! `36 C`, `98 %`, or a placeholder (`N/A`, `[N/A]`, `[Not Supported]`, `[Unknown Error]`)
//! that means "not measured" and becomes `None`.

use crate::model::gpu::MIB;

/// The number at the start of `field`, its unit ignored; `None` for a placeholder.
pub fn number(field: &str) -> Option<f64> {
    let t = field.trim();
    if t.is_empty() || t.starts_with('[') || t.eq_ignore_ascii_case("n/a") {
        return None;
    }
    let end = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-'))
        .unwrap_or(t.len());
    t[..end].parse::<f64>().ok().filter(|v| v.is_finite())
}

/// Bytes of a memory field. nvidia-smi reports memory in MiB, with the unit written
/// (`749MiB`, `575 MiB`) or left out (`nounits`); KiB and GiB are taken as written.
pub fn bytes(field: &str) -> Option<u64> {
    let value = number(field)?;
    if value < 0.0 {
        return None;
    }
    let unit = field.trim().trim_start_matches(|c: char| {
        c.is_ascii_digit() || c == '.' || c == '-' || c.is_whitespace()
    });
    let scale = match unit.to_ascii_lowercase().as_str() {
        "kib" | "kb" => 1 << 10,
        "gib" | "gb" => 1 << 30,
        "b" => 1,
        _ => MIB,
    };
    Some((value * scale as f64).round() as u64)
}

/// A text field; `None` for a placeholder or nothing.
pub fn text(field: &str) -> Option<String> {
    let t = field.trim();
    (!t.is_empty() && !t.starts_with('[') && !t.eq_ignore_ascii_case("n/a")).then(|| t.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_with_and_without_units() {
        assert_eq!(number("27W"), Some(27.0));
        assert_eq!(number(" 66.92 W"), Some(66.92));
        assert_eq!(number("98 %"), Some(98.0));
        assert_eq!(number("[N/A]"), None);
        assert_eq!(number("[Not Supported]"), None);
        assert_eq!(number("N/A"), None);
        assert_eq!(number(""), None);
    }

    #[test]
    fn memory_is_mib_unless_told_otherwise() {
        assert_eq!(bytes("749MiB"), Some(749 * MIB));
        assert_eq!(bytes("575 MiB"), Some(575 * MIB));
        assert_eq!(bytes("575"), Some(575 * MIB));
        assert_eq!(bytes("2 GiB"), Some(2 << 30));
        assert_eq!(bytes("[N/A]"), None);
        assert_eq!(bytes("-1"), None);
    }

    #[test]
    fn placeholders_are_not_text() {
        assert_eq!(text("[N/A]"), None);
        assert_eq!(text(" python "), Some("python".into()));
    }
}
