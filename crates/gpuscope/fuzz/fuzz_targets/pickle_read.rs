//! Fuzz target: `gpuscope::formats::pickle::read` on arbitrary bytes must return, never panic,
//! hang or allocate without bound; on success, the whole tree must be walkable through
//! the public API, and on failure the error must point inside the input. The same for
//! `read_folding` with a fold that takes over every third container it is offered. Both
//! readings must also give exactly what reading the same bytes one byte per read gives,
//! where the reader's fast paths (which need bytes buffered ahead) never apply. A third
//! reading has a fold stop before the outermost dict's key "b" (the way `--no-trace` stops
//! before `device_traces`), reading past the rest unbuilt, under the same rules.

#![no_main]

use std::collections::HashSet;

use gpuscope::formats::pickle::{self, Fold, Pickle, StrId, Value};
use libfuzzer_sys::fuzz_target;

#[path = "../../tests/common/one_byte.rs"]
mod one_byte;
use one_byte::OneByte;

fuzz_target!(|data: &[u8]| {
    let plain = pickle::read(data);
    check(data, &plain, false);
    same_reading(&plain, &pickle::read(OneByte(data)));
    let folded = pickle::read_folding(data, &mut EveryThird(0));
    check(data, &folded, true);
    same_reading(
        &folded,
        &pickle::read_folding(OneByte(data), &mut EveryThird(0)),
    );
    let stopped = pickle::read_folding(data, &mut StopBeforeB);
    check(data, &stopped, false);
    same_reading(&stopped, &pickle::read_folding(OneByte(data), &mut StopBeforeB));
});

/// Takes nothing over; stops before the outermost dict's key "b".
struct StopBeforeB;

impl Fold for StopBeforeB {
    const STOPS: bool = true;

    fn fold(&mut self, _: &Pickle, _: Option<Value>, _: Value) -> Option<u32> {
        None
    }

    fn stop_before(&mut self, p: &Pickle, key: StrId) -> bool {
        p.str_by_id(key) == "b"
    }
}

fn check(data: &[u8], read: &Result<Pickle, pickle::PickleError>, folding: bool) {
    match read {
        Ok(p) => walk(p, folding),
        Err(e) => {
            assert!(e.offset() <= data.len() as u64, "{e}");
            assert!(!e.to_string().is_empty());
        }
    }
}

/// The same arenas, or the same error.
fn same_reading(
    fast: &Result<Pickle, pickle::PickleError>,
    slow: &Result<Pickle, pickle::PickleError>,
) {
    assert_eq!(format!("{fast:?}"), format!("{slow:?}"));
}

/// Takes over every third container, reading it whole first.
struct EveryThird(u32);

impl Fold for EveryThird {
    fn fold(&mut self, p: &Pickle, _: Option<Value>, value: Value) -> Option<u32> {
        let readable = p
            .as_seq(value)
            .map(<[Value]>::len)
            .or(p.as_dict(value).map(<[_]>::len));
        assert!(
            readable.is_some(),
            "offered {value:?}, which is not readable"
        );
        self.0 += 1;
        (self.0 % 3 == 0).then_some(self.0)
    }
}

/// Visits every value reachable from the root once (lists can contain themselves).
fn walk(p: &Pickle, folding: bool) {
    let mut seen = HashSet::new();
    let mut todo = vec![p.root()];
    while let Some(v) = todo.pop() {
        assert!(!v.type_name().is_empty());
        match v {
            Value::None | Value::Bool(_) => {}
            Value::Int(i) => assert_eq!(p.as_int(v), Some(i)),
            Value::UInt(u) => {
                assert!(u > i64::MAX as u64, "an int that fits i64 is Int");
                assert_eq!(p.as_u64(v), Some(u));
            }
            Value::BigInt(f) => {
                assert!(f.abs() >= 2f64.powi(63), "an int that fits 64 bits is exact");
                assert_eq!(p.as_f64(v).map(f64::to_bits), Some(f.to_bits()));
            }
            Value::Float(_) => assert!(p.as_f64(v).is_some()),
            Value::Str(id) => {
                let text = p.as_str(v).expect("a str has text");
                assert_eq!(p.str_id(v), Some(id));
                assert_eq!(p.str_by_id(id), text);
                assert_eq!(p.find_str(text), Some(id), "strings are interned");
                assert!(id.index() < p.str_count());
            }
            Value::Bytes(_) => assert!(p.as_bytes(v).is_some()),
            Value::List(id) | Value::Tuple(id) => {
                // One stored before it was folded elsewhere is no longer readable.
                let Some(items) = p.as_seq(v) else {
                    assert!(folding, "a sequence has items");
                    continue;
                };
                if seen.insert((0, id.index())) {
                    todo.extend_from_slice(items);
                }
            }
            Value::Folded(_) => assert!(folding, "read never folds"),
            Value::Dict(id) => {
                let Some(entries) = p.as_dict(v) else {
                    assert!(folding, "a dict has entries");
                    continue;
                };
                if seen.insert((1, id.index())) {
                    for &(key, value) in entries {
                        if let Some(text) = p.as_str(key) {
                            // Keys are unique, so `get` finds this entry's value.
                            let found = p.get(v, text).expect("a key of the dict");
                            assert!(same(found, value), "{text:?}: {found:?} vs {value:?}");
                        }
                        todo.push(key);
                        todo.push(value);
                    }
                }
            }
        }
    }
}

/// Equality that holds for a NaN and itself (`Value`'s `==` follows `f64`'s).
fn same(a: Value, b: Value) -> bool {
    match (a, b) {
        (Value::Float(x), Value::Float(y)) => x.to_bits() == y.to_bits(),
        _ => a == b,
    }
}
