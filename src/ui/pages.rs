//! The inspector's pages: each handler asks the service (typed client) and renders a
//! template. Stored text reaches the page only through the templates' HTML escaping, less
//! invisible and bidi-control characters (`visible`).

use std::collections::BTreeMap;
use std::sync::Arc;

use askama::Template;
use axum::extract::{Form, Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{Html, IntoResponse, Redirect, Response};
use serde::Deserialize;

use super::Inspector;
use super::chart::{strength_history, strength_svg};
use crate::client::{
    AddRequest, ClientError, EvolveRequest, InjectRequest, ListRequest, PurgeUserRequest,
    RestoreRequest, RetractRequest, SearchRequest,
};
use crate::ingest::dead_letters::Selection;
use crate::serve::protocol::{PersonasRequest, SearchMode};
use crate::serve::render::{Format, visible, why};
use crate::store::{Preference, PreferenceStats, Stance};

type Shared = State<Arc<Inspector>>;

const VERSION: &str = env!("CARGO_PKG_VERSION");
const CSRF_COOKIE: &str = "pp_csrf";
/// How many preferences a persona page lists (strongest first).
const PAGE_LIMIT: usize = 500;

/// The page chrome every template shares.
struct Chrome {
    title: String,
    writable: bool,
    version: &'static str,
    csrf: String,
}

// ---------------------------------------------------------------------------------------------
// Templates

#[derive(Template)]
#[template(path = "personas.html")]
struct PersonasPage {
    title: String,
    writable: bool,
    version: &'static str,
    personas: Vec<PersonaRow>,
}

struct PersonaRow {
    persona_id: String,
    active: u64,
    total: u64,
    strongest: Vec<String>,
    last_activity: String,
}

#[derive(Template)]
#[template(path = "persona.html")]
struct PersonaPage {
    title: String,
    writable: bool,
    version: &'static str,
    csrf: String,
    persona_id: String,
    stats: PreferenceStats,
    bases: Vec<String>,
    categories: Vec<String>,
    filters: Filters,
    search: Option<Vec<Belief>>,
    groups: Vec<Group>,
}

struct Group {
    name: String,
    items: Vec<Belief>,
}

/// One preference as a page lists it.
struct Belief {
    id: String,
    persona_id: String,
    name: String,
    opinion: String,
    stance: String,
    strength: f64,
    decayed: f64,
    reinforcement_count: u64,
    active: bool,
    inherited_from: String,
}

impl Belief {
    fn of(preference: &Preference) -> Belief {
        Belief {
            id: preference.id.clone(),
            persona_id: preference.persona_id.clone(),
            name: visible(&preference.name),
            opinion: visible(&preference.opinion),
            stance: stance_text(preference.stance).to_string(),
            strength: preference.strength,
            decayed: preference.decayed_strength.unwrap_or(preference.strength),
            reinforcement_count: preference.reinforcement_count,
            active: preference.active,
            inherited_from: preference.inherited_from.clone(),
        }
    }
}

/// An RFC 3339 time as people read it: `2026-11-23 02:15 UTC`; other text unchanged.
fn when(text: &str) -> String {
    match crate::timestamp::Timestamp::parse(text) {
        Ok(at) => {
            let at = at.instant().to_offset(time::UtcOffset::UTC);
            format!(
                "{:04}-{:02}-{:02} {:02}:{:02} UTC",
                at.year(),
                at.month() as u8,
                at.day(),
                at.hour(),
                at.minute()
            )
        }
        Err(_) => text.to_string(),
    }
}

fn stance_text(stance: Option<Stance>) -> &'static str {
    stance.map(Stance::as_str).unwrap_or("unstated")
}

#[derive(Debug, Default, Deserialize)]
pub struct Filters {
    #[serde(default)]
    category: String,
    #[serde(default)]
    stance: String,
    #[serde(default = "active_state")]
    state: String,
    #[serde(default)]
    q: String,
    #[serde(default = "semantic_mode")]
    mode: String,
}

fn active_state() -> String {
    "active".into()
}
fn semantic_mode() -> String {
    "semantic".into()
}

