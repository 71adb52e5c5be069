//! Every Redis key and key pattern the store uses, in one place.
//!
//! **Invariant:** every key that belongs to one persona carries the persona id as a hash tag
//! (`{ada}`), so all of them live in one hash slot. On Redis Cluster a script may only touch
//! keys of one slot; with the tag, every write script (preference hash, effect records, lock,
//! vector set, …) runs on the node that owns the persona, and a persona's hot paths never
//! leave that node. Persona ids are `[A-Za-z0-9_-]` (`validate::persona_id`) and the key prefix
//! may not hold braces (`config`), so the tag is always the persona id and nothing else.
//!
//! Layout, for key prefix `P` and persona `ada`:
//!
//! | key | type | holds |
//! |---|---|---|
//! | `P:persona_pref:{ada}:<id>` | hash | one retracted preference's record (the original system's fields) and its vector; an active one's record is its element's attributes in the vector set (`scripts/record.lua`), and it has a hash only with `redis.text_index` |
//! | `P:persona_pref_ids:{ada}` | set | every preference id of the persona, retracted too |
//! | `P:persona_pref_vectors:{ada}` | vector set | active preferences' topic vectors; attributes carry each one's whole record (what injection and deciding read under one-letter names) |
//! | `P:persona_pref_strongest:{ada}` | sorted set | active preference ids by strength |
//! | `P:persona_pref_about:{ada}` | sorted set | `<user id>\0<preference id>` for active preferences about a user (lexicographic ranges) |
//! | `P:persona_pref_about:{ada}:<user id>` | vector set | the same preferences of one user with their topic vectors (no attributes), for a user with at least [`USER_SET_MIN`]: injection's user pass searches it |
//! | `P:persona_pref_effects:{ada}` | hash | effect id → preference id, one field per applied effect, each with its own TTL |
//! | `P:persona_pref_lock:{ada}` | string | the persona lock's current token |
//! | `P:persona_pref_lock:{ada}:fence` | string | the lock's token counter |
//! | `P:persona_pref_erased:{ada}` | hash | erasure records |
//! | `P:persona_pref_settled:{ada}` | sorted set | stream sequences of the persona's settled events |
//! | `P:persona_pref_bases:{ada}` | string | the persona's base personas, comma-separated, nearest first |
//! | `P:persona_prefs_layout` | string | the layout the memory is in ([`LAYOUT`]); a key of no persona |
//! | `P:persona_prefs_registry` | sorted set | every persona with memory, by its last write (ms); a key of no persona |
//! | `P:persona_prefs_erased_everywhere:{tenant}` | hash | users erased from every persona (`purge_user_everywhere`); a key of no persona |
//! | `P:persona_prefs_deleted:{tenant}` | hash | deleted personas and when (`delete_persona`); a key of no persona, in the slot above |
//!
//! Earlier layouts (the original system's, and this service's before persona slots) wrote the
//! persona id without braces; [`Keys::legacy_patterns`] finds them for `index migrate`.

/// The layout this build reads and writes, as recorded in [`Keys::layout`]. A later layout
/// change gives a new value, so a build never runs on memory it cannot read. Layout 2 keeps an
/// active preference's record once, as its element's attributes in the vector set
/// (`scripts/record.lua`), where layout 1 kept it in the hash too: a build of layout 1 would
/// take those preferences for missing.
pub const LAYOUT: &str = "persona-slots-2";

/// The layout before [`LAYOUT`], which this build reads and `index migrate` brings forward
/// (every preference resynced moves its record into place).
pub const PREVIOUS_LAYOUT: &str = "persona-slots-1";

/// The separator between user id and preference id in the `about` sorted set. User ids may not
/// hold control characters (`validate::external_text`), so it never occurs inside one.
pub const ABOUT_SEPARATOR: char = '\0';

