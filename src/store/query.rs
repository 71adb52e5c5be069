//! RediSearch query text and reply parsing, and the vector set replies of the hot paths.
//!
//! Everything user-supplied that reaches a query goes through [`escape_tag`]; vectors travel as
//! binary arguments, never inline.

use std::collections::HashMap;

use redis::Value;

use super::error::StoreError;
use super::keys::Keys;
use super::record::{Preference, VectorAttributes, field};
use super::scripts;

/// Escapes a TAG value for a RediSearch query: every ASCII character other than letters, digits
/// and `_` gets a backslash, so punctuation and whitespace (`{ } | @ : - , . ' "` …) are literal
/// and a value can neither end the `{…}` clause nor start another one.
pub fn escape_tag(value: &str) -> String {
    let mut escaped = String::with_capacity(value.len() * 2);
    for ch in value.chars() {
        if ch.is_ascii() && !ch.is_ascii_alphanumeric() && ch != '_' {
            escaped.push('\\');
        }
        escaped.push(ch);
    }
    escaped
}

/// `@field:{a|b|c}` with each value escaped.
pub fn tag_clause(field: &str, values: &[impl AsRef<str>]) -> String {
    let joined: Vec<String> = values.iter().map(|v| escape_tag(v.as_ref())).collect();
    format!("@{field}:{{{}}}", joined.join(" | "))
}

/// `VSIM` of `vector` over one persona's vector set (`key`): the `count` nearest with their
/// scores (and attributes, with `with_attributes`), exploring `ef` candidates, in Redis's main
/// thread. By default VSIM hands each search to a worker thread and back, which costs more than
/// searching one persona's set (`benches/search_effort.rs`, 10 000 MiniLM vectors at EF 32:
/// 0.136 ms in the main thread, 0.192 ms handed off); the injection script's VSIM runs in the
/// main thread anyway (a script cannot block). The price: a search holds the main thread for
/// its duration, as any short command does.
pub fn vsim_command(
    key: String,
    vector: &[f32],
    count: usize,
    ef: usize,
    with_attributes: bool,
) -> redis::Cmd {
    vsim_command_for_bytes(key, &vector_to_bytes(vector), count, ef, with_attributes)
}

/// [`vsim_command`] for a vector already in its FP32 bytes ([`vector_to_bytes`]): one
/// conversion for the several searches of one query.
pub fn vsim_command_for_bytes(
    key: String,
    vector_bytes: &[u8],
    count: usize,
    ef: usize,
    with_attributes: bool,
) -> redis::Cmd {
    let mut command = redis::cmd("VSIM");
    command
        .arg(key)
        .arg("FP32")
        .arg(vector_bytes)
        .arg("WITHSCORES");
    if with_attributes {
        command.arg("WITHATTRIBS");
    }
    command
        .arg("COUNT")
        .arg(count)
        .arg("EF")
        .arg(ef)
        .arg("NOTHREAD");
    command
}

/// The `EPSILON` of a semantic search that leaves out only the hits [`semantically_relevant`]
/// refuses at `min_semantic_relevance`: a hit scores (1 + cosine) / 2, and Redis answers those
/// scoring at least 1 − δ, so δ = (1 − floor) / 2, a hair over so that a hit on the floor itself
/// still comes back (the parser stays the judge). `None` at a floor of 0 or under (every hit
/// is kept) or one that is no number.
pub fn relevance_epsilon(min_semantic_relevance: f64) -> Option<f64> {
    (min_semantic_relevance > 0.0).then(|| (1.0 - min_semantic_relevance.min(1.0)) / 2.0 + 1e-6)
}

/// [`vsim_command_for_bytes`] with its attributes for the semantic pass: hits too far from the
/// query to inject are left out by Redis ([`relevance_epsilon`]), so their attributes are
/// neither sent nor parsed. Measured at 10 000 views, the search with its decoding: 0.309 →
/// 0.269 ms for queries near none of them, 0.307 → 0.282 near eight, the same hits kept.
pub fn semantic_vsim_command_for_bytes(
    key: String,
    vector_bytes: &[u8],
    count: usize,
    ef: usize,
    min_semantic_relevance: f64,
) -> redis::Cmd {
    let mut command = vsim_command_for_bytes(key, vector_bytes, count, ef, true);
    if let Some(epsilon) = relevance_epsilon(min_semantic_relevance) {
        command.arg("EPSILON").arg(epsilon);
    }
    command
}

/// Little-endian FLOAT32 bytes, the layout the HNSW field stores.
pub fn vector_to_bytes(vector: &[f32]) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(vector.len() * 4);
    for value in vector {
        bytes.extend_from_slice(&value.to_le_bytes());
    }
    bytes
}

pub fn bytes_to_vector(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// The filter part of every persona query: one persona, active only unless asked otherwise.
pub fn persona_filter(persona_id: &str, include_retracted: bool) -> String {
    let mut filter = tag_clause(field::PERSONA_ID, &[persona_id]);
    if !include_retracted {
        filter.push_str(" @active:{1}");
    }
    filter
}

/// At most this many preferences about the present users are read one by one per injection:
/// without a query (ranked by strength), or for users whose own vector set is not whole
/// (memory from before those sets, until `index migrate`). A user whose set is whole is
/// searched in it, whatever the user's count.
pub const USER_PASS_CANDIDATES: usize = 256;

/// How much each of the injection script's passes reads.
#[derive(Debug, Clone, Copy)]
pub struct PassSizes {
    /// Semantic neighbours (k).
    pub top_k: usize,
    /// The strongest preferences.
    pub strongest: usize,
    /// How many candidates the semantic search explores (`store.vector_search_ef`).
    pub search_ef: usize,
    /// `store.strength_half_life_days`: the strongest are chosen by decayed strength (0: by
    /// strength).
    pub half_life_days: f64,
    /// The time decay is counted to, in days since the Unix epoch.
    pub now_days: f64,
    /// `store.min_semantic_relevance`: the semantic search beside the script asks Redis to
    /// leave out the hits under it ([`semantic_vsim_command_for_bytes`]).
    pub min_semantic_relevance: f64,
}

/// The injection script's invocation over one persona's structures (see
/// [`injection_pipeline`] for which searches it runs itself).
fn injection_invocation(
    keys: &Keys,
    persona_id: &str,
    vector_bytes: &[u8],
    sizes: PassSizes,
    active_user_ids: &[String],
    with_vectors: bool,
) -> redis::ScriptInvocation<'static> {
    let mut invocation = scripts::INJECT.prepare_invoke();
    invocation
        .key(keys.vectors(persona_id))
        .key(keys.strongest(persona_id))
        .key(keys.about(persona_id))
        .key(keys.bases(persona_id))
        .arg(vector_bytes)
        .arg(sizes.top_k)
        .arg(sizes.strongest)
        .arg(USER_PASS_CANDIDATES)
        .arg(if with_vectors { "1" } else { "0" })
        .arg(sizes.search_ef)
        .arg(sizes.half_life_days.to_string())
        .arg(sizes.now_days.to_string())
        .arg(
            relevance_epsilon(sizes.min_semantic_relevance)
                .map_or_else(String::new, |epsilon| epsilon.to_string()),
        );
    for user in active_user_ids {
        invocation.arg(user.as_str());
    }
    invocation
}

