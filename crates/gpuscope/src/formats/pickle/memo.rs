//! The pickle memo: values stored under integer keys by PUT/BINPUT/LONG_BINPUT/MEMOIZE
//! and fetched by GET/BINGET/LONG_BINGET. Values are `Copy` ids, so a fetched container
//! is the same arena slot as the stored one.
//!
//! Python writers number memo entries 0, 1, 2, … in order, so the memo is a vector; a key
//! that does not continue that run goes to a hash map, so that no key, however large, makes
//! the reader allocate more than one entry.
//!
//! Values are kept whole (16 bytes), not packed into 8: two in three opcodes of a snapshot
//! are memo fetches, and unpacking branched on the kind of each. The 8 more bytes per
//! entry cost the 1M-entry synthetic snapshot of `bench_snapshot.py` 14 MB of peak RSS
//! (bench/README).

use rustc_hash::FxHashMap;

use super::value::Value;

#[derive(Debug, Default)]
pub(crate) struct Memo {
    /// Keys 0..dense.len(), all defined.
    dense: Vec<Value>,
    /// Every other key (none of them below `dense.len()`).
    sparse: FxHashMap<u64, Value>,
    /// How many times a key was given a new value (Python writers never do it).
    epoch: u64,
}

impl Memo {
    pub(crate) fn put(&mut self, key: u64, value: Value) {
        let next = self.dense.len() as u64;
        if key < next {
            if let Some(slot) = usize::try_from(key)
                .ok()
                .and_then(|k| self.dense.get_mut(k))
            {
                *slot = value;
                self.epoch += 1;
            }
        } else if key == next && !self.sparse.contains_key(&key) {
            self.dense.push(value);
        } else if self.sparse.insert(key, value).is_some() {
            self.epoch += 1;
        }
    }

    /// Changes whenever a key defined before is given a new value.
    pub(crate) fn epoch(&self) -> u64 {
        self.epoch
    }

    #[inline]
    pub(crate) fn get(&self, key: u64) -> Option<Value> {
        usize::try_from(key)
            .ok()
            .and_then(|k| self.dense.get(k))
            .or_else(|| self.sparse.get(&key))
            .copied()
    }

    /// The number of keys defined: the key MEMOIZE stores under (`len(memo)` in Python).
    pub(crate) fn len(&self) -> u64 {
        (self.dense.len() + self.sparse.len()) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::formats::pickle::value::{BytesId, DictId, SeqId, StrId};

    #[test]
    fn dense_and_sparse_keys_both_resolve() {
        let mut memo = Memo::default();
        memo.put(0, Value::Int(0));
        memo.put(1, Value::Int(1));
        memo.put(3, Value::Int(3));
        memo.put(u64::MAX, Value::Int(-1));
        assert_eq!(memo.len(), 4);
        // MEMOIZE stores under len(memo) = 4, which is sparse here.
        memo.put(memo.len(), Value::Int(4));
        memo.put(2, Value::Int(2));
        memo.put(0, Value::None);
        for (key, want) in [
            (0, Some(Value::None)),
            (1, Some(Value::Int(1))),
            (2, Some(Value::Int(2))),
            (3, Some(Value::Int(3))),
            (4, Some(Value::Int(4))),
            (5, None),
            (u64::MAX, Some(Value::Int(-1))),
        ] {
            assert_eq!(memo.get(key), want, "key {key}");
        }
        assert_eq!(memo.len(), 6);
    }

    #[test]
    fn every_kind_of_value_comes_back() {
        let mut memo = Memo::default();
        let values = [
            Value::None,
            Value::Bool(false),
            Value::Bool(true),
            Value::Int(i64::MIN),
            Value::Float(-0.5),
            Value::Str(StrId(u32::MAX)),
            Value::Bytes(BytesId(1)),
            Value::List(SeqId(2)),
            Value::Tuple(SeqId(3)),
            Value::Dict(DictId(u32::MAX)),
            Value::Folded(7),
        ];
        for (key, &value) in values.iter().enumerate() {
            memo.put(key as u64, value);
        }
        for (key, &value) in values.iter().enumerate() {
            assert_eq!(memo.get(key as u64), Some(value));
        }
    }
}
