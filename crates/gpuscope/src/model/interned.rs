//! Interned strings, shared by the models whose files repeat the same names many times
//! (kernel and operator names in traces, frames in allocator snapshots).

use rustc_hash::FxHashMap;

/// Interned strings: each distinct name stored once, events refer to it by index.
#[derive(Debug, Clone, Default)]
pub struct Names {
    strings: Vec<String>,
    /// Fx, not SipHash: names come from a file the user chose to read, and hashing them
    /// was a few percent of a trace's parse.
    index: FxHashMap<String, u32>,
}

impl Names {
    /// The id of `name`, adding it when new.
    pub fn intern(&mut self, name: &str) -> u32 {
        if let Some(&id) = self.index.get(name) {
            return id;
        }
        let id = self.strings.len() as u32;
        self.strings.push(name.to_owned());
        self.index.insert(name.to_owned(), id);
        id
    }

    /// The string of `id`.
    pub fn get(&self, id: u32) -> &str {
        &self.strings[id as usize]
    }

    /// For each id, whether its string contains `text`: names are few and events many,
    /// so each name is searched once.
    pub fn containing(&self, text: &str) -> Vec<bool> {
        self.strings.iter().map(|s| s.contains(text)).collect()
    }

    /// The id of `name`, if it occurs.
    pub fn find(&self, name: &str) -> Option<u32> {
        self.index.get(name).copied()
    }

    /// How many distinct strings there are.
    pub fn len(&self) -> usize {
        self.strings.len()
    }

    /// True when there are none.
    pub fn is_empty(&self) -> bool {
        self.strings.is_empty()
    }
}