/// What injection sends for one layer, in one round trip to the persona's slot: with a query
/// vector and without `with_vectors` (the persona's own layer), the semantic `VSIM`, a `VSIM`
/// of each present user's own set (`Keys::about_vectors`, whose members carry their
/// attributes), then the injection script, which says which of those sets are whole and reads
/// the other users' candidates, the strongest and the bases. The hits' attribute strings then
/// never pass through Lua (measured interleaved at 10 000 preferences, two present users:
/// the semantic VSIM beside the script saved 11-16 µs a request, the users' searches beside it
/// 63-72 µs more). One pipeline: the semantic search sent apart, behind the rest, so that the
/// users' hits would be decoded while Redis searches, measured slower (a second reply to wait
/// for costs more than the decoding it hides). Otherwise (no query, or a base layer, whose
/// hits' vectors the script reads by id) the script alone runs every pass. Decoded by
/// [`parse_injection_replies`]. Public so benches measure exactly what the store sends.
pub fn injection_pipeline(
    keys: &Keys,
    persona_id: &str,
    query: &[f32],
    sizes: PassSizes,
    active_user_ids: &[String],
    with_vectors: bool,
) -> redis::Pipeline {
    let vector_bytes = if query.is_empty() {
        Vec::new()
    } else {
        vector_to_bytes(query)
    };
    // The script knows the same rule (`ARGV[5]`, with a query): it leaves these searches out.
    let beside = !query.is_empty() && !with_vectors;
    let mut pipe = redis::pipe();
    // Errors come back in place, so a script not yet loaded can be told from the rest.
    pipe.ignore_errors();
    if beside {
        add_layer_searches(
            &mut pipe,
            keys,
            persona_id,
            &vector_bytes,
            sizes,
            active_user_ids,
        );
    }
    // With the searches beside it the script only needs to know there is a query: a one-byte
    // mark instead of the vector (Redis copied the 1 536 bytes into Lua for nothing: the
    // script took 23 us instead of 13, median of 2 000 in SLOWLOG).
    let script_vector: &[u8] = if beside { b"1" } else { &vector_bytes };
    pipe.invoke_script(&injection_invocation(
        keys,
        persona_id,
        script_vector,
        sizes,
        active_user_ids,
        with_vectors,
    ));
    pipe
}

/// The searches a persona's own layer sends beside the script or the plain commands: the
/// semantic `VSIM` over the persona's set, then one over each present user's own set, each in
/// Redis's main thread, as the script's own searches run.
fn add_layer_searches(
    pipe: &mut redis::Pipeline,
    keys: &Keys,
    persona_id: &str,
    vector_bytes: &[u8],
    sizes: PassSizes,
    active_user_ids: &[String],
) {
    pipe.add_command(semantic_vsim_command_for_bytes(
        keys.vectors(persona_id),
        vector_bytes,
        sizes.top_k,
        sizes.search_ef,
        sizes.min_semantic_relevance,
    ));
    // A user's hits are injected however far from the query (their relevance is raised to
    // `user_relevance_floor`): every one is asked for.
    for user in active_user_ids {
        pipe.add_command(vsim_command_for_bytes(
            keys.about_vectors(persona_id, user),
            vector_bytes,
            sizes.top_k,
            sizes.search_ef,
            true,
        ));
    }
}

/// The persona's own layer without the script, when it needs none: with a query, no
/// residents and no vectors asked for, what the script adds beside the searches is which users'
/// sets are whole and the persona's bases, and plain commands say both. The pipeline: the
/// semantic `VSIM`, a `VSIM` of each present user's own set, then `VCARD` of that set and
/// `ZLEXCOUNT` of the user's about-entries for each user, then `GET` of the bases. A user
/// whose set is not whole but who has entries (fewer than [`super::keys::USER_SET_MIN`], or
/// memory from before these sets) needs the script to read their candidates:
/// [`parse_plain_injection_replies`] says so, and the caller sends [`injection_pipeline`].
/// Measured at 1 000 views a persona: the script cost 30-40 µs of Redis a call (as much again
/// as its commands: each `redis.call` passes its reply through Lua), these commands a few.
/// `None` where the script is needed anyway.
pub fn plain_injection_pipeline(
    keys: &Keys,
    persona_id: &str,
    query: &[f32],
    sizes: PassSizes,
    active_user_ids: &[String],
    with_vectors: bool,
) -> Option<redis::Pipeline> {
    if query.is_empty() || with_vectors || sizes.strongest > 0 {
        return None;
    }
    let vector_bytes = vector_to_bytes(query);
    let mut pipe = redis::pipe();
    pipe.ignore_errors();
    add_layer_searches(
        &mut pipe,
        keys,
        persona_id,
        &vector_bytes,
        sizes,
        active_user_ids,
    );
    for user in active_user_ids {
        pipe.cmd("VCARD").arg(keys.about_vectors(persona_id, user));
        // The user's entries, as the script counts them.
        let (low, high) = Keys::about_range(user);
        pipe.cmd("ZLEXCOUNT")
            .arg(keys.about(persona_id))
            .arg(low)
            .arg(high);
    }
    pipe.cmd("GET").arg(keys.bases(persona_id));
    Some(pipe)
}

