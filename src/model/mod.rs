//! The domain: what a persona's preference is, and the pure rules of how what it says changes
//! it. Every stage depends on this module; it depends on none of them (no Redis, no NATS, no
//! models; `tests/architecture.rs` holds it to that), so its rules are tested by tables alone.
//!
//! - [`preference`]: the preference, its stance, provenance, versions and reinforcements;
//! - [`opinion`]: an opinion the persona voiced, as an extractor reads it;
//! - [`erasure`], [`verdict`]: an erased user, and the LLM's verdict on a grey-zone match, as
//!   the rules take them;
//! - [`decide`]: what one opinion does to memory (echo, erased, add, or voice a preference);
//! - [`timeline`]: a preference's past as a function of what was said and when, whatever the
//!   order the words arrived in;
//! - [`topic`]: when two wordings name the same topic, by text.

pub mod decide;
pub mod erasure;
pub mod opinion;
pub mod preference;
pub mod timeline;
pub mod topic;
pub mod verdict;

pub use erasure::Erasure;
pub use opinion::ExtractedOpinion;
pub use preference::{
    HistoryEntry, InheritedView, Preference, Provenance, Reinforcement, ScoredPreference, Stance,
};
pub use verdict::Verdict;
