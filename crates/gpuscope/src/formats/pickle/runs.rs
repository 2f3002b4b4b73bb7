//! Runs of memo references: `MARK`, then only BINGET / LONG_BINGET, then `APPENDS`, filling
//! a new list. torch writes each trace entry's list of frames this way, tens of fetches of
//! frame dicts memoized once, and the lists repeat: lm_fullstep_ctx128's 12,477 are 233
//! distinct runs. [`Runs`] remembers each distinct run (its bytes) with the values its
//! fetches gave, so a run met again is one hash lookup instead of tens of opcodes. Before
//! even that, [`Runs::known`] compares the bytes after a MARK with the remembered runs that
//! began with the same [`HEAD`] bytes, which spares reading the run's opcodes to find its
//! end and hashing it.
//!
//! A run's bytes give the same values only while the memo keys they name keep their
//! values: any PUT that replaces a key ([`Memo::epoch`]) forgets every run. Run numbers
//! are never reused, so a list's run number always stands for the same items.

use rustc_hash::FxHashMap;

use super::memo::Memo;
use super::opcodes::Op;
use super::value::Value;

const BINGET: u8 = Op::BINGET.byte();
const LONG_BINGET: u8 = Op::LONG_BINGET.byte();
const APPENDS: u8 = Op::APPENDS.byte();

/// Values kept for all runs together; past it, runs are no longer remembered (a pickle
/// made to have millions of distinct runs is read opcode by opcode).
const MAX_VALUES: usize = 1 << 20;

/// How many bytes after a MARK pick the candidates for [`Runs::known`]. torch's runs
/// begin alike (innermost frames first): lm_fullstep_ctx128's 233 distinct runs begin
/// with 2 distinct 8-byte heads, but 114 distinct 64-byte ones, of up to 16 runs each.
const HEAD: usize = 64;

/// Candidates kept per head; runs past them are found by [`Runs::find`] alone.
const PER_HEAD: usize = 16;

#[derive(Debug, Default)]
pub(crate) struct Runs {
    /// Each remembered run's bytes → its number and where its values are in `values`.
    index: FxHashMap<Box<[u8]>, (u32, u32, u32)>,
    /// The first [`HEAD`] bytes after a run's MARK → runs added after such bytes.
    heads: FxHashMap<[u8; HEAD], Vec<Known>>,
    values: Vec<Value>,
    /// The memo's epoch the remembered runs were read in.
    epoch: u64,
    /// The next run's number.
    next: u32,
}

/// A run with its bytes, for [`Runs::known`].
#[derive(Debug)]
struct Known {
    bytes: Box<[u8]>,
    run: Run,
}

/// A run found in or added to [`Runs`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct Run {
    /// Numbers runs with distinct bytes, in the order they were first met.
    pub(crate) number: u32,
    /// Whether it was met before (with the memo as it is now).
    pub(crate) seen: bool,
    /// Where its values are in [`Runs::values`].
    start: u32,
    end: u32,
}

impl Runs {
    /// The remembered run at the start of `rest` (the bytes after a MARK) and its length,
    /// if one added after the same first [`HEAD`] bytes is there whole: its bytes, then
    /// APPENDS. Adds nothing; `None` does not mean that `rest` starts no run.
    pub(crate) fn known(&mut self, rest: &[u8], memo: &Memo) -> Option<(Run, usize)> {
        self.forget_if_changed(memo);
        let candidates = self.heads.get(rest.first_chunk::<HEAD>()?)?;
        let len = |known: &Known| known.bytes.len();
        candidates
            .iter()
            .find(|k| rest.get(len(k)) == Some(&APPENDS) && rest.starts_with(&k.bytes))
            .map(|k| (k.run, len(k)))
    }

    /// The run of the first `len` bytes of `rest` (the bytes after a MARK; memo fetches
    /// only, see [`run_length`]), added if new; `None` if it names a key the memo does not
    /// have (the opcode loop then reports it) or there is no room left to remember it.
    pub(crate) fn find(&mut self, rest: &[u8], len: usize, memo: &Memo) -> Option<Run> {
        self.forget_if_changed(memo);
        let bytes = rest.get(..len)?;
        if let Some(&(number, start, end)) = self.index.get(bytes) {
            return Some(Run {
                number,
                seen: true,
                start,
                end,
            });
        }
        let start = self.values.len();
        for key in keys(bytes) {
            let Some(value) = memo.get(key).filter(|_| self.values.len() < MAX_VALUES) else {
                self.values.truncate(start);
                return None;
            };
            self.values.push(value);
        }
        let number = self.next;
        self.next = self.next.checked_add(1)?;
        let (start, end) = (start as u32, self.values.len() as u32);
        self.index.insert(bytes.into(), (number, start, end));
        let run = Run {
            number,
            seen: false,
            start,
            end,
        };
        if let Some(&head) = rest.first_chunk::<HEAD>() {
            let candidates = self.heads.entry(head).or_default();
            if candidates.len() < PER_HEAD {
                candidates.push(Known {
                    bytes: bytes.into(),
                    run: Run { seen: true, ..run },
                });
            }
        }
        Some(run)
    }