/// Decodes the replies of a [`plain_injection_pipeline`]: the passes, or `None` when a present
/// user has entries but no whole set, whose candidates only the script reads.
pub fn parse_plain_injection_replies(
    replies: Vec<Value>,
    query: &[f32],
    top_k: usize,
    active_user_ids: &[String],
    min_semantic_relevance: f64,
) -> Result<Option<InjectionPasses>, StoreError> {
    let users = active_user_ids.len();
    if replies.len() != 2 + 3 * users {
        return Err(StoreError::UnexpectedReply(format!(
            "injection pipeline returned {} replies for {users} users",
            replies.len()
        )));
    }
    let mut replies = replies.into_iter();
    let semantic = replies.next().unwrap_or(Value::Nil);
    server_error(&semantic)?;
    let searches: Vec<Value> = replies.by_ref().take(users).collect();
    let count = |reply: Value| -> Result<i64, StoreError> {
        server_error(&reply)?;
        match reply {
            Value::Int(n) => Ok(n),
            other => Err(StoreError::UnexpectedReply(format!(
                "a count returned {other:?}"
            ))),
        }
    };
    let mut whole = Vec::with_capacity(users);
    for user in active_user_ids {
        let (Some(members), Some(entries)) = (replies.next(), replies.next()) else {
            unreachable!("the reply count was checked");
        };
        let (members, entries) = (count(members)?, count(entries)?);
        if members == entries {
            whole.push(Value::BulkString(user.as_bytes().to_vec()));
        } else if entries > 0 {
            return Ok(None);
        }
    }
    let bases = replies.next().unwrap_or(Value::Nil);
    server_error(&bases)?;
    // What the script would have answered beside these searches: nothing of its own to read.
    let script = Value::Array(vec![
        Value::Array(Vec::new()),
        Value::Array(Vec::new()),
        Value::Array(Vec::new()),
        bases,
        Value::Array(Vec::new()),
        Value::Array(Vec::new()),
        Value::Array(whole),
    ]);
    let user_searches = active_user_ids
        .iter()
        .map(String::as_str)
        .zip(searches)
        .collect();
    let mut passes = parse_injection_reply(
        script,
        query,
        top_k,
        false,
        user_searches,
        min_semantic_relevance,
    )?;
    passes.semantic =
        parse_relevant_vector_hits(semantic, VectorScore::VsimScore, min_semantic_relevance)?;
    Ok(Some(passes))
}

/// Decodes the replies of an [`injection_pipeline`] sent with `active_user_ids`: the script's,
/// with the semantic hits and the whole users' hits from the searches before it when they were
/// sent. Semantic hits below `min_semantic_relevance` are left out undecoded
/// ([`parse_relevant_vector_hits`]).
pub fn parse_injection_replies(
    replies: Vec<Value>,
    query: &[f32],
    top_k: usize,
    with_vectors: bool,
    active_user_ids: &[String],
    min_semantic_relevance: f64,
) -> Result<InjectionPasses, StoreError> {
    let mut replies = replies.into_iter();
    let Some(script) = replies.next_back() else {
        return Err(StoreError::UnexpectedReply(
            "injection pipeline returned nothing".into(),
        ));
    };
    let mut searches = replies;
    let semantic = searches.next();
    // A user's search is judged once the script has said whether that user's set counts.
    for reply in semantic.iter().chain([&script]) {
        server_error(reply)?;
    }
    let user_searches: Vec<(&str, Value)> = active_user_ids
        .iter()
        .map(String::as_str)
        .zip(&mut searches)
        .collect();
    if searches.next().is_some()
        || (semantic.is_some() && user_searches.len() != active_user_ids.len())
    {
        return Err(StoreError::UnexpectedReply(
            "injection pipeline returned another number of searches than it sent".into(),
        ));
    }
    let mut passes = parse_injection_reply(
        script,
        query,
        top_k,
        with_vectors,
        user_searches,
        min_semantic_relevance,
    )?;
    if let Some(semantic) = semantic {
        passes.semantic =
            parse_relevant_vector_hits(semantic, VectorScore::VsimScore, min_semantic_relevance)?;
    }
    Ok(passes)
}

/// A pipeline's error reply, in place of the command's answer, as an error.
fn server_error(reply: &Value) -> Result<(), StoreError> {
    match reply {
        Value::ServerError(error) => Err(redis::RedisError::from(error.clone()).into()),
        _ => Ok(()),
    }
}

/// A hit of a vector set search: the preference id, its cosine similarity to the query and
/// the attributes stored beside its vector.
#[derive(Debug, Clone)]
pub struct VectorHit {
    pub id: String,
    pub similarity: f64,
    pub attributes: VectorAttributes,
}

/// How a reply states closeness.
#[derive(Debug, Clone, Copy)]
pub enum VectorScore {
    /// `VSIM … WITHSCORES`: (1 + cosine similarity) / 2, in [0, 1].
    VsimScore,
    /// The cosine similarity itself (what the injection script computes for the user pass).
    Cosine,
}

/// Reads `id, score, attributes` triples (RESP2: a flat array; RESP3: a map of id to
/// `[score, attributes]`).
pub fn parse_vector_hits(reply: Value, score: VectorScore) -> Result<Vec<VectorHit>, StoreError> {
    parse_relevant_vector_hits(reply, score, 0.0)
}

/// Whether a semantic hit is close enough to inject: its similarity, clamped to 0..=1, not
/// below `min_semantic_relevance` (a floor of 0 refuses nothing). One rule for the parser,
/// which leaves the others undecoded, and for the choice
/// ([`super::inject::select_for_injection`]).
pub fn semantically_relevant(similarity: f64, min_semantic_relevance: f64) -> bool {
    // A score that is no number is not judged here, as the choice never judged one.
    similarity.is_nan() || similarity.clamp(0.0, 1.0) >= min_semantic_relevance
}

