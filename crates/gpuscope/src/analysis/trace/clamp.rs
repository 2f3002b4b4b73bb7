//! Figures that cannot be below zero, kept at zero: HTA's rounding (start up, end down)
//! gives work shorter than 1 µs a negative duration, and a sum of no `f64` at all is
//! −0.0 (Rust's `Sum` starts there), which prints as "-0.0".

/// `x`, or +0.0 where `x` is negative, −0.0 or NaN.
pub fn non_negative(x: f64) -> f64 {
    if x > 0.0 {
        x
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::non_negative;

    #[test]
    fn negatives_and_negative_zero_become_zero() {
        assert_eq!(non_negative(2.5), 2.5);
        for x in [-3.0, -0.0, f64::NAN, Vec::<f64>::new().into_iter().sum()] {
            let y = non_negative(x);
            assert!(y == 0.0 && y.is_sign_positive(), "{x} gave {y}");
            assert_eq!(format!("{y:.1}"), "0.0");
        }
    }
}
