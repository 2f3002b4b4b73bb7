//! Fuzz target: `gpuscope::pickle::read` on arbitrary bytes must return, never panic,
//! hang or allocate without bound; on success, the whole tree must be walkable through
//! the public API, and on failure the error must point inside the input.

#![no_main]

use std::collections::HashSet;

use gpuscope::pickle::{self, Pickle, Value};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    match pickle::read(data) {
        Ok(p) => walk(&p),
        Err(e) => {
            assert!(e.offset() <= data.len() as u64, "{e}");
            assert!(!e.to_string().is_empty());
        }
    }
});

/// Visits every value reachable from the root once (lists can contain themselves).
fn walk(p: &Pickle) {
    let mut seen = HashSet::new();
    let mut todo = vec![p.root()];
    while let Some(v) = todo.pop() {
        assert!(!v.type_name().is_empty());
        match v {
            Value::None | Value::Bool(_) => {}
            Value::Int(i) => assert_eq!(p.as_int(v), Some(i)),
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
                let items = p.as_seq(v).expect("a sequence has items");
                if seen.insert((0, id.index())) {
                    todo.extend_from_slice(items);
                }
            }
            Value::Dict(id) => {
                let entries = p.as_dict(v).expect("a dict has entries");
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
