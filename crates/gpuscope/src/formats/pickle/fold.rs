//! [`Fold`]: a hook that lets a caller take over containers as they are read, so that a
//! pickle of millions of small records (a snapshot's trace entries) need not be held as a
//! tree before it is turned into the caller's model.

use super::value::{Pickle, StrId, Value};

/// Told of each list, tuple or dict as it is stored in another container: as the value
/// of a key in a dict (SETITEM, SETITEMS, DICT) or as an item of a list (APPEND,
/// APPENDS). Python's pickler writes a container whole before it stores it anywhere, so
/// the container is complete then.
///
/// Returning `Some(token)` takes the container over: the reader stores
/// [`Value::Folded`]`(token)` in its place, frees the container's items, and stores the
/// same `Folded(token)` wherever the container is stored again (the memo hands it out
/// again as often as the pickle asks). A folded
/// container cannot be filled any more (doing so is an error of the pickle), and where it
/// was stored before it was folded it can no longer be read (`as_seq` and `as_dict` give
/// `None`). Tokens mean whatever the fold makes of them.
pub trait Fold {
    /// Whether this fold ever takes anything over; `false` lets the reader skip asking.
    const FOLDS: bool = true;

    /// Whether an item the fold declined as it was stored into a list would be declined
    /// again. When true, a list filled by a run of memo references met before (MARK,
    /// memo fetches, APPENDS, with the memo unchanged since) takes that run's items without
    /// their being offered again (torch's lists of frames are such runs, and repeat).
    const ITEMS_ONCE: bool = false;

    /// Whether [`Fold::stop_before`] may ever answer `true`; `false` lets the reader skip
    /// asking.
    const STOPS: bool = false;

    /// `value` (a list, tuple or dict, complete and readable in `pickle`) is being stored
    /// under `key` in a dict, or appended to a list when `key` is `None`.
    fn fold(&mut self, pickle: &Pickle, key: Option<Value>, value: Value) -> Option<u32>;

    /// Whether to end the read before `key`, a string just read (not fetched from the
    /// memo) where the next key of the pickle's outermost dict goes. `true` stores the
    /// pairs before it in that dict, which becomes the result, and only reads past the
    /// rest of the input (`scan.rs`: every opcode known and not refused, a STOP at the
    /// end, nothing built): a caller that needs the first keys of a large pickle (a
    /// snapshot's `segments`) does not pay for the rest. A string pushed as the second
    /// item of a tuple or list being built right there is asked about too (a stack
    /// machine cannot tell the two apart without reading ahead), so stop only before a
    /// key whose value and what follows it are not needed.
    fn stop_before(&mut self, pickle: &Pickle, key: StrId) -> bool {
        let _ = (pickle, key);
        false
    }

    /// For a list that one run of memo references filled when it was new, and that has
    /// not changed since (`run` numbers the pickle's distinct runs; lists of one run hold
    /// the same items): the token [`Fold::fold`] gave an earlier list of the run stored
    /// under an equal key, if the fold kept it. Asked before the list's items are read
    /// (they may not be there yet); `None` has the reader complete the list and ask `fold`,
    /// then tell [`Fold::folded_run`] what it answered.
    fn fold_run(&mut self, key: Option<Value>, run: u32) -> Option<u32> {
        let _ = (key, run);
        None
    }

    /// [`Fold::fold`] took over a list of run `run`, stored under `key`, as `token`.
    fn folded_run(&mut self, key: Option<Value>, run: u32, token: u32) {
        let _ = (key, run, token);
    }
}

/// The fold of [`read`](super::read): takes nothing over.
pub(crate) struct NoFold;

impl Fold for NoFold {
    const FOLDS: bool = false;

    fn fold(&mut self, _: &Pickle, _: Option<Value>, _: Value) -> Option<u32> {
        None
    }
}