/// A user with at least this many preferences about them has a vector set of their own
/// ([`Keys::about_vectors`]), which injection's user pass searches; with fewer, the injection
/// script reads their candidates one by one. At 1 (since 2026-11-28) every user with a view
/// has a set, so injection needs no script at all (`query::plain_injection_pipeline`): at
/// 1 000 000 preferences, users holding two each, the sets cost 210 bytes a preference (memory
/// 0.82 -> 0.93 x the raw data) and took Redis's share of injection's gap from about 0.1 ms to
/// 0.02-0.04 (the script's Lua cost as much again as its commands). It was 8 before, to spare
/// small sets' bytes.
pub const USER_SET_MIN: usize = 1;

#[derive(Debug, Clone)]
pub struct Keys {
    prefix: String,
}

impl Keys {
    pub fn new(prefix: &str) -> Keys {
        Keys {
            prefix: prefix.to_string(),
        }
    }

    /// `P:persona_pref:`: what the RediSearch index covers (every preference hash).
    pub fn preference_prefix(&self) -> String {
        format!("{}:persona_pref:", self.prefix)
    }

    /// `P:persona_pref:{persona}:` — the start of every preference hash of one persona.
    pub fn persona_preference_prefix(&self, persona_id: &str) -> String {
        format!("{}:persona_pref:{{{persona_id}}}:", self.prefix)
    }

    pub fn preference(&self, persona_id: &str, preference_id: &str) -> String {
        format!(
            "{}{preference_id}",
            self.persona_preference_prefix(persona_id)
        )
    }

    pub fn ids(&self, persona_id: &str) -> String {
        self.of_persona("persona_pref_ids", persona_id)
    }

    pub fn vectors(&self, persona_id: &str) -> String {
        self.of_persona("persona_pref_vectors", persona_id)
    }

    pub fn strongest(&self, persona_id: &str) -> String {
        self.of_persona("persona_pref_strongest", persona_id)
    }

    pub fn about(&self, persona_id: &str) -> String {
        self.of_persona("persona_pref_about", persona_id)
    }

    /// One user's own vector set: the persona's active preferences about `user_id`, exactly
    /// the user's entries in [`Keys::about`], each with the attributes it has in the persona's
    /// set, so the user pass is one small search that returns what it ranks. The write
    /// scripts name it from the about-set's key (`KEYS[6] .. ':' .. user`), as here.
    pub fn about_vectors(&self, persona_id: &str, user_id: &str) -> String {
        format!("{}:{user_id}", self.about(persona_id))
    }

    pub fn effects(&self, persona_id: &str) -> String {
        self.of_persona("persona_pref_effects", persona_id)
    }

    pub fn lock(&self, persona_id: &str) -> String {
        self.of_persona("persona_pref_lock", persona_id)
    }

    pub fn fence(&self, persona_id: &str) -> String {
        format!("{}:fence", self.lock(persona_id))
    }

    pub fn erasures(&self, persona_id: &str) -> String {
        self.of_persona("persona_pref_erased", persona_id)
    }

    /// The stream sequences of the persona's events the worker has settled (a sorted set, by
    /// when): what erasure may erase above the consumer's ack floor.
    pub fn settled(&self, persona_id: &str) -> String {
        self.of_persona("persona_pref_settled", persona_id)
    }

    /// The persona's base personas, comma-separated, nearest first (a string: persona ids
    /// hold no comma). Read with the persona's own passes, in the same script.
    pub fn bases(&self, persona_id: &str) -> String {
        self.of_persona("persona_pref_bases", persona_id)
    }

    /// Every key of one persona that is neither a preference hash (those are listed in
    /// [`Keys::ids`]) nor a user's vector set (its users are in [`Keys::about`]); the id set
    /// first.
    pub fn persona_structures(&self, persona_id: &str) -> [String; 10] {
        [
            self.ids(persona_id),
            self.vectors(persona_id),
            self.strongest(persona_id),
            self.about(persona_id),
            self.effects(persona_id),
            self.lock(persona_id),
            self.fence(persona_id),
            self.erasures(persona_id),
            self.settled(persona_id),
            self.bases(persona_id),
        ]
    }