/// [`parse_vector_hits`] without the hits [`semantically_relevant`] refuses at
/// `min_semantic_relevance`, whose attributes are never decoded: most of a query's nearest
/// views can be too far to inject (every one, for a query about a subject the persona has no
/// view on), and decoding a record is the costliest part of reading a hit.
pub fn parse_relevant_vector_hits(
    reply: Value,
    score: VectorScore,
    min_semantic_relevance: f64,
) -> Result<Vec<VectorHit>, StoreError> {
    let mut hits = Vec::new();
    for (id, raw_score, attributes) in vector_triples(reply)? {
        let similarity = similarity_of(&raw_score, score)?;
        if !semantically_relevant(similarity, min_semantic_relevance) {
            continue;
        }
        hits.push(VectorHit {
            id: value_into_string(id),
            similarity,
            attributes: attributes_of(&attributes)?,
        });
    }
    Ok(hits)
}

/// A search reply's `(id, score, attributes)` triples, undecoded.
fn vector_triples(reply: Value) -> Result<Vec<(Value, Value, Value)>, StoreError> {
    let triples: Vec<(Value, Value, Value)> = match reply {
        Value::Nil => Vec::new(),
        Value::Array(items) => {
            if items.len() % 3 != 0 {
                return Err(StoreError::UnexpectedReply(format!(
                    "vector search returned {} items, not triples",
                    items.len()
                )));
            }
            let mut items = items.into_iter();
            let mut triples = Vec::new();
            while let (Some(id), Some(score), Some(attributes)) =
                (items.next(), items.next(), items.next())
            {
                triples.push((id, score, attributes));
            }
            triples
        }
        Value::Map(entries) => entries
            .into_iter()
            .map(|(id, pair)| match pair {
                Value::Array(mut pair) if pair.len() == 2 => {
                    let attributes = pair.pop().unwrap_or(Value::Nil);
                    let score = pair.pop().unwrap_or(Value::Nil);
                    Ok((id, score, attributes))
                }
                other => Err(StoreError::UnexpectedReply(format!(
                    "vector search entry {other:?}"
                ))),
            })
            .collect::<Result<_, _>>()?,
        other => {
            return Err(StoreError::UnexpectedReply(format!(
                "vector search returned {other:?}"
            )));
        }
    };
    Ok(triples)
}

/// The cosine similarity a search reply's score states.
fn similarity_of(raw_score: &Value, score: VectorScore) -> Result<f64, StoreError> {
    let value = match raw_score {
        Value::Double(value) => *value,
        other => value_to_string(other)
            .parse::<f64>()
            .map_err(|_| StoreError::UnexpectedReply(format!("vector search score {other:?}")))?,
    };
    Ok(match score {
        VectorScore::VsimScore => 2.0 * value - 1.0,
        VectorScore::Cosine => value,
    })
}

/// The injection script's passes over one persona, decoded.
#[derive(Debug, Default)]
pub struct InjectionPasses {
    pub semantic: Vec<VectorHit>,
    pub about_users: Vec<VectorHit>,
    /// Strongest first: (id, attributes).
    pub strongest: Vec<(String, VectorAttributes)>,
    /// The persona's bases, nearest first.
    pub bases: Vec<String>,
    /// Each hit's vector, when asked for.
    pub vectors: HashMap<String, Vec<f32>>,
    /// Hits of `about_users` whose attributes the user's set did not carry (a set built before
    /// it kept them): the caller reads them from the persona's set.
    pub unread_attributes: Vec<String>,
}

/// The comma-separated list of bases as stored.
pub fn parse_bases(text: &str) -> Vec<String> {
    text.split(',')
        .map(str::trim)
        .filter(|base| !base.is_empty())
        .map(str::to_string)
        .collect()
}

/// A vector as the injection script hands it over: a Q8 set's raw bytes (`VEMB RAW`: signed
/// codes, the direction up to one scale, which a cosine and a `VSIM` query both ignore), or a
/// `VEMB` reply's numbers for other quantisations.
pub fn stored_vector(value: &Value) -> Option<Vec<f32>> {
    match value {
        Value::BulkString(codes) => Some(codes.iter().map(|&code| code as i8 as f32).collect()),
        other => parse_vemb(other),
    }
}

/// A `VEMB` reply (doubles, or their text under RESP2) as a vector.
pub fn parse_vemb(reply: &Value) -> Option<Vec<f32>> {
    let Value::Array(items) = reply else {
        return None;
    };
    items
        .iter()
        .map(|item| match item {
            Value::Double(value) => Some(*value as f32),
            other => value_to_string(other).parse::<f32>().ok(),
        })
        .collect()
}

