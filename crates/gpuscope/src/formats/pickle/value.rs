//! The data a pickle holds: [`Value`] (small, `Copy`) and the arenas of [`Pickle`] that its
//! ids point into, with the accessors callers walk the tree by.
//!
//! Containers are stored once, in arena slots, and a value refers to them by id: a list the
//! pickle references from many places (through its memo) is one slot and many equal ids.
//! Strings are interned: equal text has one [`StrId`].

use std::hash::BuildHasher;

use rustc_hash::{FxBuildHasher, FxHashMap};

macro_rules! arena_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(pub(crate) u32);

        impl $name {
            /// The id as an index (ids of one kind number their arena's slots from 0), for
            /// callers that keep side tables.
            pub fn index(self) -> usize {
                self.0 as usize
            }
        }
    };
}

arena_id!(
    /// Id of an interned string in a [`Pickle`]: equal strings have equal ids.
    StrId
);
arena_id!(
    /// Id of a byte string (`bytes` or `bytearray`) in a [`Pickle`].
    BytesId
);
arena_id!(
    /// Id of a sequence (list, tuple, set or frozenset) in a [`Pickle`].
    SeqId
);
arena_id!(
    /// Id of a dict in a [`Pickle`].
    DictId
);

/// One Python value of plain data. Containers and strings are ids into the [`Pickle`] that
/// read them; a container referenced twice in the pickle gives twice the same id.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Value {
    /// `None`.
    None,
    /// `True` or `False`.
    Bool(bool),
    /// An `int` that fits in `i64`.
    Int(i64),
    /// An `int` above `i64::MAX` that fits in `u64` (torch writes `size_t(-1)`,
    /// 2^64 − 1, as the line of a C++ frame it could not place).
    UInt(u64),
    /// An `int` that fits in neither, as the nearest float: kept as a number, not
    /// refused, since a reader may only display it. Two such ints that round to the same
    /// float are equal here, as dict keys too.
    BigInt(f64),
    /// A `float`.
    Float(f64),
    /// A `str` (and a Python 2 `str` that is valid UTF-8).
    Str(StrId),
    /// `bytes` or `bytearray` (and a Python 2 `str` that is not valid UTF-8).
    Bytes(BytesId),
    /// A `list`; also a `set` or `frozenset`, in the order the pickle lists their items.
    List(SeqId),
    /// A `tuple`.
    Tuple(SeqId),
    /// A `dict`, in insertion order.
    Dict(DictId),
    /// A list or dict that a [`Fold`](super::Fold) took over while reading: the token it
    /// returned, whose meaning is the fold's. Never produced by [`read`](super::read).
    Folded(u32),
}

impl Value {
    /// The Python type name of the value (`"list"` for sets too), for error messages.
    pub fn type_name(self) -> &'static str {
        match self {
            Value::None => "None",
            Value::Bool(_) => "bool",
            Value::Int(_) | Value::UInt(_) | Value::BigInt(_) => "int",
            Value::Float(_) => "float",
            Value::Str(_) => "str",
            Value::Bytes(_) => "bytes",
            Value::List(_) => "list",
            Value::Tuple(_) => "tuple",
            Value::Dict(_) => "dict",
            Value::Folded(_) => "folded",
        }
    }
}

/// Interned strings: one text buffer, a span per id, and a hash index from text to id.
#[derive(Debug, Default)]
pub(crate) struct Strings {
    text: String,
    spans: Vec<(usize, usize)>,
    /// Hash of the text → the first id with that hash.
    by_hash: FxHashMap<u64, u32>,
    /// Texts whose hash is shared with a different, earlier text (practically never).
    collided: FxHashMap<Box<str>, u32>,
}

impl Strings {
    pub(crate) fn get(&self, id: u32) -> &str {
        let Some(&(start, end)) = self.spans.get(id as usize) else {
            return "";
        };
        self.text.get(start..end).unwrap_or_default()
    }