    /// The keys a write script declares, in the order `scripts.rs` expects (`KEYS[1..7]`).
    pub fn write_script_keys(&self, persona_id: &str, preference_id: &str) -> [String; 7] {
        [
            self.preference(persona_id, preference_id),
            self.effects(persona_id),
            self.lock(persona_id),
            self.vectors(persona_id),
            self.strongest(persona_id),
            self.about(persona_id),
            self.ids(persona_id),
        ]
    }

    /// `P:persona_prefs_registry`: every persona with memory, scored by its last write (ms).
    /// Not a persona's key: one slot of its own.
    pub fn registry(&self) -> String {
        format!("{}:persona_prefs_registry", self.prefix)
    }

    /// `P:persona_prefs_erased_everywhere`: users erased from every persona (a hash like a
    /// persona's erasure records, keyed by a digest of the user alone), which ingest adopts
    /// into a persona's own records when it meets one. Not a persona's key.
    pub fn erased_everywhere(&self) -> String {
        format!("{}:persona_prefs_erased_everywhere:{{tenant}}", self.prefix)
    }

    /// `P:persona_prefs_deleted`: deleted personas (a hash: persona id, when), so that events
    /// from before a deletion that arrive after it are refused. Not a persona's key; in the
    /// slot of [`Keys::erased_everywhere`] (hash tag `{tenant}`), so ingest reads both in one
    /// round trip.
    pub fn deleted_personas(&self) -> String {
        format!("{}:persona_prefs_deleted:{{tenant}}", self.prefix)
    }

    /// `P:persona_prefs_layout`: which layout the memory under this prefix is in. Written once
    /// the memory is known to hold no key of an earlier layout (start-up on an empty memory,
    /// or a migration that finished), so start-up checks one key instead of the keyspace.
    pub fn layout(&self) -> String {
        format!("{}:persona_prefs_layout", self.prefix)
    }

    /// A member of the `about` sorted set.
    pub fn about_member(user_id: &str, preference_id: &str) -> String {
        format!("{user_id}{ABOUT_SEPARATOR}{preference_id}")
    }

    /// The lexicographic range (`ZLEXCOUNT`/`ZRANGEBYLEX` bounds) of `user_id`'s members of the
    /// `about` sorted set: from the user and the separator, up to the byte after the separator,
    /// so a user whose id merely starts with `user_id` is outside it.
    pub fn about_range(user_id: &str) -> (String, String) {
        let after_separator = char::from_u32(ABOUT_SEPARATOR as u32 + 1)
            .expect("the separator is a control character");
        (
            format!("[{}", Self::about_member(user_id, "")),
            format!("({user_id}{after_separator}"),
        )
    }

    /// SCAN patterns for keys of the layouts before persona slots: the key kind followed by
    /// anything but `{`, so keys already in this layout never leave the server (the prefix is
    /// glob-safe: `config` allows only `A-Za-z0-9_-.:`). Callers still parse each match.
    pub fn legacy_patterns(&self) -> LegacyPatterns {
        let pattern = |kind: &str| format!("{}:{kind}:[^{{]*", self.prefix);
        LegacyPatterns {
            preferences: pattern("persona_pref"),
            effects: pattern("persona_pref_effect"),
            erasures: pattern("persona_pref_erased"),
            locks: pattern("persona_pref_lock"),
        }
    }

    /// Reads a legacy preference key `P:persona_pref:<persona>:<id>` into (persona, id);
    /// `None` for keys already in this layout or not of that shape.
    pub fn parse_legacy_preference(&self, key: &str) -> Option<(String, String)> {
        let rest = key.strip_prefix(&self.preference_prefix())?;
        if rest.starts_with('{') {
            return None;
        }
        let (persona, id) = rest.split_once(':')?;
        (!persona.is_empty() && !id.is_empty() && !id.contains(':'))
            .then(|| (persona.to_string(), id.to_string()))
    }

    /// Reads a legacy effect key `P:persona_pref_effect:<persona>:<effect id>`.
    pub fn parse_legacy_effect(&self, key: &str) -> Option<(String, String)> {
        let rest = key.strip_prefix(&format!("{}:persona_pref_effect:", self.prefix))?;
        if rest.starts_with('{') {
            return None;
        }
        let (persona, effect) = rest.split_once(':')?;
        Some((persona.to_string(), effect.to_string()))
    }

