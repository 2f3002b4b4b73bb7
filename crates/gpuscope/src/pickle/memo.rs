//! The pickle memo: values stored under integer keys by PUT/BINPUT/LONG_BINPUT/MEMOIZE
//! and fetched by GET/BINGET/LONG_BINGET. Values are `Copy` ids, so a fetched container
//! is the same arena slot as the stored one; they are kept packed in 8 bytes.
//!
//! Python writers number memo entries 0, 1, 2, … in order, so the memo is a vector; a key
//! that does not continue that run goes to a hash map, so that no key, however large, makes
//! the reader allocate more than one entry.

use rustc_hash::FxHashMap;

use super::value::{BytesId, DictId, SeqId, StrId, Value};

#[derive(Debug, Default)]
pub(crate) struct Memo {
    /// Keys 0..dense.len(), all defined.
    dense: Vec<Packed>,
    /// Every other key (none of them below `dense.len()`).
    sparse: FxHashMap<u64, Packed>,
    /// The ints and floats stored, which do not fit in a [`Packed`] (writers memoize
    /// containers and strings; these are rare).
    wide: Vec<Value>,
}

/// A memoized value in 8 bytes, half a [`Value`]: a million-record pickle memoizes
/// millions of values. The low 4 bits are the kind, the rest the id, bool, or index into
/// [`Memo::wide`].
#[derive(Clone, Copy, Debug)]
struct Packed(u64);

const NONE: u64 = 0;
const BOOL: u64 = 1;
const STR: u64 = 2;
const BYTES: u64 = 3;
const LIST: u64 = 4;
const TUPLE: u64 = 5;
const DICT: u64 = 6;
const FOLDED: u64 = 7;
const WIDE: u64 = 8;

impl Memo {
    fn pack(&mut self, value: Value) -> Packed {
        let (kind, payload) = match value {
            Value::None => (NONE, 0),
            Value::Bool(b) => (BOOL, u64::from(b)),
            Value::Str(id) => (STR, id.0.into()),
            Value::Bytes(id) => (BYTES, id.0.into()),
            Value::List(id) => (LIST, id.0.into()),
            Value::Tuple(id) => (TUPLE, id.0.into()),
            Value::Dict(id) => (DICT, id.0.into()),
            Value::Folded(token) => (FOLDED, token.into()),
            Value::Int(_) | Value::Float(_) => {
                self.wide.push(value);
                (WIDE, self.wide.len() as u64 - 1)
            }
        };
        Packed(payload << 4 | kind)
    }

    #[inline]
    fn unpack(&self, packed: Packed) -> Option<Value> {
        let payload = packed.0 >> 4;
        // Payloads of ids were u32s when packed.
        let id = payload as u32;
        Some(match packed.0 & 0xf {
            NONE => Value::None,
            BOOL => Value::Bool(payload != 0),
            STR => Value::Str(StrId(id)),
            BYTES => Value::Bytes(BytesId(id)),
            LIST => Value::List(SeqId(id)),
            TUPLE => Value::Tuple(SeqId(id)),
            DICT => Value::Dict(DictId(id)),
            FOLDED => Value::Folded(id),
            _ => {
                return usize::try_from(payload)
                    .ok()
                    .and_then(|k| self.wide.get(k))
                    .copied()
            }
        })
    }

    pub(crate) fn put(&mut self, key: u64, value: Value) {
        let packed = self.pack(value);
        let next = self.dense.len() as u64;
        if key < next {
            if let Some(slot) = usize::try_from(key)
                .ok()
                .and_then(|k| self.dense.get_mut(k))
            {
                *slot = packed;
            }
        } else if key == next && !self.sparse.contains_key(&key) {
            self.dense.push(packed);
        } else {
            self.sparse.insert(key, packed);
        }
    }

    #[inline]
    pub(crate) fn get(&self, key: u64) -> Option<Value> {
        let packed = usize::try_from(key)
            .ok()
            .and_then(|k| self.dense.get(k))
            .or_else(|| self.sparse.get(&key))?;
        self.unpack(*packed)
    }

    /// The number of keys defined: the key MEMOIZE stores under (`len(memo)` in Python).
    pub(crate) fn len(&self) -> u64 {
        (self.dense.len() + self.sparse.len()) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn every_kind_of_value_packs_and_unpacks() {
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
        assert_eq!(std::mem::size_of::<Packed>(), 8);
    }
}
