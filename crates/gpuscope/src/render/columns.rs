//! Rows as columns, for pandas: each row a JSON object whose nested objects are
//! flattened (`allocator.reserved_bytes`, `losses.lm`), each key a column, `null` where a
//! row lacks it; arrays stay one value. The Python package hands the columns to pandas in
//! one piece (`gpuscope.Run`), instead of building a frame row by row.

use std::collections::HashMap;

use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::{Map, Value};

/// Named columns of equal length, in the order their keys first appeared.
#[derive(Debug, Default, Clone)]
pub struct Columns {
    names: Vec<String>,
    index: HashMap<String, usize>,
    values: Vec<Vec<Value>>,
    rows: usize,
}

impl Columns {
    /// Appends `row` (an object; anything else is one column, `value`), flattening the
    /// nested objects but those under a key in `whole`.
    pub fn push(&mut self, row: Value, whole: &[&str]) {
        let mut flat = Vec::new();
        match row {
            Value::Object(map) => flatten("", map, whole, &mut flat),
            other => flat.push(("value".to_owned(), other)),
        }
        for (name, value) in flat {
            let k = match self.index.get(&name) {
                Some(&k) => k,
                None => {
                    self.index.insert(name.clone(), self.names.len());
                    self.names.push(name);
                    self.values.push(vec![Value::Null; self.rows]);
                    self.values.len() - 1
                }
            };
            self.values[k].push(value);
        }
        self.rows += 1;
        for column in &mut self.values {
            column.resize(self.rows, Value::Null);
        }
    }

    /// Appends every row of `rows` (see [`Columns::push`]).
    pub fn extend<T: Serialize>(&mut self, rows: impl IntoIterator<Item = T>, whole: &[&str]) {
        for row in rows {
            self.push(serde_json::to_value(row).unwrap_or(Value::Null), whole);
        }
    }

    /// The number of rows.
    pub fn len(&self) -> usize {
        self.rows
    }

    /// True without rows.
    pub fn is_empty(&self) -> bool {
        self.rows == 0
    }
}

fn flatten(prefix: &str, map: Map<String, Value>, whole: &[&str], out: &mut Vec<(String, Value)>) {
    for (key, value) in map {
        let name = if prefix.is_empty() {
            key
        } else {
            format!("{prefix}.{key}")
        };
        match value {
            Value::Object(inner) if !whole.contains(&name.as_str()) => {
                flatten(&name, inner, whole, out)
            }
            other => out.push((name, other)),
        }
    }
}

impl Serialize for Columns {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(self.names.len()))?;
        for (name, values) in self.names.iter().zip(&self.values) {
            map.serialize_entry(name, values)?;
        }
        map.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn nested_objects_become_columns_and_missing_keys_null() {
        let mut c = Columns::default();
        c.push(
            json!({"iteration": 0, "losses": {"lm": 2.5}, "keep": {"a": 1}}),
            &["keep"],
        );
        c.push(
            json!({"iteration": 50, "losses": {"lm": 2.0, "aux": 0.1}, "list": [1, 2]}),
            &["keep"],
        );
        assert_eq!(
            serde_json::to_value(&c).unwrap(),
            json!({
                "iteration": [0, 50],
                "losses.lm": [2.5, 2.0],
                "keep": [{"a": 1}, null],
                "losses.aux": [null, 0.1],
                "list": [null, [1, 2]],
            })
        );
        assert_eq!(c.len(), 2);
    }
}
