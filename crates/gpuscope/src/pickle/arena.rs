//! The arenas while a pickle is being read: new strings, byte strings, sequences and dicts
//! get the next id, and lists and dicts are mutated in their slots (pickle fills a container
//! after it has been memoized, so every reference to it must see the additions).
//!
//! A dict keeps Python's rule for a key set twice: first place, last value. Keys are
//! compared structurally for plain values (strings by interned id, tuples item by item,
//! within a budget)
//! and by identity for lists and dicts (which Python would not accept as keys anyway).

use std::hash::{Hash, Hasher};

use rustc_hash::{FxHashMap, FxHasher};

use super::value::{ByteStrings, BytesId, DictId, Pickle, SeqId, StrId, Strings, Value};

/// Dicts with more entries than this get a hash index for finding repeated keys, so a big
/// dict is not quadratic to read.
const INDEX_FROM: usize = 16;

/// How many values comparing or hashing one dict key may visit. Past it, tuples compare
/// by identity and hash no further: a key built as a DAG of shared tuples (each level
/// referencing the one below twice) must not cost 2^depth steps.
const KEY_BUDGET: u32 = 256;

/// The arenas under construction; [`Builder::finish`] turns them into a [`Pickle`].
#[derive(Debug, Default)]
pub(crate) struct Builder {
    pub(crate) strings: Strings,
    pub(crate) bytes: ByteStrings,
    seqs: Vec<Vec<Value>>,
    dicts: Vec<Vec<(Value, Value)>>,
    /// For dicts past [`INDEX_FROM`] entries: key hash → position of an entry with it.
    dict_index: FxHashMap<u32, FxHashMap<u64, u32>>,
}

/// A kind of arena ran out of 32-bit ids.
#[derive(Debug)]
pub(crate) struct Exhausted(pub(crate) &'static str);

impl Builder {
    pub(crate) fn intern(&mut self, s: &str) -> Result<Value, Exhausted> {
        self.strings
            .intern(s)
            .map(|id| Value::Str(StrId(id)))
            .ok_or(Exhausted("strings"))
    }

    /// Seals the bytes appended to `self.bytes.data` since `start` as one byte string.
    pub(crate) fn seal_bytes(&mut self, start: usize) -> Result<Value, Exhausted> {
        self.bytes
            .seal(start)
            .map(|id| Value::Bytes(BytesId(id)))
            .ok_or(Exhausted("byte strings"))
    }

    pub(crate) fn new_seq(&mut self, items: Vec<Value>) -> Result<SeqId, Exhausted> {
        let id = u32::try_from(self.seqs.len()).map_err(|_| Exhausted("sequences"))?;
        self.seqs.push(items);
        Ok(SeqId(id))
    }

    /// The items of a sequence, to append to.
    pub(crate) fn seq_mut(&mut self, id: SeqId) -> Option<&mut Vec<Value>> {
        self.seqs.get_mut(id.index())
    }

    pub(crate) fn new_dict(&mut self) -> Result<DictId, Exhausted> {
        let id = u32::try_from(self.dicts.len()).map_err(|_| Exhausted("dicts"))?;
        self.dicts.push(Vec::new());
        Ok(DictId(id))
    }

    /// Room for `n` more entries in a dict (the pairs of a SETITEMS already on the
    /// stack), so filling it does not grow it step by step.
    pub(crate) fn reserve_entries(&mut self, dict: DictId, n: usize) {
        if let Some(entries) = self.dicts.get_mut(dict.index()) {
            entries.reserve(n);
        }
    }

    /// `dict[key] = value`, as Python does it: a key already there keeps its place.
    pub(crate) fn dict_set(&mut self, dict: DictId, key: Value, value: Value) {
        let Some(entries) = self.dicts.get(dict.index()) else {
            return;
        };
        let keys = Keys {
            bytes: &self.bytes,
            seqs: &self.seqs,
        };
        let found = if entries.len() < INDEX_FROM {
            entries.iter().position(|&(k, _)| keys.eq(k, key))
        } else {
            let index = self.dict_index.entry(dict.0).or_insert_with(|| {
                let mut index = FxHashMap::default();
                for (pos, &(k, _)) in entries.iter().enumerate() {
                    index.entry(keys.hash(k)).or_insert(pos as u32);
                }
                index
            });
            let hash = keys.hash(key);
            match index.get(&hash) {
                None => {
                    index.insert(hash, entries.len() as u32);
                    None
                }
                Some(&pos) => match entries.get(pos as usize) {
                    Some(&(k, _)) if keys.eq(k, key) => Some(pos as usize),
                    // Same hash, different key: rare enough for a scan.
                    _ => entries.iter().position(|&(k, _)| keys.eq(k, key)),
                },
            }
        };
        let Some(entries) = self.dicts.get_mut(dict.index()) else {
            return;
        };
        match found.and_then(|pos| entries.get_mut(pos)) {
            Some(entry) => entry.1 = value,
            None => entries.push((key, value)),
        }
    }

    pub(crate) fn finish(self, root: Value) -> Pickle {
        Pickle {
            root,
            strings: self.strings,
            bytes: self.bytes,
            seqs: self.seqs,
            dicts: self.dicts,
        }
    }
}

/// What comparing and hashing dict keys needs to see of the arenas.
struct Keys<'a> {
    bytes: &'a ByteStrings,
    seqs: &'a [Vec<Value>],
}

