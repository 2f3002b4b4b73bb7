//! [`Fold`]: a hook that lets a caller take over containers as they are read, so that a
//! pickle of millions of small records (a snapshot's trace entries) need not be held as a
//! tree before it is turned into the caller's model.

use super::value::{Pickle, Value};

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

    /// `value` (a list, tuple or dict, complete and readable in `pickle`) is being stored
    /// under `key` in a dict, or appended to a list when `key` is `None`.
    fn fold(&mut self, pickle: &Pickle, key: Option<Value>, value: Value) -> Option<u32>;
}

/// The fold of [`read`](super::read): takes nothing over.
pub(crate) struct NoFold;

impl Fold for NoFold {
    const FOLDS: bool = false;

    fn fold(&mut self, _: &Pickle, _: Option<Value>, _: Value) -> Option<u32> {
        None
    }
}
