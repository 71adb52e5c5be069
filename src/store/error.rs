//! Store errors, split by what the caller should do about them.

/// An error from the preference store.
///
/// Not-found is not an error: lookups return `Option`. [`StoreError::is_retryable`] is what the
/// ingest loop acts on: a retryable error naks the message for redelivery, a permanent one
/// dead-letters it.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// Redis could not be reached or the command failed in transit; try again later.
    #[error("redis unavailable: {0}")]
    Unavailable(#[source] redis::RedisError),
    /// Redis answered with an error it will give again (bad query, wrong type, module missing).
    #[error("redis rejected the command: {0}")]
    Rejected(#[source] redis::RedisError),
    /// The caller's input breaks a limit or a format rule; names what and why.
    #[error("invalid {field}: {reason}")]
    InvalidInput { field: &'static str, reason: String },
    /// The index exists with a schema this build cannot use (e.g. another vector DIM).
    #[error("index {index} does not match the configuration: {reason}")]
    IndexMismatch { index: String, reason: String },
    /// The memory holds keys of a layout this build does not read (an earlier one, until
    /// `persona-prefs index migrate` has moved them; or a later one).
    #[error("{reason}")]
    LayoutMismatch { reason: String },
    /// A stored record or a search reply did not have the expected shape.
    #[error("unexpected reply from redis: {0}")]
    UnexpectedReply(String),
    /// A write was refused because another worker now holds the persona's lock (fencing).
    #[error("stale fencing token for persona {persona_id}: another worker holds the lock")]
    Fenced { persona_id: String },
    /// The persona's vector set was made under another size or quantisation than configured
    /// (an embedder or `store.vector_quantisation` changed without migrating); the write was
    /// refused whole.
    #[error(
        "the vector set of persona {persona_id} does not fit the configuration ({detail}); run `persona-prefs index migrate`"
    )]
    VectorSetMismatch { persona_id: String, detail: String },
    /// An effect record exists under the write's effect id but names another preference: it is
    /// not this write's, and nothing was written (permanent: dead-letter and look).
    #[error("effect record mismatch for persona {persona_id}: {detail}")]
    EffectMismatch { persona_id: String, detail: String },
    /// The record changed between reading its timeline and writing what it replayed to (only
    /// a writer that skipped the persona lock can cause this); read and replay again.
    #[error("preference {preference_id} of persona {persona_id} changed while being written")]
    Conflict {
        persona_id: String,
        preference_id: String,
    },
    /// A write reached its master but not `wanted` replicas in time (`redis.min_replicas_acked`):
    /// a failover now could lose it, so it does not count as stored yet.
    #[error("a write for persona {persona_id} reached {acked} of {wanted} replicas in time")]
    NotReplicated {
        persona_id: String,
        acked: u64,
        wanted: u64,
    },
}

impl StoreError {
    /// True when the same call may succeed later without any change by the caller.
    pub fn is_retryable(&self) -> bool {
        match self {
            StoreError::Unavailable(_)
            | StoreError::Fenced { .. }
            | StoreError::Conflict { .. }
            | StoreError::NotReplicated { .. } => true,
            StoreError::Rejected(error) => is_transient(error),
            _ => false,
        }
    }

    pub(crate) fn invalid(field: &'static str, reason: impl Into<String>) -> StoreError {
        StoreError::InvalidInput {
            field,
            reason: reason.into(),
        }
    }
}

fn is_transient(error: &redis::RedisError) -> bool {
    // LOADING, BUSY, TRYAGAIN, MASTERDOWN and the like: the server will answer differently soon.
    matches!(
        error.kind(),
        redis::ErrorKind::Server(redis::ServerErrorKind::BusyLoading)
            | redis::ErrorKind::Server(redis::ServerErrorKind::TryAgain)
            | redis::ErrorKind::Server(redis::ServerErrorKind::MasterDown)
    )
}

impl From<redis::RedisError> for StoreError {
    fn from(error: redis::RedisError) -> StoreError {
        if error.is_io_error()
            || error.is_timeout()
            || error.is_connection_dropped()
            || error.is_connection_refusal()
            || is_transient(&error)
        {
            StoreError::Unavailable(error)
        } else if error.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::ResponseError)
            || error.code().is_some()
        {
            StoreError::Rejected(error)
        } else {
            StoreError::Unavailable(error)
        }
    }
}
