//! A fast filter over Python heap objects, for the memory profiler's `scan="gc"`: picks the
//! tensors out of `gc.get_objects()`. It lives in the bindings because the engine never
//! sees Python objects. It judges each object by its type alone (`type(obj)`, a pointer
//! read), remembering the verdict per type, so it never runs an object's own attribute
//! code: no warnings from deprecated objects, no errors from hostile ones.

use std::collections::HashMap;

use pyo3::prelude::*;
use pyo3::types::{PyList, PyType};

/// The objects of `objects` whose type is `base` or a subclass of it.
#[pyfunction]
fn instances_of<'py>(
    py: Python<'py>,
    objects: &Bound<'py, PyList>,
    base: &Bound<'py, PyType>,
) -> PyResult<Bound<'py, PyList>> {
    let found = PyList::empty(py);
    let mut verdicts: HashMap<usize, bool> = HashMap::new();
    for obj in objects.iter() {
        let ty = obj.get_type();
        let key = ty.as_type_ptr() as usize;
        let is_instance = match verdicts.get(&key) {
            Some(&v) => v,
            None => {
                let v = ty.is_subclass(base).unwrap_or(false);
                verdicts.insert(key, v);
                v
            }
        };
        if is_instance {
            found.append(obj)?;
        }
    }
    Ok(found)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(instances_of, m)?)
}
