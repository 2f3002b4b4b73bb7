//! Helpers shared by the engine's integration tests.

use std::path::PathBuf;

/// `../shared/data/<rel>` beside the repository, where the real GPU artifacts live.
pub fn shared_data(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/data")
        .join(rel)
}
