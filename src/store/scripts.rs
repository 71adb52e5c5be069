//! Lua scripts: every read-modify-write of a preference runs inside Redis as one script, so
//! concurrent writers (tasks or processes) cannot lose updates, and the idempotency record and
//! the lock check are part of the same atomic step as the write. The Lua lives in `scripts/`,
//! one `.lua` file a script (compiled in); this file says what each takes and answers.
//!
//! Shared calling convention of the write scripts (every key declared, all in the persona's
//! hash slot, see `keys.rs`):
//! - `KEYS[1]` preference hash, `KEYS[2]` effect records (hash), `KEYS[3]` persona lock,
//!   `KEYS[4]` vector set, `KEYS[5]` strongest (sorted set), `KEYS[6]` about-users (sorted
//!   set), `KEYS[7]` every preference id (set);
//! - `ARGV[1]` the effect id ("" = none), `ARGV[2]` its TTL in seconds (0: none), `ARGV[3]`
//!   the lock token the caller holds ("" = no lock required), `ARGV[4]` the vector set's
//!   quantisation (`Q8`, `NOQUANT`, `BIN`) and build effort (`"Q8 100"`), `ARGV[5]` the byte
//!   length of a vector that fits;
//! - operation-specific arguments from `ARGV[6]` on.
//!
//! A script answers with an error reply whose code is [`FENCED`] when the caller's lock is no
//! longer held (the write is refused rather than racing a newer holder), and [`MISFIT`] when
//! the persona's vector set does not fit the configuration (refused before anything is written).
//!
//! Each script reads a record once (`record.lua`: an active preference's whole record is its
//! element's attributes in the persona's vector set, any other's is its hash), changes it, and
//! writes it back where it then belongs in the same atomic step (`sync`, in `guard.lua`),
//! bringing the persona's structures in step: an active preference is in the vector set (its
//! attributes the record, which holds what injection reads under short names), in `strongest`
//! by its strength, and in `about` and the user's own vector set (`KEYS[6]:<user>`:
//! undeclared, as its name comes from the record, but in the persona's hash slot) under each
//! related user; a retracted one is in none of them, and its hash holds the record and its
//! vector. `ARGV[4]` carries the quantisation and the build effort (`VADD`'s `EF`), then
//! " hash" when every record keeps its hash too (the opt-in full-text index, which
//! RediSearch builds from hashes). Reads come first, then writes.

use std::sync::LazyLock;

use redis::Script;

/// The error code a script answers with when the caller's lock is no longer held.
pub const FENCED: &str = "FENCED";
/// The error code a script answers with when the persona's vector set was made under another
/// size or quantisation than configured.
pub const MISFIT: &str = "MISFIT";
/// The error code a script answers with when the write's effect record names another
/// preference than the one written.
pub const EFFECT: &str = "EFFECT";
/// The error code [`APPLY`] answers with when the record changed since its timeline was read.
pub const CONFLICT: &str = "CONFLICT";

/// A write script: `scripts/record.lua` (where a record lives and its encodings),
/// `scripts/guard.lua` (the lock check, the vector set's fit, effect records, list helpers and
/// `sync`), then the script's own file. Each script short-circuits on its own effect record,
/// because what it answers then differs.
macro_rules! write_script {
    ($file:literal) => {
        LazyLock::new(|| {
            Script::new(
                &concat!(
                    include_str!("scripts/record.lua"),
                    include_str!("scripts/guard.lua"),
                    include_str!($file)
                )
                .replace("USER_SET_MIN", &super::keys::USER_SET_MIN.to_string()),
            )
        })
    };
}

/// ARGV[6] the message's effect on the new preference, recorded too ("" = none); ARGV[7] the
/// element's whole attributes as the service encoded the new record and ARGV[8] injection's
/// view of them ("" both: none, the script encodes; placed as they are only where no record
/// of that id is there), ARGV[9..]: field/value pairs of the new record (id first, so
/// `ARGV[10]` is the id).
/// Returns `{applied, id}`: with an effect id applied before, the id it created.
pub static ADD: LazyLock<Script> = write_script!("scripts/add.lua");

/// Writes what ingest replayed from a preference's timeline (`model::timeline`): ARGV[6] the
/// revision the timeline was read at ("" for a record without one), ARGV[7] the element's
/// whole attributes as the service encoded the record this write leaves and ARGV[8]
/// injection's view of them ("" both: none, the script encodes), ARGV[9] the related users
/// read (JSON), ARGV[10..] field/value pairs (the id first; a new vector among them as
/// `embedding`, which goes to the vector set). The service's encoding is placed as it is only
/// where the record is the one read: in its element, no hash beside it, at that revision
/// (`scripts/apply.lua`). Refused with [`CONFLICT`] when the record was written since it was
/// read (the replay would undo that write). Returns nil when missing, else `{applied, id}`.
pub static APPLY: LazyLock<Script> = write_script!("scripts/apply.lua");