#[derive(Template)]
#[template(path = "preference.html")]
struct PreferencePage {
    title: String,
    writable: bool,
    version: &'static str,
    csrf: String,
    persona_id: String,
    p: Preference,
    stance: &'static str,
    decayed: f64,
    related: String,
    evidence: String,
    chart: String,
    versions: Vec<VersionRow>,
}

struct VersionRow {
    version: u64,
    action: String,
    timestamp: String,
    old_opinion: String,
    old_stance: String,
    new_opinion: String,
    reason: String,
    restorable: bool,
}

#[derive(Template)]
#[template(path = "inject.html")]
struct InjectPage {
    title: String,
    writable: bool,
    version: &'static str,
    persona_id: String,
    form: InjectForm,
    result: Option<InjectResult>,
}

#[derive(Debug, Default, Deserialize)]
pub struct InjectForm {
    #[serde(default)]
    message: String,
    #[serde(default)]
    users: String,
    #[serde(default = "xml_format")]
    format: String,
    #[serde(default)]
    resident: Option<String>,
}

fn xml_format() -> String {
    "xml".into()
}

struct InjectResult {
    rendered: String,
    semantic_skipped: Option<String>,
    rows: Vec<InjectRow>,
    took_ms: f64,
}

struct InjectRow {
    name: String,
    why: String,
    relevance: f64,
    strength: f64,
    score: f64,
}

#[derive(Template)]
#[template(path = "dead_letters.html")]
struct DeadLettersPage {
    title: String,
    writable: bool,
    version: &'static str,
    csrf: String,
    letters: Vec<LetterRow>,
    more: bool,
}

struct LetterRow {
    sequence: u64,
    persona_id: String,
    code: String,
    reason: String,
    at: String,
}

#[derive(Template)]
#[template(path = "confirm_purge.html")]
struct ConfirmPurgePage {
    title: String,
    writable: bool,
    version: &'static str,
    csrf: String,
    persona_id: String,
    user_id: String,
}

#[derive(Template)]
#[template(path = "confirm_delete.html")]
struct ConfirmDeletePage {
    title: String,
    writable: bool,
    version: &'static str,
    csrf: String,
    persona_id: String,
}

#[derive(Template)]
#[template(path = "message.html")]
struct MessagePage {
    title: String,
    writable: bool,
    version: &'static str,
    heading: String,
    message: String,
    back: String,
}

// ---------------------------------------------------------------------------------------------
// Rendering helpers

fn page(template: impl Template, status: StatusCode, csrf_cookie: Option<&str>) -> Response {
    match template.render() {
        Ok(html) => {
            let mut response = (status, Html(html)).into_response();
            if let Some(token) = csrf_cookie
                && let Ok(value) = HeaderValue::from_str(&format!(
                    "{CSRF_COOKIE}={token}; Path=/; HttpOnly; SameSite=Strict"
                ))
            {
                response.headers_mut().insert(header::SET_COOKIE, value);
            }
            response
        }
        Err(error) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("rendering the page failed: {error}"),
        )
            .into_response(),
    }
}

/// The chrome of a page: its CSRF token is the visitor's cookie, or a new one (returned as
/// the cookie to set).
fn chrome(
    inspector: &Inspector,
    headers: &HeaderMap,
    title: impl Into<String>,
) -> (Chrome, Option<String>) {
    let (csrf, new) = match cookie(headers, CSRF_COOKIE) {
        Some(token) if valid_token(&token) => (token, None),
        _ => {
            let token = uuid::Uuid::new_v4().simple().to_string();
            (token.clone(), Some(token))
        }
    };
    (
        Chrome {
            title: title.into(),
            writable: inspector.writable,
            version: VERSION,
            csrf,
        },
        new,
    )
}

fn valid_token(token: &str) -> bool {
    token.len() == 32 && token.chars().all(|c| c.is_ascii_hexdigit())
}

fn cookie(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(key, _)| *key == name)
        .map(|(_, value)| value.to_string())
}

fn message(
    inspector: &Inspector,
    status: StatusCode,
    heading: &str,
    text: String,
    back: &str,
) -> Response {
    page(
        MessagePage {
            title: heading.to_string(),
            writable: inspector.writable,
            version: VERSION,
            heading: heading.to_string(),
            message: visible(&text),
            back: back.to_string(),
        },
        status,
        None,
    )
}