    pub(crate) fn find(&self, s: &str) -> Option<u32> {
        let &id = self.by_hash.get(&FxBuildHasher.hash_one(s))?;
        if self.get(id) == s {
            Some(id)
        } else {
            self.collided.get(s).copied()
        }
    }

    /// The id of `s`, adding it if new; `None` when ids are exhausted.
    pub(crate) fn intern(&mut self, s: &str) -> Option<u32> {
        let hash = FxBuildHasher.hash_one(s);
        let known = self.by_hash.get(&hash).copied();
        if let Some(id) = known {
            if self.get(id) == s {
                return Some(id);
            }
            if let Some(&id) = self.collided.get(s) {
                return Some(id);
            }
        }
        let id = u32::try_from(self.spans.len()).ok()?;
        let start = self.text.len();
        self.text.push_str(s);
        self.spans.push((start, self.text.len()));
        if known.is_some() {
            self.collided.insert(s.into(), id);
        } else {
            self.by_hash.insert(hash, id);
        }
        Some(id)
    }

    pub(crate) fn len(&self) -> usize {
        self.spans.len()
    }
}

/// Byte strings: one buffer and a span per id.
#[derive(Debug, Default)]
pub(crate) struct ByteStrings {
    pub(crate) data: Vec<u8>,
    spans: Vec<(usize, usize)>,
}

impl ByteStrings {
    pub(crate) fn get(&self, id: u32) -> &[u8] {
        let Some(&(start, end)) = self.spans.get(id as usize) else {
            return &[];
        };
        self.data.get(start..end).unwrap_or_default()
    }

    /// Seals `data[start..]` as a new byte string; `None` when ids are exhausted.
    pub(crate) fn seal(&mut self, start: usize) -> Option<u32> {
        let id = u32::try_from(self.spans.len()).ok()?;
        self.spans.push((start, self.data.len()));
        Some(id)
    }
}

/// Where a container's items are in its flat arena: `items[start..start + len]`, with room
/// up to `start + cap` (a container filled in several batches while others were being
/// filled moves to the end with room to spare, so refilling it is amortised). A container
/// taken over by a [`Fold`](super::Fold) has `cap == FOLDED` and its token in `start`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Span {
    pub(crate) start: u32,
    pub(crate) len: u32,
    pub(crate) cap: u32,
}

/// [`Span::cap`] of a folded container.
pub(crate) const FOLDED: u32 = u32::MAX;

impl Span {
    pub(crate) fn empty_at(start: u32) -> Span {
        Span {
            start,
            len: 0,
            cap: 0,
        }
    }

    /// The fold's token, if the container was folded.
    pub(crate) fn folded(self) -> Option<u32> {
        (self.cap == FOLDED).then_some(self.start)
    }

    fn range(self) -> Option<std::ops::Range<usize>> {
        let start = self.start as usize;
        match self.len {
            _ if self.cap == FOLDED => None,
            // An empty span may point past its arena's end (see `arena::reserve`).
            0 => Some(0..0),
            len => Some(start..start + len as usize),
        }
    }
}

/// A pickle read into arenas: the root [`Value`] and the strings, byte strings, sequences
/// and dicts its ids point into. Built by [`read`](super::read); never runs code.
///
/// Containers are flat: every sequence's items are a span of one vector, every dict's
/// entries a span of another, so a snapshot's hundreds of thousands of small dicts cost no
/// allocation each.
#[derive(Debug)]
pub struct Pickle {
    pub(crate) root: Value,
    pub(crate) strings: Strings,
    pub(crate) bytes: ByteStrings,
    pub(crate) items: Vec<Value>,
    pub(crate) seqs: Vec<Span>,
    pub(crate) entries: Vec<(Value, Value)>,
    pub(crate) dicts: Vec<Span>,
}

impl Pickle {
    /// The object the pickle holds (what `pickle.load` would return).
    pub fn root(&self) -> Value {
        self.root
    }