/// ARGV[6] rate, ARGV[7] now, ARGV[8] the user whose conversation reinforced it ("" = none),
/// ARGV[9] the reinforcement's log entry (JSON), ARGV[10] how many log entries to keep,
/// ARGV[11] how many evidence users to keep.
/// Returns nil when missing, else
/// `{applied, id, name, strength, reinforcement_count}`.
pub static REINFORCE: LazyLock<Script> = write_script!("scripts/reinforce.lua");

/// ARGV[6] new opinion, ARGV[7] embedding bytes, ARGV[8] strength, ARGV[9] now, ARGV[10]
/// reason, ARGV[11] new stance ("" keeps it), ARGV[12] when the new stance was expressed,
/// ARGV[13] the user whose conversation changed it ("" = none), ARGV[14] how many evidence
/// users to keep, ARGV[15] how many history entries to keep. Returns nil when missing, else
/// `{applied, id, name, opinion, strength, evolutions}`.
pub static EVOLVE: LazyLock<Script> = write_script!("scripts/evolve.lua");

/// ARGV[6] reason, ARGV[7] now, ARGV[8] how many history entries to keep. Every
/// retraction is a version in the history, so the preference can be restored. Returns nil when missing, else
/// `{applied, id, name}`.
pub static RETRACT: LazyLock<Script> = write_script!("scripts/retract.lua");

/// Restores an earlier version of a preference from its history: its opinion, stance,
/// strength and whether it was active come back, as a new version (so a restore can itself be
/// undone). The topic and its vector stay. ARGV[6] the version, ARGV[7] now, ARGV[8] reason,
/// ARGV[9] how many history entries to keep. Returns nil when missing; `{-1, kept versions}`
/// when that version is not kept; else `{applied, id, name, opinion, version, active}`
/// (`applied` 0 when the preference is at that version already).
pub static RESTORE: LazyLock<Script> = write_script!("scripts/restore.lua");

/// Merges a near-duplicate into the preference of `KEYS[1]`: `KEYS[8]` is the duplicate's
/// hash. The survivor keeps the higher strength, the sum of both counts (plus the duplicate's
/// own first voicing), both sets of evidence and related users, the newest reinforcements of
/// both, the earlier creation and the later reinforcement; the duplicate is retracted. Each
/// gets a "consolidation" history entry naming the other. ARGV[6] now, ARGV[7] how many
/// history entries, ARGV[8] evidence users, ARGV[9] reinforcements to keep. Returns nil when
/// either is missing, else `{applied, survivor id, reinforcement_count, strength}` (`applied`
/// 0 when either is no longer active: merged before).
pub static MERGE: LazyLock<Script> = write_script!("scripts/merge.lua");

/// Erasure of one user from one preference. ARGV[6] user id, ARGV[7] pseudonym, ARGV[8] now,
/// ARGV[9] how many history entries to keep.
/// Replaces the user in related users, evidence users, the triggering user, the users of the
/// reinforcement log and the reasons of the evolution history; retracts the
/// preference when that user's conversations were its only evidence. Returns nil when missing,
/// else `{changed, retracted}` (1/0 each).
pub static PURGE_USER: LazyLock<Script> = write_script!("scripts/purge_user.lua");

/// Migration: sets a hash's embedding only if the hash still exists (HSET alone would create a
/// stub hash for a preference deleted meanwhile), and puts the new vector in the vector set.
/// ARGV[6] the vector, ARGV[7] the preference id. Returns 1 when written.
pub static SET_EMBEDDING: LazyLock<Script> = write_script!("scripts/set_embedding.lua");

/// Migration: writes a preference hash read from an earlier layout under its key in this one,
/// with its structures, unless it is there already. ARGV[6..] field/value pairs (id first).
/// Returns 1 when written, 0 when the key already existed (an earlier run got this far).
pub static IMPORT: LazyLock<Script> = write_script!("scripts/import.lua");

/// Migration: brings the structures in step with an existing hash (a run cut short, or a
/// change of quantisation that emptied the vector set). ARGV[6] the preference id. Returns 1,
/// or 0 when the hash is gone.
pub static RESYNC: LazyLock<Script> = write_script!("scripts/resync.lua");

/// Migration, after every preference of a persona is resynced: each named user's own vector
/// set made whole (rebuilt from the persona's set), or dropped when the user has fewer than
/// [`super::keys::USER_SET_MIN`] preferences. `KEYS[1]` names no preference. ARGV[6..] the
/// users. Returns how many users it settled.
pub static SETTLE_USERS: LazyLock<Script> = write_script!("scripts/settle_users.lua");

/// One page of the registry of personas in (score, persona id) order after a cursor
/// (`scripts/registry_page.lua`, which says why that order walks safely). `KEYS[1]` the
/// registry; ARGV: the cursor's score and persona id ('' to start), how many.
pub static REGISTRY_PAGE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/registry_page.lua")));