/// A failed request to the service, as a page: 503 when no service answered, 404 for a
/// missing preference, 400 for a refused request.
fn failed(inspector: &Inspector, error: ClientError, back: &str) -> Response {
    let status = match &error {
        e if e.is_unavailable() => StatusCode::SERVICE_UNAVAILABLE,
        ClientError::Service { error, .. } => {
            StatusCode::from_u16(error.code).unwrap_or(StatusCode::BAD_GATEWAY)
        }
        ClientError::InvalidPersona { .. } => StatusCode::BAD_REQUEST,
        _ => StatusCode::BAD_GATEWAY,
    };
    message(
        inspector,
        status,
        "The service said no",
        error.to_string(),
        back,
    )
}

/// Why a write is refused, if it is: writes need `ui.allow_writes`, a CSRF token matching the
/// cookie, and no foreign origin.
fn refused_write(inspector: &Inspector, headers: &HeaderMap, token: &str) -> Option<Response> {
    if !inspector.writable {
        return Some(message(
            inspector,
            StatusCode::FORBIDDEN,
            "Read-only",
            "This inspector has no write access (ui.allow_writes is off).".into(),
            "/",
        ));
    }
    let cookie_token = cookie(headers, CSRF_COOKIE).unwrap_or_default();
    let same_origin = match (headers.get(header::ORIGIN), headers.get(header::HOST)) {
        (Some(origin), Some(host)) => origin
            .to_str()
            .ok()
            .and_then(|origin| origin.split_once("://").map(|(_, rest)| rest.to_string()))
            .zip(host.to_str().ok())
            .is_some_and(|(origin, host)| origin == host),
        (Some(_), None) => false,
        (None, _) => true,
    };
    if !valid_token(token) || token != cookie_token || !same_origin {
        return Some(message(
            inspector,
            StatusCode::FORBIDDEN,
            "Refused",
            "The form's token does not match this browser's (or it came from another site): \
             reload the page and try again."
                .into(),
            "/",
        ));
    }
    None
}

fn back_to(path: String) -> Response {
    Redirect::to(&path).into_response()
}

/// After a curation request: back to `back` when the service applied it, else why not.
fn after_write<T>(inspector: &Inspector, result: Result<T, ClientError>, back: String) -> Response {
    match result {
        Ok(_) => back_to(back),
        Err(error) => failed(inspector, error, &back),
    }
}

// ---------------------------------------------------------------------------------------------
// Pages

pub async fn style() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/css; charset=utf-8")],
        include_str!("../../templates/style.css"),
    )
}

pub async fn personas(State(inspector): Shared, headers: HeaderMap) -> Response {
    let (chrome, cookie) = self::chrome(&inspector, &headers, "Personas");
    let request = PersonasRequest {
        limit: 200,
        offset: 0,
    };
    let reply = match inspector.client.personas(&request).await {
        Ok(reply) => reply,
        Err(error) => return failed(&inspector, error, "/"),
    };
    let personas = reply
        .personas
        .into_iter()
        .map(|p| PersonaRow {
            persona_id: p.persona_id,
            active: p.active,
            total: p.total,
            strongest: p.strongest.iter().map(|topic| visible(topic)).collect(),
            last_activity: if p.last_activity.is_empty() {
                "unknown".into()
            } else {
                when(&p.last_activity)
            },
        })
        .collect();
    page(
        PersonasPage {
            title: chrome.title,
            writable: chrome.writable,
            version: chrome.version,
            personas,
        },
        StatusCode::OK,
        cookie.as_deref(),
    )
}

