//! Training-health events: a non-finite loss or gradient found by the per-iteration check.
//! Serialised as one line of `profiles/nonfinite[.rank<R>].jsonl` (docs/run-dir.md).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// What the check found at one iteration where a loss component or the gradient norm was
/// NaN or infinite.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NonfiniteEvent {
    /// Always `"nonfinite"`: the kind of the record.
    pub kind: String,
    /// Training iteration.
    pub iteration: i64,
    /// Unix seconds.
    pub time: f64,
    /// Rank of the process.
    #[serde(default)]
    pub rank: u32,
    /// Loss components at this iteration (`total` included when given).
    #[serde(with = "super::spelled::map")]
    pub losses: BTreeMap<String, f64>,
    /// The non-finite components in the order the training computed them (the order of
    /// its dict), `total` last.
    pub nonfinite_components: Vec<String>,
    /// Global L2 norm of the gradients; `null` when gradients were not checked.
    #[serde(with = "super::spelled::option")]
    pub grad_norm: Option<f64>,
    /// Parameters whose gradient holds NaN or infinite values, in the model's order.
    pub nonfinite_parameters: Vec<NonfiniteParameter>,
    /// Parameters with a gradient that were checked.
    pub parameters_checked: u64,
    /// The loss components of the iterations before, oldest first.
    pub history: Vec<LossHistory>,
    /// What training was told to do: `raise`, `skip` (the step's gradients were dropped)
    /// or `continue`.
    pub action: String,
    /// Consecutive checked iterations that were non-finite, this one included.
    pub streak: u64,
    /// The human report written for this event, if one was.
    pub report: Option<String>,
}

impl NonfiniteEvent {
    /// The loss component that went non-finite first (`total` only when no component
    /// did): what the training computed, not the sum of it.
    pub fn first_component(&self) -> Option<&str> {
        self.nonfinite_components
            .iter()
            .find(|c| *c != "total")
            .or(self.nonfinite_components.first())
            .map(String::as_str)
    }
}

/// One parameter's non-finite gradient.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NonfiniteParameter {
    /// Qualified name (`encoder.fc1.weight`).
    pub name: String,
    /// Elements that are NaN.
    pub nan: u64,
    /// Elements that are +inf or -inf.
    pub inf: u64,
    /// Elements in the gradient.
    pub elements: u64,
    /// Whether `nan` and `inf` are counts. `false` when the check was read at the next
    /// record, after the gradients were gone: then only the gradient's norm was kept, and
    /// `nan` / `inf` are 1 for the kind it shows (a NaN norm, an infinite one) and 0
    /// otherwise — "some", not how many.
    #[serde(default = "counted_by_default")]
    pub counted: bool,
}

/// Events written before checks could be read late always counted.
fn counted_by_default() -> bool {
    true
}

/// Loss components of one earlier iteration.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LossHistory {
    /// Training iteration.
    pub iteration: i64,
    /// Components by name.
    #[serde(with = "super::spelled::map")]
    pub losses: BTreeMap<String, f64>,
}
