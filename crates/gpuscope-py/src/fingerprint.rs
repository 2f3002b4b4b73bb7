//! The memory census's per-record fingerprint, computed in one native call: it reads the
//! identity of every parameter, gradient, buffer and optimizer-state tensor (addresses,
//! byte sizes, object identities) and hashes them, without building Python lists. It lives
//! in the bindings because it reads Python objects; see python/gpuscope/memory/census.py.

use std::hash::{DefaultHasher, Hash, Hasher};

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple, PyType};

/// A hash of `(data_ptr(), nbytes, grad is None)` for each tensor of `tensors` (the grad
/// part only with `with_grad`), in order.
#[pyfunction]
fn tensors_fingerprint(tensors: &Bound<'_, PyList>, with_grad: bool) -> PyResult<u64> {
    let py = tensors.py();
    let mut h = DefaultHasher::new();
    tensors.len().hash(&mut h);
    for t in tensors.iter() {
        let address: u64 = t.call_method0(intern!(py, "data_ptr"))?.extract()?;
        let nbytes: u64 = t.getattr(intern!(py, "nbytes"))?.extract()?;
        (address, nbytes).hash(&mut h);
        if with_grad {
            t.getattr(intern!(py, "grad"))?.is_none().hash(&mut h);
        }
    }
    Ok(h.finish())
}

/// A hash of the identities of the tensors in an optimizer's `state` (a dict of dicts),
/// looking into lists, tuples and dicts, in iteration order.
#[pyfunction]
fn state_fingerprint(state: &Bound<'_, PyDict>, tensor_type: &Bound<'_, PyType>) -> PyResult<u64> {
    let mut h = DefaultHasher::new();
    for per_param in state.values() {
        match per_param.cast::<PyDict>() {
            Ok(values) => {
                values.len().hash(&mut h);
                for v in values.values() {
                    hash_tensors(&v, tensor_type, &mut h)?;
                }
            }
            Err(_) => hash_tensors(&per_param, tensor_type, &mut h)?,
        }
    }
    Ok(h.finish())
}

fn hash_tensors(
    v: &Bound<'_, PyAny>,
    tensor: &Bound<'_, PyType>,
    h: &mut DefaultHasher,
) -> PyResult<()> {
    if v.get_type().is(tensor) || v.is_instance(tensor)? {
        (v.as_ptr() as usize).hash(h);
    } else if let Ok(list) = v.cast::<PyList>() {
        list.len().hash(h);
        for item in list.iter() {
            hash_tensors(&item, tensor, h)?;
        }
    } else if let Ok(tuple) = v.cast::<PyTuple>() {
        tuple.len().hash(h);
        for item in tuple.iter() {
            hash_tensors(&item, tensor, h)?;
        }
    } else if let Ok(dict) = v.cast::<PyDict>() {
        dict.len().hash(h);
        for item in dict.values() {
            hash_tensors(&item, tensor, h)?;
        }
    }
    Ok(())
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(tensors_fingerprint, m)?)?;
    m.add_function(wrap_pyfunction!(state_fingerprint, m)?)
}
