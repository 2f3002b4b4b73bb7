//! The arenas while a pickle is being read: new strings, byte strings, sequences and dicts
//! get the next id, and lists and dicts are mutated in their slots (pickle fills a container
//! after it has been memoized, so every reference to it must see the additions).
//!
//! Sequences and dicts are spans of two flat vectors ([`Span`]). A container filled at the
//! end of its vector grows in place; one filled while another has been filled after it
//! moves to the end with room to double, so a list filled in batches between the dicts it
//! holds is copied O(log n) times, not once per batch. A folded container's span is cut
//! off the end of its vector when it is there, which is where a fold finds it: torch's
//! trace entries and their frame lists are folded right after they are filled.
//!
//! A dict keeps Python's rule for a key set twice: first place, last value. Keys are
//! compared structurally for plain values (strings by interned id, tuples item by item,
//! within a budget)
//! and by identity for lists and dicts (which Python would not accept as keys anyway).

use std::hash::{Hash, Hasher};

use rustc_hash::{FxHashMap, FxHasher};

use super::value::{
    ByteStrings, BytesId, DictId, Pickle, SeqId, Span, StrId, Strings, Value, FOLDED,
};

/// Dicts with more entries than this get a hash index for finding repeated keys, so a big
/// dict is not quadratic to read.
const INDEX_FROM: usize = 16;

/// How many values comparing or hashing one dict key may visit. Past it, tuples compare
/// by identity and hash no further: a key built as a DAG of shared tuples (each level
/// referencing the one below twice) must not cost 2^depth steps.
const KEY_BUDGET: u32 = 256;

/// The arenas under construction (a [`Pickle`] without its root yet);
/// [`Builder::finish`] sets the root.
#[derive(Debug)]
pub(crate) struct Builder {
    pub(crate) pickle: Pickle,
    /// For dicts past [`INDEX_FROM`] entries: key hash → position of an entry with it.
    dict_index: FxHashMap<u32, FxHashMap<u64, u32>>,
    /// Spans folded since the last [`Builder::release_folded`]: (a dict's?, start, end).
    folded: Vec<(bool, usize, usize)>,
}

impl Default for Builder {
    fn default() -> Self {
        Builder {
            pickle: Pickle {
                root: Value::None,
                strings: Strings::default(),
                bytes: ByteStrings::default(),
                items: Vec::new(),
                seqs: Vec::new(),
                entries: Vec::new(),
                dicts: Vec::new(),
            },
            dict_index: FxHashMap::default(),
            folded: Vec::new(),
        }
    }
}