impl Keys<'_> {
    #[inline]
    fn eq(&self, a: Value, b: Value) -> bool {
        match b {
            Value::Bytes(_) | Value::Tuple(_) => {
                let mut budget = KEY_BUDGET;
                self.eq_within(a, b, &mut budget)
            }
            // Keys of any other kind (torch's are all strings) are equal just when `==`
            // says so, whatever `a` is.
            _ => a == b,
        }
    }

    fn eq_within(&self, a: Value, b: Value, budget: &mut u32) -> bool {
        *budget = budget.saturating_sub(1);
        match (a, b) {
            (Value::Float(x), Value::Float(y)) => x == y,
            (Value::Bytes(x), Value::Bytes(y)) => {
                x == y || self.bytes.get(x.0) == self.bytes.get(y.0)
            }
            (Value::Tuple(x), Value::Tuple(y)) if x != y && *budget > 0 => {
                match (self.seqs.get(x.index()), self.seqs.get(y.index())) {
                    (Some(xs), Some(ys)) => {
                        xs.len() == ys.len()
                            && xs
                                .iter()
                                .zip(ys)
                                .all(|(&p, &q)| self.eq_within(p, q, budget))
                    }
                    _ => false,
                }
            }
            // Strings are interned, lists and dicts compare by identity, the rest by value.
            _ => a == b,
        }
    }

    fn hash(&self, v: Value) -> u64 {
        let mut hasher = FxHasher::default();
        let mut budget = KEY_BUDGET;
        self.feed(v, &mut hasher, &mut budget);
        hasher.finish()
    }

    fn feed(&self, v: Value, hasher: &mut FxHasher, budget: &mut u32) {
        *budget = budget.saturating_sub(1);
        std::mem::discriminant(&v).hash(hasher);
        match v {
            Value::None => {}
            Value::Bool(b) => b.hash(hasher),
            Value::Int(i) => i.hash(hasher),
            // 0.0 == -0.0, so both hash alike.
            Value::Float(f) => (if f == 0.0 { 0 } else { f.to_bits() }).hash(hasher),
            // Interned: the id stands for the text.
            Value::Str(id) => id.hash(hasher),
            Value::Bytes(id) => self.bytes.get(id.0).hash(hasher),
            Value::Tuple(id) if *budget > 0 => {
                for &item in self.seqs.get(id.index()).map_or(&[][..], Vec::as_slice) {
                    self.feed(item, hasher, budget);
                }
            }
            Value::List(id) | Value::Tuple(id) => id.hash(hasher),
            Value::Dict(id) => id.hash(hasher),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dict_with(builder: &mut Builder, n: i64, repeat: i64) -> DictId {
        let d = builder.new_dict().unwrap();
        for i in 0..n {
            builder.dict_set(d, Value::Int(i), Value::Int(i));
        }
        for i in 0..repeat {
            builder.dict_set(d, Value::Int(i), Value::Int(-i));
        }
        d
    }

    #[test]
    fn a_repeated_key_keeps_its_place_and_takes_the_last_value() {
        for n in [4, INDEX_FROM as i64 + 5, 2000] {
            let mut builder = Builder::default();
            let d = dict_with(&mut builder, n, 3);
            let pickle = builder.finish(Value::Dict(d));
            let entries = pickle.as_dict(pickle.root()).unwrap();
            assert_eq!(entries.len(), n as usize);
            assert_eq!(entries[1], (Value::Int(1), Value::Int(-1)));
            assert_eq!(entries[2], (Value::Int(2), Value::Int(-2)));
            assert_eq!(entries[3], (Value::Int(3), Value::Int(3)));
        }
    }

    #[test]
    fn keys_that_are_deep_dags_of_shared_tuples_cost_a_bounded_time() {
        let mut builder = Builder::default();
        let mut chains = Vec::new();
        for _ in 0..2 {
            let mut t = builder.new_seq(vec![Value::Int(1)]).unwrap();
            for _ in 0..64 {
                t = builder
                    .new_seq(vec![Value::Tuple(t), Value::Tuple(t)])
                    .unwrap();
            }
            chains.push(t);
        }
        let d = builder.new_dict().unwrap();
        for i in 0..INDEX_FROM as i64 {
            builder.dict_set(d, Value::Int(i), Value::None);
        }
        // 2^64 leaves each: returns at once, or never.
        builder.dict_set(d, Value::Tuple(chains[0]), Value::Int(1));
        builder.dict_set(d, Value::Tuple(chains[1]), Value::Int(2));
        builder.dict_set(d, Value::Tuple(chains[0]), Value::Int(3));
        let pickle = builder.finish(Value::Dict(d));
        let entries = pickle.as_dict(pickle.root()).unwrap();
        assert_eq!(
            entries[INDEX_FROM],
            (Value::Tuple(chains[0]), Value::Int(3))
        );
    }

    #[test]
    fn tuple_and_string_keys_compare_by_content() {
        let mut builder = Builder::default();
        let a = builder.intern("a").unwrap();
        let t1 = builder.new_seq(vec![a, Value::Float(0.0)]).unwrap();
        let t2 = builder.new_seq(vec![a, Value::Float(-0.0)]).unwrap();
        let d = builder.new_dict().unwrap();
        for i in 0..INDEX_FROM as i64 + 1 {
            builder.dict_set(d, Value::Int(i), Value::None);
        }
        builder.dict_set(d, Value::Tuple(t1), Value::Int(1));
        builder.dict_set(d, Value::Tuple(t2), Value::Int(2));
        builder.dict_set(d, Value::List(t2), Value::Int(3));
        let pickle = builder.finish(Value::Dict(d));
        let entries = pickle.as_dict(pickle.root()).unwrap();
        assert_eq!(entries.len(), INDEX_FROM + 3);
        assert_eq!(entries[INDEX_FROM + 1], (Value::Tuple(t1), Value::Int(2)));
        assert_eq!(entries[INDEX_FROM + 2], (Value::List(t2), Value::Int(3)));
    }
}