pub async fn persona(
    State(inspector): Shared,
    headers: HeaderMap,
    Path(persona_id): Path<String>,
    Query(filters): Query<Filters>,
) -> Response {
    let (chrome, cookie) = self::chrome(&inspector, &headers, format!("Persona {persona_id}"));
    let client = &inspector.client;
    let list = ListRequest {
        persona_id: persona_id.clone(),
        category: (!filters.category.is_empty()).then(|| filters.category.clone()),
        include_retracted: filters.state != "active",
        limit: PAGE_LIMIT,
    };
    let (stats, listed, bases) = tokio::join!(
        client.stats(&persona_id),
        client.list(&list),
        client.bases(&persona_id)
    );
    let back = format!("/personas/{persona_id}");
    let (stats, listed, bases) = match (stats, listed, bases) {
        (Ok(stats), Ok(listed), Ok(bases)) => (stats, listed, bases),
        (Err(error), _, _) | (_, Err(error), _) | (_, _, Err(error)) => {
            return failed(&inspector, error, "/");
        }
    };
    let keep = |p: &Preference| {
        let state = match filters.state.as_str() {
            "retracted" => !p.active,
            "all" => true,
            _ => p.active,
        };
        let stance = filters.stance.is_empty() || stance_text(p.stance) == filters.stance;
        state && stance
    };
    let mut grouped: BTreeMap<String, Vec<Belief>> = BTreeMap::new();
    for preference in listed.iter().filter(|p| keep(p)) {
        grouped
            .entry(preference.category.clone())
            .or_default()
            .push(Belief::of(preference));
    }
    let search = if filters.q.trim().is_empty() {
        None
    } else {
        let mode = match filters.mode.as_str() {
            "keyword" => SearchMode::Keyword,
            "hybrid" => SearchMode::Hybrid,
            _ => SearchMode::Semantic,
        };
        let request = SearchRequest {
            persona_id: persona_id.clone(),
            query: filters.q.trim().to_string(),
            top_k: 10,
            include_retracted: filters.state != "active",
            mode,
        };
        match client.search(&request).await {
            Ok(hits) => Some(
                hits.iter()
                    .map(|hit| &hit.preference)
                    .filter(|p| keep(p))
                    .map(Belief::of)
                    .collect(),
            ),
            Err(error) => return failed(&inspector, error, &back),
        }
    };
    page(
        PersonaPage {
            title: chrome.title,
            writable: chrome.writable,
            version: chrome.version,
            csrf: chrome.csrf,
            persona_id,
            stats,
            bases: bases.bases,
            categories: inspector.categories.clone(),
            filters: Filters {
                q: visible(&filters.q),
                ..filters
            },
            search,
            groups: grouped
                .into_iter()
                .map(|(name, items)| Group { name, items })
                .collect(),
        },
        StatusCode::OK,
        cookie.as_deref(),
    )
}

pub async fn preference(
    State(inspector): Shared,
    headers: HeaderMap,
    Path((persona_id, id)): Path<(String, String)>,
) -> Response {
    let preference = match inspector.client.get(&persona_id, &id).await {
        Ok(preference) => preference,
        Err(error) => return failed(&inspector, error, &format!("/personas/{persona_id}")),
    };
    let (chrome, cookie) = self::chrome(&inspector, &headers, visible(&preference.name));
    let dropped = preference.history_entries_dropped;
    let versions = preference
        .evolution_history
        .iter()
        .enumerate()
        .map(|(position, entry)| VersionRow {
            version: entry.version.unwrap_or(dropped + position as u64 + 1),
            action: entry.action.clone().unwrap_or_else(|| "evolution".into()),
            timestamp: when(&entry.timestamp),
            old_opinion: visible(entry.old_opinion.as_deref().unwrap_or("")),
            old_stance: entry.old_stance.clone().unwrap_or_default(),
            new_opinion: visible(entry.new_opinion.as_deref().unwrap_or("")),
            reason: visible(&entry.reason),
            restorable: entry.old_opinion.as_deref().is_some_and(|o| !o.is_empty()),
        })
        .rev()
        .collect();
    let chart = strength_svg(&strength_history(&preference, inspector.reinforce_rate));
    let clean = Preference {
        name: visible(&preference.name),
        opinion: visible(&preference.opinion),
        created_at: when(&preference.created_at),
        last_reinforced: when(&preference.last_reinforced),
        reinforcements: preference
            .reinforcements
            .iter()
            .map(|r| crate::store::Reinforcement {
                timestamp: when(&r.timestamp),
                ..r.clone()
            })
            .collect(),
        ..preference
    };
    page(
        PreferencePage {
            title: chrome.title,
            writable: chrome.writable,
            version: chrome.version,
            csrf: chrome.csrf,
            persona_id,
            stance: stance_text(clean.stance),
            decayed: clean.decayed_strength.unwrap_or(clean.strength),
            related: visible(&clean.related_user_ids.join(", ")),
            evidence: visible(&clean.evidence_user_ids.join(", ")),
            chart,
            versions,
            p: clean,
        },
        StatusCode::OK,
        cookie.as_deref(),
    )
}