/// A kind of arena ran out of 32-bit ids.
#[derive(Debug)]
pub(crate) struct Exhausted(pub(crate) &'static str);

/// Why a container cannot be filled.
#[derive(Debug)]
pub(crate) enum Unfillable {
    Exhausted(Exhausted),
    /// It was folded: what the fold took over cannot change any more.
    Folded,
}

impl From<Exhausted> for Unfillable {
    fn from(e: Exhausted) -> Self {
        Unfillable::Exhausted(e)
    }
}

impl Builder {
    pub(crate) fn intern(&mut self, s: &str) -> Result<Value, Exhausted> {
        self.pickle
            .strings
            .intern(s)
            .map(|id| Value::Str(StrId(id)))
            .ok_or(Exhausted("strings"))
    }

    /// The buffer byte strings are read into; [`Builder::seal_bytes`] ends one.
    pub(crate) fn byte_data(&mut self) -> &mut Vec<u8> {
        &mut self.pickle.bytes.data
    }

    /// Seals the bytes appended to the byte data since `start` as one byte string.
    pub(crate) fn seal_bytes(&mut self, start: usize) -> Result<Value, Exhausted> {
        self.pickle
            .bytes
            .seal(start)
            .map(|id| Value::Bytes(BytesId(id)))
            .ok_or(Exhausted("byte strings"))
    }

    pub(crate) fn new_seq(&mut self, items: &[Value]) -> Result<SeqId, Exhausted> {
        let p = &mut self.pickle;
        let id = u32::try_from(p.seqs.len()).map_err(|_| Exhausted("sequences"))?;
        let mut span = Span::empty_at(tail(&p.items)?);
        append(&mut p.items, &mut span, items, Value::None)?;
        p.seqs.push(span);
        Ok(SeqId(id))
    }

    /// Appends `items` to a sequence.
    pub(crate) fn seq_extend(&mut self, id: SeqId, items: &[Value]) -> Result<(), Unfillable> {
        let p = &mut self.pickle;
        let Some(span) = p.seqs.get_mut(id.index()) else {
            return Ok(());
        };
        if span.cap == FOLDED {
            return Err(Unfillable::Folded);
        }
        Ok(append(&mut p.items, span, items, Value::None)?)
    }

    /// Whether the sequence has no items yet and can be filled.
    pub(crate) fn is_empty_seq(&self, id: SeqId) -> bool {
        self.pickle
            .seqs
            .get(id.index())
            .is_some_and(|span| span.len == 0 && span.cap != FOLDED)
    }

    pub(crate) fn new_dict(&mut self) -> Result<DictId, Exhausted> {
        let p = &mut self.pickle;
        let id = u32::try_from(p.dicts.len()).map_err(|_| Exhausted("dicts"))?;
        p.dicts.push(Span::empty_at(tail(&p.entries)?));
        Ok(DictId(id))
    }

    /// Sets the keys and values `pairs` (key, value, key, value, …) in a dict, in order.
    pub(crate) fn dict_extend(&mut self, dict: DictId, pairs: &[Value]) -> Result<(), Unfillable> {
        let p = &mut self.pickle;
        let Some(span) = p.dicts.get_mut(dict.index()) else {
            return Ok(());
        };
        if span.cap == FOLDED {
            return Err(Unfillable::Folded);
        }
        let n = pairs.len() / 2;
        reserve(&mut p.entries, span, n, (Value::None, Value::None))?;
        // What torch writes: a new dict filled at once, its keys distinct strings. Those
        // need no search for a key set before.
        if span.len == 0 && distinct_strings(pairs) {
            let start = span.start as usize;
            for (slot, pair) in p.entries.iter_mut().skip(start).zip(pairs.chunks_exact(2)) {
                if let [key, value] = *pair {
                    *slot = (key, value);
                }
            }
            // `reserve` made `n` fit in `cap`, a u32.
            span.len = n as u32;
            return Ok(());
        }
        pairs.chunks_exact(2).try_for_each(|pair| match *pair {
            [key, value] => self.dict_set(dict, key, value),
            _ => Ok(()),
        })
    }

    /// `dict[key] = value`, as Python does it: a key already there keeps its place.
    pub(crate) fn dict_set(
        &mut self,
        dict: DictId,
        key: Value,
        value: Value,
    ) -> Result<(), Unfillable> {
        let p = &self.pickle;
        let Some(entries) = p.as_dict(Value::Dict(dict)) else {
            return match p.dicts.get(dict.index()) {
                Some(span) if span.cap == FOLDED => Err(Unfillable::Folded),
                _ => Ok(()),
            };
        };
        let keys = Keys { pickle: p };
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
        let p = &mut self.pickle;
        let Some(span) = p.dicts.get_mut(dict.index()) else {
            return Ok(());
        };
        match found {
            Some(pos) => {
                if let Some(entry) = p.entries.get_mut(span.start as usize + pos) {
                    entry.1 = value;
                }
                Ok(())
            }
            None => Ok(append(
                &mut p.entries,
                span,
                &[(key, value)],
                (Value::None, Value::None),
            )?),
        }
    }

    /// `v`, or what it was folded into.
    #[inline]
    pub(crate) fn resolve(&self, v: Value) -> Value {
        let span = match v {
            Value::List(id) | Value::Tuple(id) => self.pickle.seqs.get(id.index()),
            Value::Dict(id) => self.pickle.dicts.get(id.index()),
            _ => None,
        };
        match span.and_then(|s| s.folded()) {
            Some(token) => Value::Folded(token),
            None => v,
        }
    }

    /// Marks the container `v` as folded into `token`; [`Builder::release_folded`] frees
    /// its items.
    pub(crate) fn fold(&mut self, v: Value, token: u32) {
        let p = &mut self.pickle;
        let (is_dict, span) = match v {
            Value::List(id) | Value::Tuple(id) => (false, p.seqs.get_mut(id.index())),
            Value::Dict(id) => {
                self.dict_index.remove(&id.0);
                (true, p.dicts.get_mut(id.index()))
            }
            _ => return,
        };
        let Some(span) = span else { return };
        if span.cap != FOLDED {
            let start = span.start as usize;
            self.folded
                .push((is_dict, start, start + span.cap as usize));
        }
        *span = Span {
            start: token,
            len: 0,
            cap: FOLDED,
        };
    }

    /// Frees the items of the containers folded since the last call where they end their
    /// arena, the last folded first: a batch of records folded in the order they were
    /// filled frees all their room.
    pub(crate) fn release_folded(&mut self) {
        let p = &mut self.pickle;
        for (is_dict, start, end) in self.folded.drain(..).rev() {
            if is_dict && end == p.entries.len() {
                p.entries.truncate(start);
            } else if !is_dict && end == p.items.len() {
                p.items.truncate(start);
            }
        }
    }

    pub(crate) fn finish(mut self, root: Value) -> Pickle {
        self.pickle.root = root;
        self.pickle
    }
}

/// Whether the keys of `pairs` (key, value, …) are at most [`INDEX_FROM`] strings, none
/// twice.
fn distinct_strings(pairs: &[Value]) -> bool {
    let mut ids = [0u32; INDEX_FROM];
    for (k, key) in pairs.iter().step_by(2).enumerate() {
        let (Value::Str(StrId(id)), Some((slot, earlier))) =
            (*key, ids.get_mut(..=k).and_then(<[u32]>::split_last_mut))
        else {
            return false;
        };
        if earlier.contains(&id) {
            return false;
        }
        *slot = id;
    }
    true
}

/// The next position of a flat arena, which spans index with 32 bits.
fn tail<T>(arena: &[T]) -> Result<u32, Exhausted> {
    u32::try_from(arena.len()).map_err(|_| Exhausted("container items"))
}

/// Makes room for `n` more items after the span's: the arena grows when the span ends
/// it; otherwise the span moves to the end with room to double.
fn reserve<T: Copy>(
    arena: &mut Vec<T>,
    span: &mut Span,
    n: usize,
    filler: T,
) -> Result<(), Exhausted> {
    let (start, len, cap) = (span.start as usize, span.len as usize, span.cap as usize);
    let need = len.saturating_add(n);
    if need <= cap {
        return Ok(());
    }
    let at_end = start + cap == arena.len();
    let (new_start, new_cap) = if at_end {
        (start, need)
    } else {
        (arena.len(), need.max(2 * len))
    };
    let full = Exhausted("container items");
    let new_end = new_start
        .checked_add(new_cap)
        .ok_or(Exhausted("container items"))?;
    let (Ok(new_start32), Ok(new_cap32), Ok(_)) = (
        u32::try_from(new_start),
        u32::try_from(new_cap),
        u32::try_from(new_end),
    ) else {
        return Err(full);
    };
    // An empty span owns nothing and may point past the arena's end (where a folded
    // container was cut off after it was made): there is nothing of it to copy.
    if !at_end && len > 0 {
        arena.extend_from_within(start..start + len);
    }
    arena.resize(new_end, filler);
    span.start = new_start32;
    span.cap = new_cap32;
    Ok(())
}

/// Appends `new` to the span's items.
fn append<T: Copy>(
    arena: &mut Vec<T>,
    span: &mut Span,
    new: &[T],
    filler: T,
) -> Result<(), Exhausted> {
    reserve(arena, span, new.len(), filler)?;
    let end = span.start as usize + span.len as usize;
    if let Some(room) = arena.get_mut(end..end + new.len()) {
        room.copy_from_slice(new);
    }
    // `reserve` made `len + new.len()` fit in `cap`, a u32.
    span.len += new.len() as u32;
    Ok(())
}

/// What comparing and hashing dict keys needs to see of the arenas.
struct Keys<'a> {
    pickle: &'a Pickle,
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
            (Value::Float(x), Value::Float(y)) | (Value::BigInt(x), Value::BigInt(y)) => x == y,
            (Value::Bytes(x), Value::Bytes(y)) => {
                x == y || self.pickle.bytes.get(x.0) == self.pickle.bytes.get(y.0)
            }
            (Value::Tuple(x), Value::Tuple(y)) if x != y && *budget > 0 => {
                match (self.pickle.as_seq(a), self.pickle.as_seq(b)) {
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
            Value::UInt(u) => u.hash(hasher),
            Value::BigInt(f) => f.to_bits().hash(hasher),
            // 0.0 == -0.0, so both hash alike.
            Value::Float(f) => (if f == 0.0 { 0 } else { f.to_bits() }).hash(hasher),
            // Interned: the id stands for the text.
            Value::Str(id) => id.hash(hasher),
            Value::Bytes(id) => self.pickle.bytes.get(id.0).hash(hasher),
            Value::Tuple(_) if *budget > 0 => {
                for &item in self.pickle.as_seq(v).unwrap_or_default() {
                    self.feed(item, hasher, budget);
                }
            }
            Value::List(id) | Value::Tuple(id) => id.hash(hasher),
            Value::Dict(id) => id.hash(hasher),
            Value::Folded(token) => token.hash(hasher),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dict_with(builder: &mut Builder, n: i64, repeat: i64) -> DictId {
        let d = builder.new_dict().unwrap();
        for i in 0..n {
            builder.dict_set(d, Value::Int(i), Value::Int(i)).unwrap();
        }
        for i in 0..repeat {
            builder.dict_set(d, Value::Int(i), Value::Int(-i)).unwrap();
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
            let mut t = builder.new_seq(&[Value::Int(1)]).unwrap();
            for _ in 0..64 {
                t = builder
                    .new_seq(&[Value::Tuple(t), Value::Tuple(t)])
                    .unwrap();
            }
            chains.push(t);
        }
        let d = builder.new_dict().unwrap();
        for i in 0..INDEX_FROM as i64 {
            builder.dict_set(d, Value::Int(i), Value::None).unwrap();
        }
        // 2^64 leaves each: returns at once, or never.
        builder
            .dict_set(d, Value::Tuple(chains[0]), Value::Int(1))
            .unwrap();
        builder
            .dict_set(d, Value::Tuple(chains[1]), Value::Int(2))
            .unwrap();
        builder
            .dict_set(d, Value::Tuple(chains[0]), Value::Int(3))
            .unwrap();
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
        let t1 = builder.new_seq(&[a, Value::Float(0.0)]).unwrap();
        let t2 = builder.new_seq(&[a, Value::Float(-0.0)]).unwrap();
        let d = builder.new_dict().unwrap();
        for i in 0..INDEX_FROM as i64 + 1 {
            builder.dict_set(d, Value::Int(i), Value::None).unwrap();
        }
        builder
            .dict_set(d, Value::Tuple(t1), Value::Int(1))
            .unwrap();
        builder
            .dict_set(d, Value::Tuple(t2), Value::Int(2))
            .unwrap();
        builder.dict_set(d, Value::List(t2), Value::Int(3)).unwrap();
        let pickle = builder.finish(Value::Dict(d));
        let entries = pickle.as_dict(pickle.root()).unwrap();
        assert_eq!(entries.len(), INDEX_FROM + 3);
        assert_eq!(entries[INDEX_FROM + 1], (Value::Tuple(t1), Value::Int(2)));
        assert_eq!(entries[INDEX_FROM + 2], (Value::List(t2), Value::Int(3)));
    }

    #[test]
    fn containers_filled_in_turns_keep_their_items() {
        let mut builder = Builder::default();
        let a = builder.new_seq(&[]).unwrap();
        let b = builder.new_seq(&[]).unwrap();
        for i in 0..100 {
            builder.seq_extend(a, &[Value::Int(i)]).unwrap();
            builder
                .seq_extend(b, &[Value::Int(-i), Value::Int(-i)])
                .unwrap();
        }
        let c = builder.new_seq(&[Value::List(a), Value::List(b)]).unwrap();
        let items = builder.pickle.items.len();
        builder.fold(Value::List(c), 7);
        builder.release_folded();
        assert_eq!(builder.pickle.items.len(), items - 2);
        assert!(matches!(
            builder.seq_extend(c, &[Value::None]),
            Err(Unfillable::Folded)
        ));
        assert_eq!(builder.resolve(Value::List(c)), Value::Folded(7));
        let pickle = builder.finish(Value::List(a));
        let want: Vec<Value> = (0..100).map(Value::Int).collect();
        assert_eq!(pickle.as_seq(Value::List(a)).unwrap(), want);
        assert_eq!(pickle.as_seq(Value::List(b)).unwrap().len(), 200);
        assert_eq!(pickle.as_seq(Value::List(c)), None);
        // Each move doubles the room: far fewer than 100 copies of `a` and `b`.
        assert!(pickle.items.len() < 1000, "{}", pickle.items.len());
    }

    #[test]
    fn an_empty_container_made_before_a_fold_cut_the_arena_can_still_be_filled() {
        let mut builder = Builder::default();
        let entry = builder.new_dict().unwrap();
        builder
            .dict_extend(entry, &[Value::Int(1), Value::Int(2)])
            .unwrap();
        // Made empty at the arena's end, then the entry before it is folded and cut off.
        let empty = builder.new_dict().unwrap();
        let list = builder.new_seq(&[]).unwrap();
        builder.fold(Value::Dict(entry), 0);
        builder.release_folded();
        assert_eq!(builder.pickle.as_dict(Value::Dict(empty)), Some(&[][..]));
        builder
            .dict_extend(empty, &[Value::Int(3), Value::None])
            .unwrap();
        builder.seq_extend(list, &[Value::Bool(true)]).unwrap();
        let pickle = builder.finish(Value::Dict(empty));
        assert_eq!(
            pickle.as_dict(Value::Dict(empty)).unwrap(),
            [(Value::Int(3), Value::None)]
        );
        assert_eq!(
            pickle.as_seq(Value::List(list)).unwrap(),
            [Value::Bool(true)]
        );
    }
}