/// Decodes the injection script's reply (see [`super::scripts::INJECT`]); the user pass's
/// candidates are ranked against `query` here, the `top_k` nearest kept, and their vectors
/// added to `vectors` when `with_vectors`. `user_searches`: each present user's own set
/// searched beside the script (empty when the script searched them), of which only the users
/// the script found whole count; a hit whose member carries no attributes (a set built before
/// it kept them) is listed in [`InjectionPasses::unread_attributes`] for the caller to read.
pub fn parse_injection_reply(
    reply: Value,
    query: &[f32],
    top_k: usize,
    with_vectors: bool,
    user_searches: Vec<(&str, Value)>,
    min_semantic_relevance: f64,
) -> Result<InjectionPasses, StoreError> {
    let Value::Array(parts) = reply else {
        return Err(StoreError::UnexpectedReply(format!(
            "injection script returned {reply:?}"
        )));
    };
    let [
        semantic,
        about_users,
        strongest,
        bases,
        vectors,
        user_candidates,
        whole_users,
    ]: [Value; 7] = parts.try_into().map_err(|parts| {
        StoreError::UnexpectedReply(format!("injection script returned {parts:?}"))
    })?;
    let pairs = |value: Value, what: &str| -> Result<Vec<(Value, Value)>, StoreError> {
        match value {
            Value::Array(items) => {
                let mut pairs = Vec::with_capacity(items.len() / 2);
                let mut items = items.into_iter();
                while let (Some(id), Some(item)) = (items.next(), items.next()) {
                    pairs.push((id, item));
                }
                Ok(pairs)
            }
            other => Err(StoreError::UnexpectedReply(format!(
                "{what} returned {other:?}"
            ))),
        }
    };
    let strongest = pairs(strongest, "strongest pass")?
        .into_iter()
        .map(|(id, attributes)| Ok((value_into_string(id), attributes_of(&attributes)?)))
        .collect::<Result<_, StoreError>>()?;
    let mut vectors: HashMap<String, Vec<f32>> = pairs(vectors, "vectors")?
        .into_iter()
        .filter_map(|(id, vector)| Some((value_to_string(&id), stored_vector(&vector)?)))
        .collect();
    let mut about_users = parse_vector_hits(about_users, VectorScore::Cosine)?;
    let mut unread_attributes = Vec::new();
    if !user_searches.is_empty() {
        let whole: Vec<String> = match whole_users {
            Value::Array(users) => users.iter().map(value_to_string).collect(),
            Value::Nil => Vec::new(),
            other => {
                return Err(StoreError::UnexpectedReply(format!(
                    "whole users returned {other:?}"
                )));
            }
        };
        // The nearest hits over the whole users' sets, each preference once at its best.
        let mut nearest: HashMap<String, (f64, Value)> = HashMap::new();
        for (user, reply) in user_searches {
            // A set that is not whole is not read, whatever its search answered (even an
            // error: a stale set of another size); the user's candidates stand in for it.
            if !whole.iter().any(|w| w == user) {
                continue;
            }
            server_error(&reply)?;
            for (id, score, attributes) in vector_triples(reply)? {
                let similarity = similarity_of(&score, VectorScore::VsimScore)?;
                let id = value_into_string(id);
                if nearest
                    .get(&id)
                    .is_none_or(|(known, _)| similarity > *known)
                {
                    nearest.insert(id, (similarity, attributes));
                }
            }
        }
        let mut hits: Vec<(String, f64, Value)> = nearest
            .into_iter()
            .map(|(id, (similarity, attributes))| (id, similarity, attributes))
            .collect();
        hits.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        hits.truncate(top_k);
        for (id, similarity, attributes) in hits {
            let carried = match &attributes {
                Value::Nil => false,
                Value::BulkString(bytes) => !bytes.is_empty(),
                other => !value_to_string(other).is_empty(),
            };
            if !carried {
                unread_attributes.push(id.clone());
            }
            about_users.push(VectorHit {
                id,
                similarity,
                attributes: attributes_of(&attributes)?,
            });
        }
    }
    let Value::Array(items) = user_candidates else {
        return Err(StoreError::UnexpectedReply(format!(
            "user pass returned {user_candidates:?}"
        )));
    };
    let mut candidates = Vec::with_capacity(items.len() / 3);
    let mut items = items.into_iter();
    while let (Some(id), Some(vector), Some(attributes)) =
        (items.next(), items.next(), items.next())
    {
        let vector = stored_vector(&vector).ok_or_else(|| {
            StoreError::UnexpectedReply(format!("user candidate vector {vector:?}"))
        })?;
        candidates.push(UserCandidate {
            id: value_into_string(id),
            vector,
            attributes: value_into_string(attributes),
        });
    }
    // Users searched in their own sets came ranked; the candidates of users whose set was not
    // whole are ranked here, and the two lists merged (a preference about both kinds of user
    // once).
    let from_sets = about_users.len();
    for (candidate, similarity) in nearest_user_candidates(candidates, query, top_k) {
        if about_users[..from_sets]
            .iter()
            .any(|hit| hit.id == candidate.id)
        {
            continue;
        }
        // Only the chosen few's attributes are decoded.
        let attributes = VectorAttributes::parse(&candidate.attributes)?;
        if with_vectors {
            vectors.insert(candidate.id.clone(), candidate.vector);
        }
        about_users.push(VectorHit {
            id: candidate.id,
            similarity,
            attributes,
        });
    }
    if from_sets > 0 && about_users.len() > from_sets {
        about_users.sort_by(|a, b| {
            b.similarity
                .total_cmp(&a.similarity)
                .then_with(|| a.id.cmp(&b.id))
        });
        about_users.truncate(top_k);
    }
    Ok(InjectionPasses {
        semantic: parse_relevant_vector_hits(
            semantic,
            VectorScore::VsimScore,
            min_semantic_relevance,
        )?,
        about_users,
        strongest,
        bases: parse_bases(&value_to_string(&bases)),
        vectors,
        unread_attributes,
    })
}

/// A preference about a present user, as the injection script hands it over.
#[derive(Debug, Clone)]
pub struct UserCandidate {
    pub id: String,
    /// Its stored vector at any scale (a Q8 set's codes, or the dequantised vector).
    pub vector: Vec<f32>,
    /// Its vector-set attributes as stored (JSON).
    pub attributes: String,
}

/// The user pass's choice: the `k` candidates nearest `query` by cosine similarity (ties by
/// id), nearest first, each with its similarity and its vector scaled to unit length. A
/// candidate whose vector has another length than the query's is left out, as a vector set of
/// another size could not be searched.
pub fn nearest_user_candidates(
    candidates: Vec<UserCandidate>,
    query: &[f32],
    k: usize,
) -> Vec<(UserCandidate, f64)> {
    let length = |vector: &[f32]| vector.iter().map(|v| (v * v) as f64).sum::<f64>().sqrt();
    let query_length = length(query);
    let mut scored: Vec<(UserCandidate, f64)> = candidates
        .into_iter()
        .filter(|candidate| candidate.vector.len() == query.len())
        .map(|candidate| {
            let own = length(&candidate.vector);
            let dot: f64 = candidate
                .vector
                .iter()
                .zip(query)
                .map(|(v, q)| (v * q) as f64)
                .sum();
            let similarity = if own > 0.0 && query_length > 0.0 {
                dot / (own * query_length)
            } else {
                0.0
            };
            (candidate, similarity)
        })
        .collect();
    scored.sort_by(|(a, a_similarity), (b, b_similarity)| {
        b_similarity
            .total_cmp(a_similarity)
            .then_with(|| a.id.cmp(&b.id))
    });
    scored.truncate(k);
    // Only the chosen are scaled to unit length (up to 256 candidates are scored).
    for (candidate, _) in &mut scored {
        let own = length(&candidate.vector);
        if own > 0.0 {
            candidate
                .vector
                .iter_mut()
                .for_each(|v| *v = (*v as f64 / own) as f32);
        }
    }
    scored
}