pub async fn inject(
    State(inspector): Shared,
    headers: HeaderMap,
    Path(persona_id): Path<String>,
    Query(form): Query<InjectForm>,
) -> Response {
    let (chrome, cookie) =
        self::chrome(&inspector, &headers, format!("Injection for {persona_id}"));
    let asked = !form.message.is_empty() || !form.users.is_empty() || form.resident.is_some();
    let result = if asked {
        let format = match form.format.as_str() {
            "markdown" => Format::Markdown,
            "json" => Format::Json,
            _ => Format::Xml,
        };
        let request = InjectRequest {
            persona_id: persona_id.clone(),
            query: Some(form.message.clone()),
            query_embedding: None,
            active_user_ids: form
                .users
                .split(',')
                .map(str::trim)
                .filter(|user| !user.is_empty())
                .map(str::to_string)
                .collect(),
            max_count: 8,
            max_chars: 2000,
            format,
            resident: form.resident.is_some(),
            explain: true,
        };
        match inspector.client.inject(&request).await {
            Ok(reply) => Some(InjectResult {
                rows: reply
                    .preferences
                    .iter()
                    .map(|p| InjectRow {
                        name: visible(&p.name),
                        why: visible(&why(p)),
                        relevance: p.relevance,
                        strength: p.decayed_strength,
                        score: p.score,
                    })
                    .collect(),
                rendered: reply.rendered,
                semantic_skipped: reply.semantic_skipped,
                took_ms: reply.took_ms,
            }),
            Err(error) => {
                return failed(&inspector, error, &format!("/personas/{persona_id}/inject"));
            }
        }
    } else {
        None
    };
    page(
        InjectPage {
            title: chrome.title,
            writable: chrome.writable,
            version: chrome.version,
            persona_id,
            form,
            result,
        },
        StatusCode::OK,
        cookie.as_deref(),
    )
}

pub async fn dead_letters(State(inspector): Shared, headers: HeaderMap) -> Response {
    let (chrome, cookie) = self::chrome(&inspector, &headers, "Dead letters");
    let selection = Selection {
        limit: 200,
        ..Selection::default()
    };
    let listing = match inspector.dead_letters.list(&selection).await {
        Ok(listing) => listing,
        Err(error) => {
            return message(
                &inspector,
                StatusCode::SERVICE_UNAVAILABLE,
                "Dead letters unavailable",
                error.to_string(),
                "/",
            );
        }
    };
    let letters = listing
        .letters
        .iter()
        .map(|letter| LetterRow {
            sequence: letter.sequence,
            persona_id: visible(
                letter
                    .original_subject
                    .rsplit('.')
                    .next()
                    .unwrap_or_default(),
            ),
            code: visible(&letter.reason_code),
            reason: visible(&letter.reason),
            at: when(&letter.dead_lettered_at),
        })
        .collect();
    page(
        DeadLettersPage {
            title: chrome.title,
            writable: chrome.writable,
            version: chrome.version,
            csrf: chrome.csrf,
            letters,
            more: listing.truncated,
        },
        StatusCode::OK,
        cookie.as_deref(),
    )
}

#[derive(Debug, Deserialize)]
pub struct PurgeQuery {
    user_id: String,
}

pub async fn confirm_purge(
    State(inspector): Shared,
    headers: HeaderMap,
    Path(persona_id): Path<String>,
    Query(query): Query<PurgeQuery>,
) -> Response {
    if !inspector.writable
        && let Some(refused) = refused_write(&inspector, &headers, "")
    {
        return refused;
    }
    let (chrome, cookie) = self::chrome(&inspector, &headers, "Erase a user");
    page(
        ConfirmPurgePage {
            title: chrome.title,
            writable: chrome.writable,
            version: chrome.version,
            csrf: chrome.csrf,
            persona_id,
            user_id: visible(&query.user_id),
        },
        StatusCode::OK,
        cookie.as_deref(),
    )
}

