//! Serde helpers for figures that may be NaN or infinite. JSON has neither, so they are
//! written as the strings `"NaN"`, `"Infinity"` and `"-Infinity"` (which Python's
//! `float()` reads): a diverged loss or gradient norm stays visible instead of becoming
//! `null`, which in these files means "not measured".

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A number as written: finite, or spelled out.
#[derive(Deserialize)]
#[serde(untagged)]
enum Spelled {
    Number(f64),
    Word(String),
}

fn spell(value: f64) -> Result<f64, &'static str> {
    match value {
        v if v.is_finite() => Ok(v),
        v if v.is_nan() => Err("NaN"),
        v if v > 0.0 => Err("Infinity"),
        _ => Err("-Infinity"),
    }
}

#[derive(Serialize)]
#[serde(untagged)]
enum Out {
    Number(f64),
    Word(&'static str),
}

fn out(value: f64) -> Out {
    spell(value).map_or_else(Out::Word, Out::Number)
}

fn read(value: Option<Spelled>) -> Result<f64, String> {
    Ok(match value {
        Some(Spelled::Number(v)) => v,
        None => f64::NAN, // older writers put null for a non-finite loss
        Some(Spelled::Word(w)) => match w.as_str() {
            "NaN" => f64::NAN,
            "Infinity" => f64::INFINITY,
            "-Infinity" => f64::NEG_INFINITY,
            other => return Err(format!("{other:?} is not a number")),
        },
    })
}

/// A map of names to numbers (loss components).
pub mod map {
    use std::collections::BTreeMap;

    use serde::ser::SerializeMap;

    use super::*;

    /// Writes each value, spelled when not finite.
    pub fn serialize<S: Serializer>(map: &BTreeMap<String, f64>, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(map.len()))?;
        for (name, &value) in map {
            m.serialize_entry(name, &out(value))?;
        }
        m.end()
    }

    /// Reads numbers, spelled words and (from older writers) `null` as NaN.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<BTreeMap<String, f64>, D::Error> {
        BTreeMap::<String, Option<Spelled>>::deserialize(d)?
            .into_iter()
            .map(|(name, value)| {
                read(value)
                    .map(|v| (name.clone(), v))
                    .map_err(|e| D::Error::custom(format!("{name}: {e}")))
            })
            .collect()
    }
}

/// An optional number, where `null` means "not measured" and non-finite values are
/// spelled.
pub mod option {
    use super::*;

    /// Writes `null`, a number, or its spelling.
    pub fn serialize<S: Serializer>(value: &Option<f64>, s: S) -> Result<S::Ok, S::Error> {
        value.map(out).serialize(s)
    }

    /// Reads `null` as `None`, a number or a spelling as `Some`.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
        match Option::<Spelled>::deserialize(d)? {
            None => Ok(None),
            some => read(some).map(Some).map_err(D::Error::custom),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde::{Deserialize, Serialize};

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Both {
        #[serde(with = "super::map")]
        map: BTreeMap<String, f64>,
        #[serde(with = "super::option")]
        one: Option<f64>,
    }

    #[test]
    fn non_finite_values_survive_a_round_trip() {
        let value = Both {
            map: [("a".to_owned(), f64::INFINITY), ("b".to_owned(), 1.5)].into(),
            one: Some(f64::NEG_INFINITY),
        };
        let json = serde_json::to_string(&value).unwrap();
        assert_eq!(
            json,
            r#"{"map":{"a":"Infinity","b":1.5},"one":"-Infinity"}"#
        );
        assert_eq!(serde_json::from_str::<Both>(&json).unwrap(), value);
        let nan: Both = serde_json::from_str(r#"{"map":{"a":null},"one":"NaN"}"#).unwrap();
        assert!(nan.map["a"].is_nan() && nan.one.unwrap().is_nan());
        let none: Both = serde_json::from_str(r#"{"map":{},"one":null}"#).unwrap();
        assert_eq!(none.one, None);
        assert!(serde_json::from_str::<Both>(r#"{"map":{"a":"lots"},"one":null}"#).is_err());
    }
}