/// A decoded preference with its `score` field when the query returned one.
pub type SearchHit = (Preference, Option<f64>);

/// Reads a RESP2 FT.SEARCH reply (`[total, key, [field, value, …], …]`) into its total and
/// decoded hits.
pub fn parse_search_reply(reply: Value) -> Result<(u64, Vec<SearchHit>), StoreError> {
    let items = match reply {
        Value::Array(items) => items,
        other => {
            return Err(StoreError::UnexpectedReply(format!(
                "FT.SEARCH returned {other:?}"
            )));
        }
    };
    let mut items = items.into_iter();
    let total = match items.next() {
        Some(Value::Int(total)) => total.max(0) as u64,
        other => {
            return Err(StoreError::UnexpectedReply(format!(
                "FT.SEARCH total was {other:?}"
            )));
        }
    };
    let mut results = Vec::new();
    while let Some(_key) = items.next() {
        let Some(Value::Array(pairs)) = items.next() else {
            return Err(StoreError::UnexpectedReply(
                "FT.SEARCH document without fields".into(),
            ));
        };
        let mut fields = HashMap::with_capacity(pairs.len() / 2);
        let mut pairs = pairs.into_iter();
        while let (Some(name), Some(value)) = (pairs.next(), pairs.next()) {
            fields.insert(value_to_string(&name), value_to_string(&value));
        }
        let score = fields.get("score").and_then(|s| s.parse::<f64>().ok());
        results.push((Preference::from_fields(&fields)?, score));
    }
    Ok((total, results))
}

/// RediSearch's default stop words. It drops them from queries, and a clause left empty
/// matches every document, so they are dropped here first.
const STOP_WORDS: [&str; 33] = [
    "a", "is", "the", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into",
    "it", "no", "not", "of", "on", "or", "such", "that", "their", "then", "there", "these", "they",
    "this", "to", "was", "will", "with",
];

/// The words of a free-text query as a RediSearch full-text clause over topic and opinion
/// (`(@name|opinion:(tea|jazz))`), any word matching; `None` when it has no word of two or
/// more letters or digits that is not a stop word. Words are kept to letters and digits, so
/// nothing in them is syntax.
pub fn keyword_clause(text: &str) -> Option<String> {
    let words = keyword_words(text);
    (!words.is_empty()).then(|| {
        format!(
            "(@{}|{}:({}))",
            field::NAME,
            field::OPINION,
            words.join("|")
        )
    })
}

/// The distinct words of a query that a keyword search looks for: letters and digits, two or
/// more of them, lower-cased, not a stop word; at most 16.
pub fn keyword_words(text: &str) -> Vec<String> {
    let mut words: Vec<String> = Vec::new();
    for word in document_words(text) {
        if !words.contains(&word) && words.len() < 16 {
            words.push(word);
        }
    }
    words
}

/// Every word of a text as keyword search counts it (see [`keyword_words`]), repeats kept.
pub fn document_words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .map(str::to_lowercase)
        .filter(|word| word.chars().count() >= 2 && !STOP_WORDS.contains(&word.as_str()))
        .collect()
}

/// Okapi BM25 (k1 1.2, b 0.75, RediSearch's defaults) of each document for the query's words,
/// with document frequencies over `documents` themselves.
pub fn bm25(words: &[String], documents: &[Vec<String>]) -> Vec<f64> {
    const K1: f64 = 1.2;
    const B: f64 = 0.75;
    let count = documents.len() as f64;
    if documents.is_empty() {
        return Vec::new();
    }
    let average = documents.iter().map(Vec::len).sum::<usize>() as f64 / count;
    let idf: Vec<f64> = words
        .iter()
        .map(|word| {
            let frequency = documents.iter().filter(|d| d.contains(word)).count() as f64;
            ((count - frequency + 0.5) / (frequency + 0.5) + 1.0).ln()
        })
        .collect();
    documents
        .iter()
        .map(|document| {
            let length = document.len() as f64;
            words
                .iter()
                .zip(&idf)
                .map(|(word, idf)| {
                    let tf = document.iter().filter(|w| *w == word).count() as f64;
                    if tf == 0.0 {
                        return 0.0;
                    }
                    idf * tf * (K1 + 1.0) / (tf + K1 * (1.0 - B + B * length / average.max(1.0)))
                })
                .sum()
        })
        .collect()
}

/// A full-text hit: the preference and its BM25 score.
pub struct KeywordHit {
    pub preference: Preference,
    pub bm25: f64,
}

/// Reads an `FT.SEARCH … WITHSCORES` reply (`[total, key, score, [field, value, …], …]`).
pub fn parse_keyword_reply(reply: Value) -> Result<Vec<KeywordHit>, StoreError> {
    let Value::Array(items) = reply else {
        return Err(StoreError::UnexpectedReply(format!(
            "FT.SEARCH returned {reply:?}"
        )));
    };
    let mut hits = Vec::new();
    let mut items = items.into_iter().skip(1);
    while let (Some(_key), Some(score), Some(Value::Array(pairs))) =
        (items.next(), items.next(), items.next())
    {
        let mut fields = HashMap::with_capacity(pairs.len() / 2);
        let mut pairs = pairs.into_iter();
        while let (Some(name), Some(value)) = (pairs.next(), pairs.next()) {
            fields.insert(value_to_string(&name), value_to_string(&value));
        }
        hits.push(KeywordHit {
            preference: Preference::from_fields(&fields)?,
            bm25: value_to_string(&score).parse().unwrap_or(0.0),
        });
    }
    Ok(hits)
}

/// [`value_to_string`] for a value no longer needed: a bulk string's bytes become the String
/// without a copy when they are UTF-8 (as everything this service writes is).
pub fn value_into_string(value: Value) -> String {
    match value {
        Value::BulkString(bytes) => String::from_utf8(bytes)
            .unwrap_or_else(|error| String::from_utf8_lossy(error.as_bytes()).into_owned()),
        Value::SimpleString(text) => text,
        Value::VerbatimString { text, .. } => text,
        other => value_to_string(&other),
    }
}

