//! An erasure as the rules see it: who was erased and from when on their words no longer count.

use crate::timestamp::Timestamp;

/// A user erased from one persona's memory (`purge_user`): conversations with them up to
/// `erased_at` are no longer evidence, and ingest writes `pseudonym` wherever such a
/// conversation would have named them.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Erasure {
    pub pseudonym: String,
    /// RFC 3339, as stored (read by [`Erasure::covers`]).
    pub erased_at: String,
}

impl Erasure {
    /// Whether words written at `at` belong to the erased past. A stored erasure time that
    /// cannot be read counts as covering everything: erasure errs on the side of forgetting.
    pub fn covers(&self, at: Timestamp) -> bool {
        match Timestamp::parse(&self.erased_at) {
            Ok(erased) => at <= erased,
            Err(_) => true,
        }
    }
}
