//! What a non-finite event says: which loss component went first, whether the loss was
//! diverging before it or a NaN appeared out of nowhere, and where to look next.

use serde::Serialize;

use crate::model::health::NonfiniteEvent;

/// Growth of the total loss over the remembered iterations above which the event is
/// called a divergence rather than a sudden NaN.
const DIVERGING_GROWTH: f64 = 100.0;

/// How the training got to the non-finite values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Onset {
    /// The loss grew by orders of magnitude over the iterations before.
    Diverging,
    /// A loss component became NaN or infinite without growing first.
    Sudden,
    /// The losses were finite; the gradients were not (a backward pass made them).
    GradientsOnly,
}

/// The reading of one event.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Diagnosis {
    /// The component that went non-finite first, if a loss did.
    pub first_component: Option<String>,
    /// How it came about.
    pub onset: Onset,
    /// The total loss (or the first component) at the oldest remembered iteration and at
    /// the last finite one, when the history has them.
    pub growth: Option<(f64, f64)>,
    /// What to do, in a sentence or two.
    pub advice: String,
}

/// An event with its reading, as `gpuscope report` lists it: the first of a streak of
/// consecutive non-finite iterations, standing for the whole streak.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DiagnosedEvent {
    /// The event as recorded.
    #[serde(flatten)]
    pub event: NonfiniteEvent,
    /// What it says.
    #[serde(flatten)]
    pub diagnosis: Diagnosis,
    /// The last iteration of the streak it starts (its own when alone).
    pub last_iteration: i64,
    /// Events recorded in the streak.
    pub events: u64,
}

/// The streaks of a run's events (sorted by iteration), each read from its first event.
pub fn diagnose_all(events: &[NonfiniteEvent]) -> Vec<DiagnosedEvent> {
    let mut out: Vec<DiagnosedEvent> = Vec::new();
    for e in events {
        match out.last_mut() {
            Some(open) if e.streak > 1 && e.streak == open.event.streak + open.events => {
                open.last_iteration = e.iteration;
                open.events += 1;
            }
            _ => out.push(DiagnosedEvent {
                diagnosis: diagnose(e),
                event: e.clone(),
                last_iteration: e.iteration,
                events: 1,
            }),
        }
    }
    out
}

/// Reads `event`.
pub fn diagnose(event: &NonfiniteEvent) -> Diagnosis {
    let first = event.first_component().map(str::to_owned);
    let watched = first.clone().unwrap_or_else(|| "total".to_owned());
    let finite: Vec<f64> = event
        .history
        .iter()
        .filter_map(|h| h.losses.get(&watched).or(h.losses.get("total")))
        .copied()
        .filter(|v| v.is_finite())
        .collect();
    let growth = match (finite.first(), finite.last()) {
        (Some(&a), Some(&b)) if finite.len() >= 2 => Some((a, b)),
        _ => None,
    };
    let diverging = growth.is_some_and(|(a, b)| a.abs() > 0.0 && (b / a).abs() >= DIVERGING_GROWTH);
    let onset = if first.is_none() {
        Onset::GradientsOnly
    } else if diverging {
        Onset::Diverging
    } else {
        Onset::Sudden
    };
    let advice = match onset {
        Onset::Diverging => format!(
            "{watched} grew {}× over the last {} iterations before it overflowed: the \
             training diverged. Lower the learning rate, add warm-up, or clip gradients \
             (record_gradients(it, clip_max_norm=...) shows how often clipping would bite).",
            factor(growth.map_or(0.0, |(a, b)| (b / a).abs())),
            event.history.len()
        ),
        Onset::Sudden => format!(
            "{watched} became non-finite without growing first: look in its computation for \
             log or sqrt of a value ≤ 0, a division by zero, or an fp16 overflow. \
             gpuscope.find_nonfinite(step_fn, batch) re-runs the step and names the module \
             and the autograd node."
        ),
        Onset::GradientsOnly => "The losses were finite but the gradients were not: a backward \
             pass produced them (sqrt or pow at 0, a division by a tiny number, an fp16 \
             overflow). gpuscope.find_nonfinite(step_fn, batch) names the autograd node."
            .to_owned(),
    };
    Diagnosis {
        first_component: first,
        onset,
        growth,
        advice,
    }
}

/// `2000`, or `2.5e9` for the factors of a divergence.
fn factor(x: f64) -> String {
    if x < 1e6 {
        format!("{x:.0}")
    } else {
        format!("{x:.1e}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::health::LossHistory;

    fn event(components: &[&str], totals: &[f64]) -> NonfiniteEvent {
        NonfiniteEvent {
            nonfinite_components: components.iter().map(|c| c.to_string()).collect(),
            history: totals
                .iter()
                .enumerate()
                .map(|(i, &t)| LossHistory {
                    iteration: i as i64,
                    losses: [("total".to_owned(), t)].into(),
                })
                .collect(),
            ..NonfiniteEvent::default()
        }
    }

    #[test]
    fn growth_by_orders_of_magnitude_is_a_divergence() {
        let d = diagnose(&event(&["total"], &[1.0, 30.0, 2000.0]));
        assert_eq!(d.onset, Onset::Diverging);
        assert_eq!(d.growth, Some((1.0, 2000.0)));
        assert!(d.advice.contains("2000×"), "{}", d.advice);
    }

    #[test]
    fn a_nan_from_a_flat_loss_is_sudden_and_names_the_component() {
        let d = diagnose(&event(&["depth", "total"], &[1.0, 0.9, 0.95]));
        assert_eq!(d.onset, Onset::Sudden);
        assert_eq!(d.first_component.as_deref(), Some("depth"));
    }

    #[test]
    fn a_streak_is_listed_once() {
        let at = |iteration, streak| NonfiniteEvent {
            iteration,
            streak,
            ..event(&["total"], &[])
        };
        let listed = diagnose_all(&[at(3, 1), at(4, 2), at(5, 3), at(9, 1)]);
        let spans: Vec<(i64, i64, u64)> = listed
            .iter()
            .map(|d| (d.event.iteration, d.last_iteration, d.events))
            .collect();
        assert_eq!(spans, [(3, 5, 3), (9, 9, 1)]);
    }

    #[test]
    fn finite_losses_mean_the_backward_pass_did_it() {
        let d = diagnose(&event(&[], &[1.0]));
        assert_eq!(d.onset, Onset::GradientsOnly);
        assert_eq!(d.growth, None);
    }
}
