//! Integers of any width, as pickle writes them (LONG1 and LONG4: little-endian two's
//! complement bytes; INT and LONG: decimal text), as a [`Value`]: `Int` when the value fits
//! `i64`, `UInt` when it fits `u64` (torch writes `size_t(-1)`, 2^64 − 1, for the line of
//! a C++ frame it could not place), else `BigInt`, the nearest float. A Python `int` has no
//! width, so none is refused for being wide: what a reader does with a value it cannot use
//! (a size of 2^70 bytes) is the reader's to say.

use super::text::{self, IntText};
use super::value::Value;

/// The integer of LONG1 / LONG4's argument bytes.
pub(crate) fn from_le_bytes(bytes: &[u8]) -> Value {
    let negative = bytes.last().is_some_and(|&b| b & 0x80 != 0);
    let extension = if negative { 0xff } else { 0x00 };
    // Drop the bytes that only extend the sign.
    let mut len = bytes.len();
    while len > 1 && bytes[len - 1] == extension && (bytes[len - 2] & 0x80 != 0) == negative {
        len -= 1;
    }
    let bytes = &bytes[..len];
    if len <= 8 {
        let mut buf = [extension; 8];
        buf[..len].copy_from_slice(bytes);
        return Value::Int(i64::from_le_bytes(buf));
    }
    if !negative && len == 9 && bytes[8] == 0 {
        // The ninth byte only keeps the sign bit of the eighth clear.
        let mut buf = [0; 8];
        buf.copy_from_slice(&bytes[..8]);
        return Value::UInt(u64::from_le_bytes(buf));
    }
    let magnitude = if negative {
        negated(bytes)
    } else {
        bytes.to_vec()
    };
    let f = nearest_float(&magnitude);
    Value::BigInt(if negative { -f } else { f })
}

/// The integer of INT / LONG's decimal text; `None` when the text is no integer.
pub(crate) fn from_decimal(text: &[u8]) -> Option<Value> {
    match text::parse_int(text) {
        Ok(i) => Some(Value::Int(i)),
        Err(IntText::Bad) => None,
        Err(IntText::TooWide) => {
            // Valid digits (parse_int checked them), outside i64.
            let text = std::str::from_utf8(text.trim_ascii()).ok()?;
            let unsigned = text.strip_prefix('+').unwrap_or(text);
            Some(match unsigned.parse::<u64>() {
                Ok(u) => Value::UInt(u),
                // Rust's parse rounds decimal text to the nearest float, as Python's
                // float(int) does.
                Err(_) => Value::BigInt(text.parse().ok()?),
            })
        }
    }
}

/// The two's complement negation of little-endian bytes (the magnitude of a negative
/// number).
fn negated(bytes: &[u8]) -> Vec<u8> {
    let mut out: Vec<u8> = bytes.iter().map(|b| !b).collect();
    for b in &mut out {
        let (sum, carry) = b.overflowing_add(1);
        *b = sum;
        if !carry {
            break;
        }
    }
    out
}

/// The float nearest to an unsigned little-endian integer, rounded half to even as
/// Python's `float(int)` rounds: the top 64 bits, with a sticky bit for any set bit
/// below them, converted (64 bits hold the 53 kept, the rounding bit and more), then
/// scaled by the power of two they were shifted by (infinite past `f64::MAX`).
fn nearest_float(magnitude: &[u8]) -> f64 {
    let bit = |i: usize| magnitude[i / 8] >> (i % 8) & 1 == 1;
    let Some(top_byte) = magnitude.iter().rposition(|&b| b != 0) else {
        return 0.0;
    };
    let bits = top_byte * 8 + (8 - magnitude[top_byte].leading_zeros() as usize);
    let shift = bits.saturating_sub(64);
    let mut top = (shift..bits)
        .rev()
        .fold(0u64, |acc, i| acc << 1 | u64::from(bit(i)));
    if (0..shift).any(bit) {
        top |= 1;
    }
    let scale = i32::try_from(shift).unwrap_or(i32::MAX);
    // Scaling in two halves keeps each power of two finite while the product overflows.
    top as f64 * 2f64.powi(scale / 2) * 2f64.powi(scale - scale / 2)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn le(value: i128, len: usize) -> Vec<u8> {
        value.to_le_bytes()[..len].to_vec()
    }

    #[test]
    fn each_width_gives_the_narrowest_kind_that_holds_it() {
        assert_eq!(from_le_bytes(&[]), Value::Int(0));
        assert_eq!(from_le_bytes(&le(-1, 1)), Value::Int(-1));
        assert_eq!(from_le_bytes(&le(i64::MAX.into(), 8)), Value::Int(i64::MAX));
        assert_eq!(from_le_bytes(&le(i64::MIN.into(), 8)), Value::Int(i64::MIN));
        // Sign extension past the eighth byte is no width.
        assert_eq!(from_le_bytes(&le(-5, 12)), Value::Int(-5));
        assert_eq!(from_le_bytes(&le(5, 12)), Value::Int(5));
        // 2^64 − 1 as Python writes it: eight 0xff and a 0x00.
        assert_eq!(
            from_le_bytes(&le(u64::MAX.into(), 9)),
            Value::UInt(u64::MAX)
        );
        assert_eq!(from_le_bytes(&le(1 << 63, 9)), Value::UInt(1 << 63));
        assert_eq!(from_le_bytes(&le(1 << 64, 9)), Value::BigInt(2f64.powi(64)));
        assert_eq!(
            from_le_bytes(&le(i128::from(i64::MIN) - 1, 9)),
            Value::BigInt(-(2f64.powi(63)))
        );
        assert_eq!(
            from_le_bytes(&le(-(1 << 100), 13)),
            Value::BigInt(-(2f64.powi(100)))
        );
    }

    #[test]
    fn wide_integers_round_to_the_nearest_float_half_to_even() {
        let float = |v: i128| match from_le_bytes(&le(v, 16)) {
            Value::BigInt(f) => f,
            other => panic!("{other:?}"),
        };
        let p = 1i128 << 80;
        // 2^80 + 2^27 is half-way between two floats (their spacing is 2^28): to even.
        assert_eq!(float(p + (1 << 27)), p as f64);
        // A bit below the half-way point does not round up...
        assert_eq!(float(p + (1 << 27) - 1), p as f64);
        // ...a bit above it, far below the top 64 bits, does (the sticky bit).
        assert_eq!(float(p + (1 << 27) + 1), (p + (1 << 28)) as f64);
        assert_eq!(float(-(p + (1 << 27) + 1)), -((p + (1 << 28)) as f64));
        let mut huge = vec![0xff; 200];
        huge.push(0);
        assert_eq!(from_le_bytes(&huge), Value::BigInt(f64::INFINITY));
    }

    #[test]
    fn decimal_text_of_any_width() {
        assert_eq!(from_decimal(b"-17"), Some(Value::Int(-17)));
        assert_eq!(
            from_decimal(b"18446744073709551615"),
            Some(Value::UInt(u64::MAX))
        );
        assert_eq!(
            from_decimal(b"+9223372036854775808"),
            Some(Value::UInt(1 << 63))
        );
        assert_eq!(
            from_decimal(b"-9223372036854775809"),
            Some(Value::BigInt(-9223372036854775809.0))
        );
        assert_eq!(
            from_decimal(b"1267650600228229401496703205376"),
            Some(Value::BigInt(2f64.powi(100)))
        );
        assert_eq!(from_decimal(b"12x"), None);
    }
}