pub async fn confirm_delete(
    State(inspector): Shared,
    headers: HeaderMap,
    Path(persona_id): Path<String>,
) -> Response {
    if !inspector.writable
        && let Some(refused) = refused_write(&inspector, &headers, "")
    {
        return refused;
    }
    let (chrome, cookie) = self::chrome(&inspector, &headers, "Delete a persona");
    page(
        ConfirmDeletePage {
            title: chrome.title,
            writable: chrome.writable,
            version: chrome.version,
            csrf: chrome.csrf,
            persona_id: visible(&persona_id),
        },
        StatusCode::OK,
        cookie.as_deref(),
    )
}

// ---------------------------------------------------------------------------------------------
// Curation (write access)

#[derive(Debug, Deserialize)]
pub struct DeleteForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    confirm: String,
}

/// Deletes a persona once its id was typed again: a tick box is too easy to pass for what
/// cannot be undone.
pub async fn delete(
    State(inspector): Shared,
    headers: HeaderMap,
    Path(persona_id): Path<String>,
    Form(form): Form<DeleteForm>,
) -> Response {
    if let Some(refused) = refused_write(&inspector, &headers, &form.csrf) {
        return refused;
    }
    if form.confirm.trim() != persona_id {
        return message(
            &inspector,
            StatusCode::BAD_REQUEST,
            "Not confirmed",
            format!("Type the persona id, {persona_id}, to delete it."),
            &format!("/personas/{persona_id}/delete"),
        );
    }
    match inspector.client.delete_persona(&persona_id).await {
        Ok(report) => message(
            &inspector,
            StatusCode::OK,
            "Persona deleted",
            format!(
                "{} deleted: {} preferences, {} stored events and {} dead letters erased; {} events not yet processed are refused and erased by the worker.",
                report.persona_id,
                report.preferences_deleted,
                report.stored_events.events_erased,
                report.stored_events.dead_letters_erased,
                report.stored_events.events_pending
            ),
            "/",
        ),
        Err(error) => failed(&inspector, error, &format!("/personas/{persona_id}")),
    }
}

#[derive(Debug, Deserialize)]
pub struct TokenForm {
    #[serde(default)]
    csrf: String,
}

#[derive(Debug, Deserialize)]
pub struct PurgeForm {
    #[serde(default)]
    csrf: String,
    user_id: String,
    #[serde(default)]
    confirm: String,
}

pub async fn purge(
    State(inspector): Shared,
    headers: HeaderMap,
    Path(persona_id): Path<String>,
    Form(form): Form<PurgeForm>,
) -> Response {
    if let Some(refused) = refused_write(&inspector, &headers, &form.csrf) {
        return refused;
    }
    let back = format!("/personas/{persona_id}");
    if form.confirm != "yes" {
        return message(
            &inspector,
            StatusCode::BAD_REQUEST,
            "Not confirmed",
            "Tick the box to erase the user.".into(),
            &back,
        );
    }
    let request = PurgeUserRequest {
        persona_id: persona_id.clone(),
        user_id: form.user_id,
        pseudonym: None,
    };
    match inspector.client.purge_user(&request).await {
        Ok(report) => message(
            &inspector,
            StatusCode::OK,
            "User erased",
            format!(
                "Replaced by {} in {} preferences; {} retracted; {} stored events and {} dead letters erased.",
                report.memory.pseudonym,
                report.memory.rewritten.len(),
                report.memory.retracted.len(),
                report.stored_events.events_erased,
                report.stored_events.dead_letters_erased
            ),
            &back,
        ),
        Err(error) => failed(&inspector, error, &back),
    }
}

#[derive(Debug, Deserialize)]
pub struct AddForm {
    #[serde(default)]
    csrf: String,
    name: String,
    opinion: String,
    #[serde(default)]
    category: String,
    #[serde(default)]
    stance: String,
}

pub async fn add(
    State(inspector): Shared,
    headers: HeaderMap,
    Path(persona_id): Path<String>,
    Form(form): Form<AddForm>,
) -> Response {
    if let Some(refused) = refused_write(&inspector, &headers, &form.csrf) {
        return refused;
    }
    let request = AddRequest {
        persona_id: persona_id.clone(),
        name: form.name,
        opinion: form.opinion,
        category: form.category,
        stance: Stance::parse(&form.stance),
        strength: None,
        source_platform: "inspector".into(),
        ..AddRequest::default()
    };
    match inspector.client.add(&request).await {
        Ok(added) => back_to(format!("/personas/{persona_id}/prefs/{}", added.id)),
        Err(error) => failed(&inspector, error, &format!("/personas/{persona_id}")),
    }
}