    fn forget_if_changed(&mut self, memo: &Memo) {
        if self.epoch != memo.epoch() {
            self.index.clear();
            self.heads.clear();
            self.values.clear();
            self.epoch = memo.epoch();
        }
    }

    /// The values the fetches of `run` gave.
    pub(crate) fn values(&self, run: &Run) -> &[Value] {
        self.values
            .get(run.start as usize..run.end as usize)
            .unwrap_or_default()
    }
}

/// The length of the run of memo fetches at the start of `bytes` when an APPENDS follows
/// it there, whole: at least one fetch, then `APPENDS`.
pub(crate) fn run_length(bytes: &[u8]) -> Option<usize> {
    // Only the lengths of the fetches matter here, and this is read for every MARK.
    let mut at = 0;
    loop {
        match *bytes.get(at)? {
            BINGET => at += 2,
            LONG_BINGET => at += 5,
            APPENDS if at > 0 => return Some(at),
            _ => return None,
        }
    }
}

/// The memo key of the BINGET or LONG_BINGET at the start of `bytes`, whole, and its
/// length in bytes.
#[inline]
pub(crate) fn memo_fetch(bytes: &[u8]) -> Option<(u64, usize)> {
    match *bytes {
        [BINGET, key, ..] => Some((u64::from(key), 2)),
        [LONG_BINGET, a, b, c, d, ..] => Some((u32::from_le_bytes([a, b, c, d]).into(), 5)),
        _ => None,
    }
}

/// The memo keys a run's bytes fetch.
fn keys(bytes: &[u8]) -> impl Iterator<Item = u64> + '_ {
    let mut rest = bytes;
    std::iter::from_fn(move || {
        let (key, len) = memo_fetch(rest)?;
        rest = &rest[len..];
        Some(key)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::formats::pickle::value::StrId;

    #[test]
    fn a_run_ends_at_its_appends_and_needs_a_fetch() {
        assert_eq!(run_length(b"h\x01j\x02\x00\x00\x00e."), Some(7));
        assert_eq!(run_length(b"e"), None);
        // Cut off, or another opcode inside.
        assert_eq!(run_length(b"h\x01j\x02\x00"), None);
        assert_eq!(run_length(b"h\x01K\x02e"), None);
    }

    #[test]
    fn runs_are_forgotten_when_the_memo_changes_but_never_renumbered() {
        let mut memo = Memo::default();
        memo.put(0, Value::Str(StrId(7)));
        memo.put(1, Value::Str(StrId(8)));
        let mut runs = Runs::default();
        let run = b"h\x01h\x00";
        let first = runs.find(run, run.len(), &memo).unwrap();
        assert!(!first.seen);
        assert_eq!(
            runs.values(&first),
            [Value::Str(StrId(8)), Value::Str(StrId(7))]
        );
        let again = runs.find(run, run.len(), &memo).unwrap();
        assert!(again.seen);
        assert_eq!(again.number, first.number);
        memo.put(1, Value::None);
        let after = runs.find(run, run.len(), &memo).unwrap();
        assert!(!after.seen);
        assert_ne!(after.number, first.number);
        assert_eq!(runs.values(&after), [Value::None, Value::Str(StrId(7))]);
        assert!(
            runs.find(b"h\x05", 2, &memo).is_none(),
            "key 5 is not in the memo"
        );
    }

    #[test]
    fn a_known_run_is_one_added_after_the_same_head_and_followed_by_appends() {
        let mut memo = Memo::default();
        for key in 0..4 {
            memo.put(key, Value::Int(key as i64));
        }
        // 40 fetches (80 bytes, past HEAD), APPENDS, then whatever follows.
        let fetches: Vec<u8> = (0..40).flat_map(|k| [BINGET, k % 4]).collect();
        let rest = [fetches.as_slice(), b"e0"].concat();
        let mut runs = Runs::default();
        assert!(runs.known(&rest, &memo).is_none(), "nothing added yet");
        let run = runs.find(&rest, fetches.len(), &memo).unwrap();
        let (known, len) = runs.known(&rest, &memo).unwrap();
        assert_eq!((known.number, known.seen, len), (run.number, true, 80));
        assert_eq!(runs.values(&known).len(), 40);
        // The same bytes, then one more fetch: a longer run, not this one.
        let longer = [fetches.as_slice(), b"h\x01e"].concat();
        assert!(runs.known(&longer, &memo).is_none());
        // Fewer than HEAD bytes: not enough to pick candidates by.
        assert!(runs.known(b"h\x01h\x02e", &memo).is_none());
        memo.put(3, Value::None);
        assert!(
            runs.known(&rest, &memo).is_none(),
            "forgotten with the memo's change"
        );
    }
}