    /// The text of a `str`.
    pub fn as_str(&self, v: Value) -> Option<&str> {
        match v {
            Value::Str(id) => Some(self.strings.get(id.0)),
            _ => None,
        }
    }

    /// The value of an `int` (not of a `bool`) that fits in `i64`.
    pub fn as_int(&self, v: Value) -> Option<i64> {
        match v {
            Value::Int(i) => Some(i),
            _ => None,
        }
    }

    /// The value of an `int` (not of a `bool`) that fits in `u64`: sizes, addresses.
    pub fn as_u64(&self, v: Value) -> Option<u64> {
        match v {
            Value::Int(i) => u64::try_from(i).ok(),
            Value::UInt(u) => Some(u),
            _ => None,
        }
    }

    /// The value of a `bool`.
    pub fn as_bool(&self, v: Value) -> Option<bool> {
        match v {
            Value::Bool(b) => Some(b),
            _ => None,
        }
    }

    /// A `float`, or an `int` as a float.
    pub fn as_f64(&self, v: Value) -> Option<f64> {
        match v {
            Value::Float(f) | Value::BigInt(f) => Some(f),
            Value::Int(i) => Some(i as f64),
            Value::UInt(u) => Some(u as f64),
            _ => None,
        }
    }

    /// The contents of `bytes` or `bytearray`.
    pub fn as_bytes(&self, v: Value) -> Option<&[u8]> {
        match v {
            Value::Bytes(id) => Some(self.bytes.get(id.0)),
            _ => None,
        }
    }

    /// The items of a list (or set) or tuple (`None` for one a fold took over).
    pub fn as_seq(&self, v: Value) -> Option<&[Value]> {
        match v {
            Value::List(id) | Value::Tuple(id) => {
                self.items.get(self.seqs.get(id.index())?.range()?)
            }
            _ => None,
        }
    }

    /// The entries of a dict in insertion order; a key set twice keeps its first place
    /// and its last value, as in Python (`None` for one a fold took over).
    pub fn as_dict(&self, v: Value) -> Option<&[(Value, Value)]> {
        match v {
            Value::Dict(id) => self.entries.get(self.dicts.get(id.index())?.range()?),
            _ => None,
        }
    }

    /// The value under the string key `key` of a dict; `None` if `dict` is no dict or has
    /// no such key.
    pub fn get(&self, dict: Value, key: &str) -> Option<Value> {
        let key = Value::Str(self.find_str(key)?);
        self.as_dict(dict)?
            .iter()
            .find(|(k, _)| *k == key)
            .map(|&(_, v)| v)
    }

    /// The id of a `str`.
    pub fn str_id(&self, v: Value) -> Option<StrId> {
        match v {
            Value::Str(id) => Some(id),
            _ => None,
        }
    }

    /// The text of an interned string (`""` for an id that is not from this pickle).
    pub fn str_by_id(&self, id: StrId) -> &str {
        self.strings.get(id.0)
    }

    /// The id the text `s` has in this pickle, if the pickle holds that string anywhere
    /// (as a key or a value). Lets callers compare by id: `pickle.str_id(v) == Some(id)`.
    pub fn find_str(&self, s: &str) -> Option<StrId> {
        self.strings.find(s).map(StrId)
    }

    /// How many distinct strings the pickle holds (ids run from 0 to this, exclusive).
    pub fn str_count(&self) -> usize {
        self.strings.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_is_16_bytes() {
        assert_eq!(std::mem::size_of::<Value>(), 16);
        assert_eq!(std::mem::size_of::<Option<Value>>(), 16);
    }

    #[test]
    fn equal_strings_are_interned_once() {
        let mut strings = Strings::default();
        let a = strings.intern("filename.py");
        let b = strings.intern("other");
        assert_eq!(strings.intern("filename.py"), a);
        assert_ne!(a, b);
        assert_eq!(strings.len(), 2);
        assert_eq!(strings.find("other"), b);
        assert_eq!(strings.find("missing"), None);
        assert_eq!(strings.get(99), "");
    }
}