/// A vector set's attributes as a reply holds them (JSON text, or nothing), decoded without
/// first copying them into a String.
pub fn attributes_of(value: &Value) -> Result<VectorAttributes, StoreError> {
    match value {
        Value::BulkString(bytes) => VectorAttributes::parse_bytes(bytes),
        other => VectorAttributes::parse(&value_to_string(other)),
    }
}

pub fn value_to_string(value: &Value) -> String {
    match value {
        Value::BulkString(bytes) => String::from_utf8_lossy(bytes).into_owned(),
        Value::SimpleString(text) => text.clone(),
        Value::VerbatimString { text, .. } => text.clone(),
        Value::Int(n) => n.to_string(),
        Value::Double(n) => n.to_string(),
        Value::Okay => "OK".into(),
        Value::Nil => String::new(),
        other => format!("{other:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_semantic_search_asks_redis_for_the_hits_over_the_floor_and_a_hair_more() {
        // (floor, EPSILON): a hit scores (1 + cosine) / 2, Redis keeps those at 1 - EPSILON up.
        for (floor, expected) in [
            (0.25, Some(0.375)),
            (0.0, None),
            (-0.5, None),
            (f64::NAN, None),
            (1.0, Some(0.0)),
            (1.5, Some(0.0)),
        ] {
            let epsilon = relevance_epsilon(floor);
            match (epsilon, expected) {
                (None, None) => {}
                (Some(epsilon), Some(expected)) => {
                    assert!(
                        epsilon > expected && epsilon - expected < 1e-5,
                        "{floor}: {epsilon}"
                    );
                    // The lowest cosine Redis then sends is just under the floor.
                    let lowest_cosine = 2.0 * (1.0 - epsilon) - 1.0;
                    assert!(lowest_cosine < floor.min(1.0), "{floor}");
                }
                other => panic!("{floor}: {other:?}"),
            }
        }
    }

    fn candidate(id: &str, vector: &[f32]) -> UserCandidate {
        UserCandidate {
            id: id.to_string(),
            vector: vector.to_vec(),
            attributes: String::new(),
        }
    }

    #[test]
    fn a_semantic_hit_is_relevant_at_or_above_the_floor_after_clamping() {
        // (similarity, floor, relevant)
        let table = [
            (0.25, 0.25, true),
            (0.2499, 0.25, false),
            (0.9, 0.25, true),
            (-0.3, 0.0, true),
            (-0.3, 0.1, false),
            (1.7, 1.0, true),
            (f64::NAN, 0.25, true),
        ];
        for (similarity, floor, relevant) in table {
            assert_eq!(
                semantically_relevant(similarity, floor),
                relevant,
                "similarity {similarity} at floor {floor}"
            );
        }
    }

    #[test]
    fn semantic_hits_below_the_floor_are_left_out_without_decoding_their_attributes() {
        // A RESP2 `VSIM … WITHSCORES WITHATTRIBS` reply: id, score ((1 + cosine) / 2), attributes.
        let hit = |id: &str, cosine: f64, attributes: &str| {
            [
                Value::BulkString(id.as_bytes().to_vec()),
                Value::Double((1.0 + cosine) / 2.0),
                Value::BulkString(attributes.as_bytes().to_vec()),
            ]
        };
        let record = r#"{"n":"green tea","o":"I like it.","c":"food","s":"0.5"}"#;
        let reply = || {
            Value::Array(
                [
                    hit("near", 0.6, record),
                    hit("edge", 0.25, record),
                    // Too far to inject, and unreadable: read, it would fail the whole call.
                    hit("far", 0.1, "{not json"),
                ]
                .concat(),
            )
        };
        let hits = parse_relevant_vector_hits(reply(), VectorScore::VsimScore, 0.25).unwrap();
        let ids: Vec<&str> = hits.iter().map(|hit| hit.id.as_str()).collect();
        assert_eq!(ids, ["near", "edge"]);
        assert_eq!(hits[0].attributes.n, "green tea");
        assert!((hits[0].similarity - 0.6).abs() < 1e-12);
        // Without the floor every hit is decoded, the unreadable one too.
        assert!(parse_vector_hits(reply(), VectorScore::VsimScore).is_err());
    }

    #[test]
    fn plain_injection_replies_read_whole_users_sets_and_call_for_the_script_otherwise() {
        let record = |opinion: &str| format!(r#"{{"n":"tea","o":"{opinion}","s":"0.5"}}"#);
        let search = |hits: &[(&str, f64, String)]| {
            Value::Array(
                hits.iter()
                    .flat_map(|(id, cosine, attributes)| {
                        [
                            Value::BulkString(id.as_bytes().to_vec()),
                            Value::Double((1.0 + cosine) / 2.0),
                            Value::BulkString(attributes.as_bytes().to_vec()),
                        ]
                    })
                    .collect(),
            )
        };
        let users = vec!["dana".to_string(), "eve".to_string()];
        let query = [1.0f32, 0.0, 0.0];
        // A search of a stray set of another size answers an error in place.
        let stray = || redis::parse_redis_value(b"-ERR vector dimension mismatch\r\n").unwrap();
        // semantic, dana's search, eve's search, dana's VCARD and ZLEXCOUNT, eve's, GET bases.
        let replies = |eve_members: i64, eve_entries: i64| {
            vec![
                search(&[("near", 0.7, record("near")), ("far", 0.1, "{bad".into())]),
                search(&[("d1", 0.4, record("about dana"))]),
                stray(),
                Value::Int(1),
                Value::Int(1),
                Value::Int(eve_members),
                Value::Int(eve_entries),
                Value::BulkString(b"base-a,base-b".to_vec()),
            ]
        };
        // Eve has no entries, only a stray set of another size: not read, no error.
        let passes = parse_plain_injection_replies(replies(1, 0), &query, 16, &users, 0.25)
            .unwrap()
            .expect("every user with entries has a whole set");
        let ids = |hits: &[VectorHit]| hits.iter().map(|h| h.id.clone()).collect::<Vec<_>>();
        assert_eq!(ids(&passes.semantic), ["near"]);
        assert_eq!(ids(&passes.about_users), ["d1"]);
        assert_eq!(passes.about_users[0].attributes.o, "about dana");
        assert_eq!(passes.bases, ["base-a", "base-b"]);
        assert!(passes.strongest.is_empty() && passes.vectors.is_empty());
        // Eve has entries but her set is not whole (none, short, or stray): the script reads
        // her candidates.
        for members in [0, 1, 3] {
            assert!(
                parse_plain_injection_replies(replies(members, 2), &query, 16, &users, 0.25)
                    .unwrap()
                    .is_none(),
                "{members} members for 2 entries"
            );
        }
        // Another number of replies than the pipeline sends is an error, not a guess.
        let mut short = replies(0, 0);
        short.pop();
        assert!(parse_plain_injection_replies(short, &query, 16, &users, 0.25).is_err());
    }

    #[test]
    fn the_user_pass_keeps_the_k_nearest_by_cosine_at_any_scale() {
        let query = [1.0, 0.0, 0.0];
        // (candidate, its vector at some scale, its cosine with the query)
        let table: [(&str, [f32; 3], f64); 6] = [
            ("far", [0.0, 1.0, 0.0], 0.0),
            ("against", [-2.0, 0.0, 0.0], -1.0),
            // Q8 codes: the same direction as [0.6, 0.8, 0] at 127 / 0.8.
            ("codes", [95.0, 127.0, 0.0], 0.6),
            ("same", [0.5, 0.0, 0.0], 1.0),
            ("tied-b", [1.0, 1.0, 0.0], std::f64::consts::FRAC_1_SQRT_2),
            ("tied-a", [3.0, 3.0, 0.0], std::f64::consts::FRAC_1_SQRT_2),
        ];
        let candidates = table.iter().map(|(id, v, _)| candidate(id, v)).collect();
        let chosen = nearest_user_candidates(candidates, &query, 4);
        let ids: Vec<&str> = chosen.iter().map(|(c, _)| c.id.as_str()).collect();
        // Nearest first; equal similarity by id.
        assert_eq!(ids, ["same", "tied-a", "tied-b", "codes"]);
        for (hit, similarity) in &chosen {
            let expected = table.iter().find(|(id, ..)| *id == hit.id).unwrap().2;
            assert!((similarity - expected).abs() < 0.002, "{}", hit.id);
            let length: f32 = hit.vector.iter().map(|v| v * v).sum::<f32>().sqrt();
            assert!(
                (length - 1.0).abs() < 1e-6,
                "{} comes back at unit length",
                hit.id
            );
        }
    }

    #[test]
    fn the_user_pass_leaves_out_vectors_of_another_size_and_scores_zero_vectors_zero() {
        let query = [0.0, 1.0];
        let candidates = vec![
            candidate("short", &[1.0]),
            candidate("zero", &[0.0, 0.0]),
            candidate("near", &[0.1, 1.0]),
        ];
        let chosen = nearest_user_candidates(candidates, &query, 8);
        let scored: Vec<(&str, f64)> = chosen
            .iter()
            .map(|(c, similarity)| (c.id.as_str(), *similarity))
            .collect();
        assert_eq!(scored.len(), 2);
        assert_eq!(scored[0].0, "near");
        assert_eq!(scored[1], ("zero", 0.0));
        assert!(nearest_user_candidates(Vec::new(), &query, 8).is_empty());
        let one = vec![candidate("near", &[0.1, 1.0])];
        assert!(nearest_user_candidates(one, &query, 0).is_empty());
    }

    #[test]
    fn keyword_clauses_carry_only_words() {
        assert_eq!(
            keyword_clause("Green tea, or JAZZ? tea!").as_deref(),
            Some("(@name|opinion:(green|tea|jazz))")
        );
        // Only stop words: RediSearch would match everything, so there is no clause.
        assert_eq!(keyword_clause("the and of it"), None);
        // Query syntax in the text stays text: it cannot reach another persona or field.
        assert_eq!(
            keyword_clause("x}) | @persona_id:{bob*").as_deref(),
            Some("(@name|opinion:(persona|id|bob))")
        );
        assert_eq!(keyword_clause("? ! a"), None);
    }

    #[test]
    fn bm25_ranks_the_rarer_and_denser_match_first() {
        let documents: Vec<Vec<String>> = [
            "The band Zorblax makes the best synth music.",
            "I love green tea.",
            "Green tea and jazz, green tea above all.",
            "Rain is calming.",
        ]
        .iter()
        .map(|text| document_words(text))
        .collect();
        let scores = bm25(&keyword_words("the new Zorblax album?"), &documents);
        assert!(
            scores[0] > 0.0 && scores[1..].iter().all(|s| *s == 0.0),
            "{scores:?}"
        );
        let scores = bm25(&keyword_words("green tea"), &documents);
        assert!(scores[2] > scores[1] && scores[1] > 0.0, "{scores:?}");
        assert_eq!(scores[3], 0.0);
        assert!(bm25(&keyword_words("tea"), &[]).is_empty());
    }

    #[test]
    fn escape_tag_makes_punctuation_and_whitespace_literal() {
        let cases = [
            ("alice", "alice"),
            ("u-1", "u\\-1"),
            ("a:b", "a\\:b"),
            (
                "u-1}|@persona_id:{other",
                "u\\-1\\}\\|\\@persona_id\\:\\{other",
            ),
            ("two words", "two\\ words"),
            ("a,b.c'd\"e", "a\\,b\\.c\\'d\\\"e"),
            ("snow_☃", "snow_☃"),
        ];
        for (input, expected) in cases {
            assert_eq!(escape_tag(input), expected, "escaping {input:?}");
        }
    }

    #[test]
    fn vectors_round_trip_as_little_endian_f32() {
        let vector = [1.0f32, -0.5, 0.25];
        let bytes = vector_to_bytes(&vector);
        assert_eq!(bytes.len(), 12);
        assert_eq!(&bytes[..4], &1.0f32.to_le_bytes());
        assert_eq!(bytes_to_vector(&bytes), vector);
    }
}
