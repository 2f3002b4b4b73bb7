//! The verdicts of one rank that the gate can fail on, each from the analysis that
//! `gpuscope report` gives it: the leak verdict ([`leak::analyze`]), the allocator verdict
//! ([`fragmentation`]), the non-finite streaks ([`diagnose_all`]) and the out-of-memory
//! errors (caught by `gpuscope.oom_guard`, or counted by the allocator's `num_ooms`).

use crate::analysis::report::allocator_verdict::{Fragmentation, Verdict};
use crate::analysis::report::leak;
use crate::analysis::report::nonfinite::diagnose_all;
use crate::model::compare::{Check, CheckOutcome};
use crate::model::memory::RankRecords;
use crate::model::units::ByteUnit;

/// What each verdict says of `rank`, in [`Check::ALL`] order; `None` for a verdict the
/// records cannot give (fragmentation without allocator figures). `allocator` is the
/// allocator verdict of the rank's records.
pub fn findings(
    rank: &RankRecords,
    allocator: Option<&Fragmentation>,
) -> Vec<Option<CheckOutcome>> {
    Check::ALL
        .iter()
        .map(|check| match check {
            Check::Nonfinite => Some(nonfinite(rank)),
            Check::Leak => {
                // Too few records for the rule: not checked, not "no leak".
                let verdict = leak::analyze(&rank.records).leak;
                verdict.judged.then_some(CheckOutcome {
                    found: verdict.suspected,
                    detail: verdict.reason,
                })
            }
            Check::Oom => Some(oom(rank, allocator)),
            Check::Fragmentation => allocator.map(|a| CheckOutcome {
                found: a.verdict == Verdict::Fragmented,
                detail: a.reason.clone(),
            }),
        })
        .collect()
}

fn nonfinite(rank: &RankRecords) -> CheckOutcome {
    let streaks = diagnose_all(&rank.nonfinite);
    let Some(first) = streaks.first() else {
        return CheckOutcome {
            found: false,
            detail: "no non-finite values recorded".to_owned(),
        };
    };
    let what = first
        .diagnosis
        .first_component
        .as_ref()
        .map_or("the gradients".to_owned(), |c| {
            format!("loss component {c}")
        });
    let iterations = if first.last_iteration > first.event.iteration {
        format!(
            "iterations {}–{}",
            first.event.iteration, first.last_iteration
        )
    } else {
        format!("iteration {}", first.event.iteration)
    };
    let more = match streaks.len() {
        1 => String::new(),
        n => format!(" ({n} streaks)"),
    };
    CheckOutcome {
        found: true,
        detail: format!("{iterations}{more}: {what} went non-finite first"),
    }
}

fn oom(rank: &RankRecords, allocator: Option<&Fragmentation>) -> CheckOutcome {
    let counted = allocator.map_or(0, |a| a.ooms.unwrap_or(0) + a.impossible_ooms);
    let caught = rank.ooms.len() as u64;
    let n = counted.max(caught);
    if n == 0 {
        return CheckOutcome {
            found: false,
            detail: "no out-of-memory error".to_owned(),
        };
    }
    let first = rank.ooms.first().map_or(String::new(), |e| {
        let at = e
            .iteration
            .map_or(String::new(), |i| format!(" at iteration {i}"));
        let asked = match (e.requested_bytes, e.device_total_bytes) {
            (Some(asked), Some(total)) => format!(
                ": {:.1} GiB asked of a {:.1} GiB device{}",
                ByteUnit::Gib.of(asked),
                ByteUnit::Gib.of(total),
                if e.impossible {
                    " (more than it has)"
                } else {
                    ""
                }
            ),
            (Some(asked), None) => format!(": {:.1} GiB asked", ByteUnit::Gib.of(asked)),
            _ => String::new(),
        };
        format!(", the first{at}{asked}")
    });
    CheckOutcome {
        found: true,
        detail: format!(
            "{n} out-of-memory error{}{first}",
            if n == 1 { "" } else { "s" }
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::report::allocator_verdict::fragmentation;
    use crate::model::memory::{AllocatorStats, MemoryRecord};
    use crate::model::oom::OomEvent;

    fn rank(records: Vec<MemoryRecord>, ooms: Vec<OomEvent>) -> RankRecords {
        RankRecords {
            rank: 0,
            files: Vec::new(),
            records,
            skipped: Vec::new(),
            nonfinite: Vec::new(),
            ooms,
        }
    }

    #[test]
    fn an_oom_is_caught_or_counted_and_cpu_has_no_fragmentation_verdict() {
        let at = |iteration: i64, num_ooms: u64| MemoryRecord {
            iteration,
            time: iteration as f64,
            allocator: Some(AllocatorStats {
                num_ooms: Some(num_ooms),
                num_alloc_retries: Some(0),
                ..AllocatorStats::default()
            }),
            ..MemoryRecord::default()
        };
        let counted = rank(vec![at(0, 0), at(10, 2)], Vec::new());
        let a = fragmentation(&counted.records, &[]);
        let f = findings(&counted, a.as_ref());
        let oom = f[Check::ALL.iter().position(|c| *c == Check::Oom).unwrap()]
            .as_ref()
            .unwrap();
        assert!(oom.found);
        assert!(
            oom.detail.starts_with("2 out-of-memory errors"),
            "{}",
            oom.detail
        );

        let caught = OomEvent::new(
            "snapshots/oom.x.txt".into(),
            Some(5),
            Some(5.0),
            Some(1 << 44),
            Some(1 << 37),
            "CUDA out of memory.".into(),
            None,
        );
        let cpu = rank(vec![MemoryRecord::default()], vec![caught]);
        let f = findings(&cpu, None);
        let oom = f[Check::ALL.iter().position(|c| *c == Check::Oom).unwrap()]
            .as_ref()
            .unwrap();
        assert!(
            oom.found && oom.detail.contains("at iteration 5"),
            "{}",
            oom.detail
        );
        let fragmentation = Check::ALL
            .iter()
            .position(|c| *c == Check::Fragmentation)
            .unwrap();
        assert_eq!(f[fragmentation], None);
        assert!(!f[0].as_ref().unwrap().found, "no non-finite events");
    }
}