#[derive(Debug, Deserialize)]
pub struct RetractForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    reason: String,
    #[serde(default)]
    confirm: String,
}

pub async fn retract(
    State(inspector): Shared,
    headers: HeaderMap,
    Path((persona_id, id)): Path<(String, String)>,
    Form(form): Form<RetractForm>,
) -> Response {
    if let Some(refused) = refused_write(&inspector, &headers, &form.csrf) {
        return refused;
    }
    let back = format!("/personas/{persona_id}/prefs/{id}");
    if form.confirm != "yes" {
        return message(
            &inspector,
            StatusCode::BAD_REQUEST,
            "Not confirmed",
            "Tick the box to retract it.".into(),
            &back,
        );
    }
    let request = RetractRequest {
        persona_id: persona_id.clone(),
        preference_id: id,
        reason: if form.reason.trim().is_empty() {
            "retracted in the inspector".into()
        } else {
            form.reason
        },
    };
    after_write(&inspector, inspector.client.retract(&request).await, back)
}

#[derive(Debug, Deserialize)]
pub struct EvolveForm {
    #[serde(default)]
    csrf: String,
    new_opinion: String,
    #[serde(default)]
    new_stance: String,
    #[serde(default)]
    reason: String,
}

pub async fn evolve(
    State(inspector): Shared,
    headers: HeaderMap,
    Path((persona_id, id)): Path<(String, String)>,
    Form(form): Form<EvolveForm>,
) -> Response {
    if let Some(refused) = refused_write(&inspector, &headers, &form.csrf) {
        return refused;
    }
    let back = format!("/personas/{persona_id}/prefs/{id}");
    let request = EvolveRequest {
        persona_id,
        preference_id: id,
        new_opinion: form.new_opinion,
        reason: form.reason,
        new_stance: Stance::parse(&form.new_stance),
    };
    after_write(&inspector, inspector.client.evolve(&request).await, back)
}

#[derive(Debug, Deserialize)]
pub struct RestoreForm {
    #[serde(default)]
    csrf: String,
    version: u64,
}

pub async fn restore(
    State(inspector): Shared,
    headers: HeaderMap,
    Path((persona_id, id)): Path<(String, String)>,
    Form(form): Form<RestoreForm>,
) -> Response {
    if let Some(refused) = refused_write(&inspector, &headers, &form.csrf) {
        return refused;
    }
    let back = format!("/personas/{persona_id}/prefs/{id}");
    let request = RestoreRequest {
        persona_id,
        preference_id: id,
        version: form.version,
        reason: "restored in the inspector".into(),
    };
    after_write(&inspector, inspector.client.restore(&request).await, back)
}

pub async fn replay(
    State(inspector): Shared,
    headers: HeaderMap,
    Path(sequence): Path<u64>,
    Form(form): Form<TokenForm>,
) -> Response {
    dead_letter_action(&inspector, &headers, &form, sequence, true).await
}

pub async fn discard(
    State(inspector): Shared,
    headers: HeaderMap,
    Path(sequence): Path<u64>,
    Form(form): Form<TokenForm>,
) -> Response {
    dead_letter_action(&inspector, &headers, &form, sequence, false).await
}

/// Replays (or discards) one dead letter, then back to the list.
async fn dead_letter_action(
    inspector: &Inspector,
    headers: &HeaderMap,
    form: &TokenForm,
    sequence: u64,
    replay: bool,
) -> Response {
    if let Some(refused) = refused_write(inspector, headers, &form.csrf) {
        return refused;
    }
    let (done, heading) = if replay {
        (
            inspector.dead_letters.replay(sequence).await.map(|_| ()),
            "Replay failed",
        )
    } else {
        (
            inspector.dead_letters.discard(sequence).await,
            "Discard failed",
        )
    };
    match done {
        Ok(()) => back_to("/dead-letters".into()),
        Err(error) => message(
            inspector,
            StatusCode::BAD_GATEWAY,
            heading,
            error.to_string(),
            "/dead-letters",
        ),
    }
}