    /// Reads a legacy erasure key `P:persona_pref_erased:<persona>`.
    pub fn parse_legacy_erasures(&self, key: &str) -> Option<String> {
        let rest = key.strip_prefix(&format!("{}:persona_pref_erased:", self.prefix))?;
        (!rest.starts_with('{') && !rest.contains(':')).then(|| rest.to_string())
    }

    /// Reads a legacy lock or fence key `P:persona_pref_lock:<persona>[:fence]`.
    pub fn is_legacy_lock(&self, key: &str) -> bool {
        key.strip_prefix(&format!("{}:persona_pref_lock:", self.prefix))
            .is_some_and(|rest| !rest.starts_with('{'))
    }

    fn of_persona(&self, kind: &str, persona_id: &str) -> String {
        format!("{}:{kind}:{{{persona_id}}}", self.prefix)
    }
}

/// SCAN patterns of the layouts before persona slots.
#[derive(Debug, Clone)]
pub struct LegacyPatterns {
    pub preferences: String,
    pub effects: String,
    pub erasures: String,
    pub locks: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The part of a key Redis Cluster hashes: the first `{…}` with something inside.
    fn hash_tag(key: &str) -> &str {
        let open = key.find('{').expect("a hash tag");
        let close = key[open + 1..].find('}').expect("a closed tag") + open + 1;
        &key[open + 1..close]
    }

    #[test]
    fn every_key_of_a_persona_hashes_on_the_persona_id_alone() {
        let keys = Keys::new("stargazer");
        let mut all: Vec<String> = keys.persona_structures("ada-1").to_vec();
        all.extend(keys.write_script_keys("ada-1", "0123abcd"));
        for key in all {
            assert_eq!(hash_tag(&key), "ada-1", "{key}");
        }
        assert_eq!(
            keys.preference("ada", "x1"),
            "stargazer:persona_pref:{ada}:x1"
        );
        assert!(
            keys.preference("ada", "x1")
                .starts_with(&keys.preference_prefix())
        );
    }

    #[test]
    fn a_users_about_range_holds_their_members_and_no_one_elses() {
        let (low, high) = Keys::about_range("ann");
        let (low, high) = (&low[1..], &high[1..]);
        let within = |member: &str| member >= low && member < high;
        assert!(within(&Keys::about_member("ann", "x1")));
        assert!(within(&Keys::about_member("ann", "")));
        assert!(!within(&Keys::about_member("anna", "x1")));
        assert!(!within(&Keys::about_member("an", "x1")));
        assert!(!within(&Keys::about_member("ann\u{1}", "x1")));
    }

    #[test]
    fn legacy_keys_are_told_apart_from_this_layout() {
        let keys = Keys::new("p");
        let cases = [
            ("p:persona_pref:ada:x1", Some(("ada", "x1"))),
            ("p:persona_pref:{ada}:x1", None),
            ("p:persona_pref:ada", None),
            ("q:persona_pref:ada:x1", None),
        ];
        for (key, expected) in cases {
            let parsed = keys.parse_legacy_preference(key);
            assert_eq!(
                parsed.as_ref().map(|(p, i)| (p.as_str(), i.as_str())),
                expected,
                "{key}"
            );
        }
        assert_eq!(
            keys.parse_legacy_effect("p:persona_pref_effect:ada:discord:c1:m1#0"),
            Some(("ada".into(), "discord:c1:m1#0".into()))
        );
        assert_eq!(
            keys.parse_legacy_effect("p:persona_pref_effects:{ada}"),
            None
        );
        assert_eq!(
            keys.parse_legacy_erasures("p:persona_pref_erased:ada"),
            Some("ada".into())
        );
        assert_eq!(
            keys.parse_legacy_erasures("p:persona_pref_erased:{ada}"),
            None
        );
        assert!(keys.is_legacy_lock("p:persona_pref_lock:ada:fence"));
        assert!(!keys.is_legacy_lock("p:persona_pref_lock:{ada}:fence"));
    }
}
