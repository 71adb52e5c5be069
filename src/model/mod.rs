//! The domain: what a persona's preference is, and the pure rules of how what it says changes
//! it. Every stage depends on this module; it depends on none of them (no Redis, no NATS, no
//! models), so its rules are tested by tables alone.
//!
//! - [`preference`]: the preference, its stance, provenance, versions and reinforcements.
//! - [`timeline`]: a preference's past as a function of what was said and when, whatever the
//!   order the words arrived in.

pub mod preference;
pub mod timeline;

pub use preference::{
    HistoryEntry, InheritedView, Preference, Provenance, Reinforcement, ScoredPreference, Stance,
};