/// Reads whole records, wherever each lives (`scripts/record.lua`: the element's attributes
/// of an active preference, else its hash), in one atomic step. `KEYS[1]` the persona's
/// vector set, `KEYS[2..]` preference keys of that persona, `ARGV[i - 1]` the id of `KEYS[i]`.
/// Returns, for each preference key in order: its hash's fields as flat `name, value` pairs
/// (the vector left out); else its element's raw attributes alone, which the service decodes
/// ([`super::element_record`]); empty for none.
pub static READ: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("scripts/read.lua")));

/// Injection's three passes in one round trip, over one persona's own structures only.
/// How far the injection script walks down a persona's `strongest` for its residents when
/// decay may have reordered them (see [`INJECT`]). Each read costs about 5 µs in the script
/// (`benches/store.rs`: 1 000 reads took 5.2 ms p50), so this bounds the cost of a persona
/// whose strong views have all faded (1.6 ms p50 at this limit, against 0.4 ms without
/// residents, in the same run); past it the residents are the best of the strongest this
/// many by stored strength (the old selection read only `2·resident_count + max_count`, 14
/// by default).
pub const RESIDENT_WALK_LIMIT: usize = 256;

/// `KEYS[1]` vector set, `KEYS[2]` strongest, `KEYS[3]` about-users, `KEYS[4]` the persona's
/// bases. `ARGV[1]` the query vector (FP32 bytes; empty for none: no semantic pass, and the
/// user pass strongest first; with `ARGV[5]` "0" any non-empty mark, as the searches that
/// need the vector are sent beside the script), `ARGV[2]` how many neighbours (k), `ARGV[3]` how many of the
/// strongest, `ARGV[4]` at most how many preferences about the users to score, `ARGV[5]` "1"
/// to also return the vector of every hit (a base layer's, for the override check),
/// `ARGV[6]` the search's exploration factor (`store.vector_search_ef`), `ARGV[7]` the
/// strength half-life in days (0: no decay), `ARGV[8]` now, in days since the Unix epoch,
/// `ARGV[9]` the `EPSILON` of the script's own semantic search ("" for none: every hit;
/// [`super::query::relevance_epsilon`] of `store.min_semantic_relevance`, so a base layer's
/// hits too far to inject are neither read nor sent), `ARGV[10..]` the users. With a query
/// and `ARGV[5]` "0" (the persona's own layer) the caller sends the semantic VSIM and each present user's set's VSIM beside the script in the same
/// pipeline ([`super::query::injection_pipeline`]); with `ARGV[5]` "1" (a base layer, whose
/// hits' vectors the script reads) the script runs them itself.
///
/// Returns `{semantic, about_users, strongest, bases, vectors, user_candidates, whole}`:
/// - `semantic`: `VSIM … WITHSCORES WITHATTRIBS` (flat `id, score, attributes`), empty unless
///   `ARGV[5]` is "1";
/// - `about_users`: with a query vector and `ARGV[5]` "1", the k nearest it among the
///   preferences about any of the users, each user's searched in that user's own vector set
///   (`KEYS[3]:<user>`, [`super::keys::Keys::about_vectors`]), flat `id, cosine, attributes`,
///   nearest first (ties by id); without a query, the k strongest preferences about any of
///   the users, flat `id, 0, attributes`; empty otherwise;
/// - `whole`, with a query vector and `ARGV[5]` "0": the users whose own set is whole, whose
///   searches beside the script count;
/// - `user_candidates`, with a query vector, for the users whose own set is not whole (it
///   holds fewer or more members than the user's about-entries: a user with fewer than
///   [`super::keys::USER_SET_MIN`], who has none, or memory written before those sets, until
///   `index migrate` builds it): every preference about them (at most
///   `ARGV[4]`), flat `id, vector, attributes`, the vector a Q8 set's raw bytes (`VEMB RAW`) or
///   the dequantised `VEMB` reply otherwise; the service keeps the k nearest the query
///   ([`super::query::nearest_user_candidates`]). Not a filtered VSIM over the persona's set,
///   which walks the whole graph for a selective filter; not scored here, where Lua took
///   about 250 µs a candidate;
/// - `strongest`: flat `id, attributes`, the `ARGV[3]` strongest by decayed strength (ties by
///   id). Decay never raises a strength, so the walk down `strongest` (stored strength) stops
///   once the next stored strength is below the last of those kept: what lies further cannot
///   enter, and the choice is exact. The walk reads at most [`RESIDENT_WALK_LIMIT`] entries (a
///   persona whose strong views have all faded is read that far, and the best of those are
///   kept);
/// - `bases`: the persona's bases, comma-separated ("" for none), so a persona without bases
///   costs no second round trip;
/// - `vectors`: flat `id, vector` for every hit above but the user candidates (whose
///   vectors are in hand) when `ARGV[5]` is "1": a Q8 set's raw bytes (`VEMB RAW`), the
///   `VEMB` reply's numbers otherwise ([`super::query::stored_vector`]).
pub static INJECT: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        &include_str!("scripts/inject.lua")
            .replace("RESIDENT_WALK_LIMIT", &RESIDENT_WALK_LIMIT.to_string()),
    )
});
