//! Where each file of a run directory lives, with and without a rank (docs/run-dir.md).

use std::path::{Path, PathBuf};

/// `profiles/memory.jsonl`, or `profiles/memory.rank<R>.jsonl` with several ranks.
pub fn memory_jsonl(run_dir: &Path, rank: Option<u32>) -> PathBuf {
    let name = match rank {
        Some(r) => format!("memory.rank{r}.jsonl"),
        None => "memory.jsonl".to_owned(),
    };
    run_dir.join("profiles").join(name)
}

/// The variable through which `gpuscope run` and `gpuscope nsys` hand the run directory
/// to the training they start (and gpuscope inside it reads it).
pub const RUN_DIR_VAR: &str = "GPUSCOPE_RUN_DIR";

/// The run directory a command was given (`--logdir`), else `$GPUSCOPE_RUN_DIR` when set
/// and not empty; `None` leaves the default to the caller.
pub fn given_run_dir(given: Option<&Path>) -> Option<PathBuf> {
    given.map(Path::to_path_buf).or_else(|| {
        std::env::var_os(RUN_DIR_VAR)
            .filter(|dir| !dir.is_empty())
            .map(PathBuf::from)
    })
}

/// `nonfinite.jsonl`, or `nonfinite.rank<R>.jsonl` with several ranks.
pub fn nonfinite_jsonl_name(rank: Option<u32>) -> String {
    match rank {
        Some(r) => format!("nonfinite.rank{r}.jsonl"),
        None => "nonfinite.jsonl".to_owned(),
    }
}

/// `profiles/nonfinite[.rank<R>].jsonl`: the non-finite events of a process.
pub fn nonfinite_jsonl(run_dir: &Path, rank: Option<u32>) -> PathBuf {
    run_dir.join("profiles").join(nonfinite_jsonl_name(rank))
}

/// `profiles/nonfinite.iter<N>[.rank<R>].txt`: the human report of one event.
pub fn nonfinite_report(run_dir: &Path, iteration: i64, rank: Option<u32>) -> PathBuf {
    let name = match rank {
        Some(r) => format!("nonfinite.iter{iteration}.rank{r}.txt"),
        None => format!("nonfinite.iter{iteration}.txt"),
    };
    run_dir.join("profiles").join(name)
}

/// The rank of an out-of-memory report's file name (`oom.rank<R>.<stamp>.txt` → `Some(R)`,
/// `oom.<stamp>.txt` → `Some(None)`), `None` for other files. Written by
/// `gpuscope.oom_guard` into `snapshots/`.
pub fn oom_report_rank(name: &str) -> Option<Option<u32>> {
    let stem = name.strip_prefix("oom.")?.strip_suffix(".txt")?;
    Some(
        stem.strip_prefix("rank")
            .and_then(|rest| rest.split_once('.'))
            .and_then(|(rank, _)| rank.parse().ok()),
    )
}

/// The rank and iteration of an allocator snapshot's file name that `MemoryProfiler(
/// snapshot_at=[N])` writes into `snapshots/` (`rank<R>.iter<N>.pickle` → `(Some(R), N)`,
/// `iter<N>.pickle` → `(None, N)`); `None` for other files (`oom.*.pickle` among them).
pub fn snapshot_iteration(name: &str) -> Option<(Option<u32>, i64)> {
    let stem = name.strip_suffix(".pickle")?;
    let (rank, iter) = match stem.strip_prefix("rank") {
        Some(rest) => {
            let (rank, iter) = rest.split_once('.')?;
            (Some(rank.parse().ok()?), iter)
        }
        None => (None, stem),
    };
    Some((rank, iter.strip_prefix("iter")?.parse().ok()?))
}

/// `profiles/tensor_profile_<YYYYmmdd_HHMMSS>[.rank<R>].log`.
pub fn text_log(run_dir: &Path, stamp: &str, rank: Option<u32>) -> PathBuf {
    let name = match rank {
        Some(r) => format!("tensor_profile_{stamp}.rank{r}.log"),
        None => format!("tensor_profile_{stamp}.log"),
    };
    run_dir.join("profiles").join(name)
}

/// `tensorboard/`, or `tensorboard/rank<R>/`.
pub fn tensorboard_dir(run_dir: &Path, rank: Option<u32>) -> PathBuf {
    let dir = run_dir.join("tensorboard");
    match rank {
        Some(r) => dir.join(format!("rank{r}")),
        None => dir,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranked_names_follow_the_run_dir_layout() {
        let run = Path::new("runs/x");
        assert_eq!(
            memory_jsonl(run, Some(3)),
            Path::new("runs/x/profiles/memory.rank3.jsonl")
        );
        assert_eq!(
            memory_jsonl(run, None),
            Path::new("runs/x/profiles/memory.jsonl")
        );
        assert_eq!(
            text_log(run, "20260128_140205", Some(1)),
            Path::new("runs/x/profiles/tensor_profile_20260128_140205.rank1.log")
        );
        assert_eq!(snapshot_iteration("iter30.pickle"), Some((None, 30)));
        assert_eq!(snapshot_iteration("rank2.iter7.pickle"), Some((Some(2), 7)));
        for other in [
            "oom.20261126_065229.pickle",
            "iter30.txt",
            "rankx.iter3.pickle",
        ] {
            assert_eq!(snapshot_iteration(other), None, "{other}");
        }
        assert_eq!(
            tensorboard_dir(run, Some(0)),
            Path::new("runs/x/tensorboard/rank0")
        );
    }
}
