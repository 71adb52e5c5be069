//! The MCP tools and the beliefs resource, each a request to the running service.

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    CallToolResult, ContentBlock, Implementation, ListResourceTemplatesResult, ListResourcesResult,
    PaginatedRequestParams, ReadResourceRequestParams, ReadResourceResult, Resource,
    ResourceContents, ResourceTemplate, ServerCapabilities, ServerConfig,
};
use rmcp::schemars::{self, JsonSchema};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler, tool, tool_handler, tool_router};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::client::{Client, ClientError};
use crate::model::Stance;
use crate::serve::protocol::{
    AddRequest, CheckRequest, CheckTurn, EvolveRequest, InjectRequest, ListRequest, RetractRequest,
    SearchMode, SearchRequest,
};
use crate::serve::render::Format;

/// The persona an HTTP request's bearer token is bound to, set by the auth layer
/// (`http.rs`) on the request before the MCP session handles it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BoundPersona(pub String);

/// The MCP server: the tools and the resource, over the service's typed client.
#[derive(Clone)]
pub struct PersonaTools {
    client: Client,
    /// The persona a stdio server serves; `None` over HTTP, where each request's token says.
    persona: Option<String>,
    tool_router: ToolRouter<PersonaTools>,
}

/// A stance as a tool takes it.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum StanceArg {
    For,
    Against,
}

impl From<StanceArg> for Stance {
    fn from(stance: StanceArg) -> Stance {
        match stance {
            StanceArg::For => Stance::For,
            StanceArg::Against => Stance::Against,
        }
    }
}

/// What `manage_persona_preferences` does.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ManageAction {
    /// Record a new preference: `name`, `opinion`, and optionally `category`, `stance`,
    /// `strength`.
    Add,
    /// The persona voiced preference `preference_id` again: it grows stronger.
    Reinforce,
    /// A change of mind about preference `preference_id`: `new_opinion`, optionally
    /// `new_stance` and `reason`. The old version is kept in its history.
    Evolve,
    /// The persona no longer holds preference `preference_id` (`reason` optional). Kept, with
    /// its history, and restorable.
    Retract,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ManageArgs {
    pub action: ManageAction,
    /// reinforce, evolve, retract: the preference's id (from inspect_persona_preferences).
    #[schemars(length(min = 1, max = 64))]
    pub preference_id: Option<String>,
    /// add: what the preference is about, as the persona would name it ("green tea").
    #[schemars(length(min = 1, max = 256))]
    pub name: Option<String>,
    /// add: the opinion, in the first person ("I love green tea in the morning.").
    #[schemars(length(min = 1, max = 4096))]
    pub opinion: Option<String>,
    /// add: one of aesthetic, intellectual, ethical, social, culinary, musical, literary,
    /// philosophical, technological, personal, entertainment, nature.
    #[schemars(length(max = 64))]
    pub category: Option<String>,
    /// add: for or against the topic.
    pub stance: Option<StanceArg>,
    /// add: how strongly it is held, 0 to 1 (0.5 when omitted).
    #[schemars(range(min = 0.0, max = 1.0))]
    pub strength: Option<f64>,
    /// evolve: the opinion now held, in the first person.
    #[schemars(length(min = 1, max = 4096))]
    pub new_opinion: Option<String>,
    /// evolve: the stance now held, when it changed.
    pub new_stance: Option<StanceArg>,
    /// evolve, retract: why.
    #[schemars(length(max = 4096))]
    pub reason: Option<String>,
}

/// What `inspect_persona_preferences` does.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum InspectAction {
    /// One preference, whole (`preference_id`): provenance, history, reinforcements.
    Get,
    /// The persona's preferences, strongest first (`category`, `include_retracted`, `limit`).
    List,
    /// Preferences about `query`, nearest first (`mode`, `limit`, `include_retracted`).
    Search,
    /// Counts: total, active, retracted, per category.
    Stats,
}

/// How `search` finds preferences.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum SearchModeArg {
    /// By meaning (the default).
    Semantic,
    /// By the query's words.
    Keyword,
    /// Both, blended.
    Hybrid,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InspectArgs {
    pub action: InspectAction,
    /// get: the preference's id.
    #[schemars(length(min = 1, max = 64))]
    pub preference_id: Option<String>,
    /// search: what to look for.
    #[schemars(length(min = 1, max = 2000))]
    pub query: Option<String>,
    /// list: only this category.
    #[schemars(length(max = 64))]
    pub category: Option<String>,
    /// list, search: retracted preferences too.
    #[serde(default)]
    pub include_retracted: bool,
    /// list, search: at most this many (20 when omitted).
    #[schemars(range(min = 1, max = 100))]
    pub limit: Option<usize>,
    pub mode: Option<SearchModeArg>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InjectArgs {
    /// The conversation so far, or the user's last message, as text.
    #[schemars(length(max = 8000))]
    pub query: String,
    /// Ids of the users in the conversation: preferences about them count as relevant.
    #[serde(default)]
    #[schemars(length(max = 64))]
    pub user_ids: Vec<String>,
    /// At most this many preferences (8 when omitted).
    #[schemars(range(min = 1, max = 50))]
    pub max_count: Option<usize>,
    /// At most this many characters of opinions (2000 when omitted).
    #[schemars(range(min = 1, max = 20000))]
    pub max_chars: Option<usize>,
    /// Also the persona's strongest preferences, whatever the query.
    #[serde(default)]
    pub resident: bool,
}

/// Who said an earlier turn of the conversation.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum TurnRole {
    User,
    Persona,
    System,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TurnArg {
    pub role: TurnRole,
    #[serde(default)]
    #[schemars(length(max = 256))]
    pub user_id: String,
    #[schemars(length(max = 8000))]
    pub content: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CheckArgs {
    /// The message the persona is about to send.
    #[schemars(length(min = 1, max = 8000))]
    pub draft: String,
    /// The conversation before it, oldest first (optional context).
    #[serde(default)]
    #[schemars(length(max = 49))]
    pub conversation: Vec<TurnArg>,
}

/// The error code a tool error carries: the service's (`invalid`, `not_found`, `unavailable`,
/// …, with its HTTP-like status) or this server's own.
#[derive(Debug, Serialize)]
struct ToolError {
    code: String,
    status: u16,
    message: String,
}

fn tool_error(code: &str, status: u16, message: impl Into<String>) -> CallToolResult {
    let error = ToolError {
        code: code.into(),
        status,
        message: message.into(),
    };
    let mut result = CallToolResult::error(vec![ContentBlock::text(format!(
        "{} ({}): {}",
        error.code, error.status, error.message
    ))]);
    result.structured_content = serde_json::to_value(&error).ok();
    result
}

fn from_client(error: ClientError) -> CallToolResult {
    match &error {
        ClientError::Service { error: body, .. } => tool_error(
            &serde_json::to_value(body.kind)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_else(|| "error".into()),
            body.code,
            body.message.clone(),
        ),
        ClientError::InvalidPersona { reason, .. } => tool_error("invalid", 400, reason.clone()),
        e if e.is_unavailable() => tool_error("unavailable", 503, error.to_string()),
        _ => tool_error("internal", 500, error.to_string()),
    }
}

fn ok(value: impl Serialize) -> CallToolResult {
    let value = serde_json::to_value(value).unwrap_or(Value::Null);
    let mut result = CallToolResult::success(vec![ContentBlock::text(
        serde_json::to_string_pretty(&value).unwrap_or_default(),
    )]);
    result.structured_content = Some(match value {
        Value::Object(_) => value,
        other => json!({ "result": other }),
    });
    result
}

/// What a missing argument an action needs says.
fn missing(action: &str, argument: &str) -> CallToolResult {
    tool_error(
        "invalid",
        400,
        format!("{action} needs the argument {argument}"),
    )
}

impl PersonaTools {
    /// Tools for one persona (stdio), or for the persona each HTTP request is bound to.
    pub fn new(client: Client, persona: Option<String>) -> PersonaTools {
        PersonaTools {
            client,
            persona,
            tool_router: Self::tool_router(),
        }
    }

    /// The persona this request may reach: the HTTP request's bound one, else the stdio one.
    fn persona(&self, context: &RequestContext<RoleServer>) -> Result<String, CallToolResult> {
        context
            .extensions
            .get::<axum::http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<BoundPersona>())
            .map(|bound| bound.0.clone())
            .or_else(|| self.persona.clone())
            .ok_or_else(|| {
                tool_error(
                    "unauthenticated",
                    401,
                    "no persona is bound to this session (stdio: mcp.persona or --persona; HTTP: a bearer token of mcp.tokens)",
                )
            })
    }
}

#[tool_router]
impl PersonaTools {
    #[tool(
        description = "Change what the persona believes. action add records a new preference (name: the topic; opinion: first person; optional category, stance for/against, strength 0-1). reinforce marks preference_id as voiced again. evolve records a change of mind about preference_id (new_opinion, optional new_stance and reason); the old version is kept. retract marks preference_id as no longer held (optional reason); it stays restorable. Only the persona this session is bound to is reached."
    )]
    async fn manage_persona_preferences(
        &self,
        Parameters(args): Parameters<ManageArgs>,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        let persona_id = match self.persona(&context) {
            Ok(persona) => persona,
            Err(error) => return Ok(error),
        };
        let answer = match args.action {
            ManageAction::Add => {
                let (Some(name), Some(opinion)) = (args.name, args.opinion) else {
                    return Ok(missing("add", "name and opinion"));
                };
                self.client
                    .add(&AddRequest {
                        persona_id,
                        name,
                        opinion,
                        category: args.category.unwrap_or_default(),
                        stance: args.stance.map(Stance::from),
                        strength: args.strength,
                        ..AddRequest::default()
                    })
                    .await
                    .map(ok)
            }
            ManageAction::Reinforce => {
                let Some(id) = args.preference_id else {
                    return Ok(missing("reinforce", "preference_id"));
                };
                self.client.reinforce(&persona_id, &id).await.map(ok)
            }
            ManageAction::Evolve => {
                let (Some(id), Some(new_opinion)) = (args.preference_id, args.new_opinion) else {
                    return Ok(missing("evolve", "preference_id and new_opinion"));
                };
                self.client
                    .evolve(&EvolveRequest {
                        persona_id,
                        preference_id: id,
                        new_opinion,
                        reason: args.reason.unwrap_or_default(),
                        new_stance: args.new_stance.map(Stance::from),
                    })
                    .await
                    .map(ok)
            }
            ManageAction::Retract => {
                let Some(id) = args.preference_id else {
                    return Ok(missing("retract", "preference_id"));
                };
                self.client
                    .retract(&RetractRequest {
                        persona_id,
                        preference_id: id,
                        reason: args.reason.unwrap_or_default(),
                    })
                    .await
                    .map(ok)
            }
        };
        Ok(answer.unwrap_or_else(from_client))
    }

    #[tool(
        description = "Look at what the persona believes. action get returns preference_id whole (opinion, stance, strength, provenance, history). list returns its preferences strongest first (optional category, include_retracted, limit). search returns those about query, nearest first (optional mode semantic/keyword/hybrid, limit). stats counts them. Only the persona this session is bound to is reached."
    )]
    async fn inspect_persona_preferences(
        &self,
        Parameters(args): Parameters<InspectArgs>,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        let persona_id = match self.persona(&context) {
            Ok(persona) => persona,
            Err(error) => return Ok(error),
        };
        let limit = args.limit.unwrap_or(20).clamp(1, 100);
        let answer = match args.action {
            InspectAction::Get => {
                let Some(id) = args.preference_id else {
                    return Ok(missing("get", "preference_id"));
                };
                self.client.get(&persona_id, &id).await.map(ok)
            }
            InspectAction::List => self
                .client
                .list(&ListRequest {
                    persona_id,
                    category: args.category,
                    include_retracted: args.include_retracted,
                    limit,
                })
                .await
                .map(ok),
            InspectAction::Search => {
                let Some(query) = args.query else {
                    return Ok(missing("search", "query"));
                };
                self.client
                    .search(&SearchRequest {
                        persona_id,
                        query,
                        top_k: limit,
                        include_retracted: args.include_retracted,
                        mode: match args.mode {
                            Some(SearchModeArg::Keyword) => SearchMode::Keyword,
                            Some(SearchModeArg::Hybrid) => SearchMode::Hybrid,
                            _ => SearchMode::Semantic,
                        },
                    })
                    .await
                    .map(ok)
            }
            InspectAction::Stats => self.client.stats(&persona_id).await.map(ok),
        };
        Ok(answer.unwrap_or_else(from_client))
    }

    #[tool(
        description = "The few preferences worth putting into the persona's prompt for this conversation: nearest to query in meaning and about the users present, ranked by relevance and strength, within max_count and max_chars. Returns them and a rendered block."
    )]
    async fn inject_preferences(
        &self,
        Parameters(args): Parameters<InjectArgs>,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        let persona_id = match self.persona(&context) {
            Ok(persona) => persona,
            Err(error) => return Ok(error),
        };
        let answer = self
            .client
            .inject(&InjectRequest {
                persona_id,
                query: Some(args.query),
                query_embedding: None,
                active_user_ids: args.user_ids,
                max_count: args.max_count.unwrap_or(8),
                max_chars: args.max_chars.unwrap_or(2000),
                format: Format::default(),
                resident: args.resident,
                explain: false,
            })
            .await
            .map(ok);
        Ok(answer.unwrap_or_else(from_client))
    }

    #[tool(
        description = "Before the persona sends a message: which stored preferences the draft contradicts (with the stored opinion, the draft's words and the similarity), which it restates, and which opinions in it would be new. Decided exactly as the memory would decide on reading it; nothing is written."
    )]
    async fn check_consistency(
        &self,
        Parameters(args): Parameters<CheckArgs>,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, McpError> {
        let persona_id = match self.persona(&context) {
            Ok(persona) => persona,
            Err(error) => return Ok(error),
        };
        let answer = self
            .client
            .check(&CheckRequest {
                persona_id,
                draft: args.draft,
                conversation: args
                    .conversation
                    .into_iter()
                    .map(|turn| CheckTurn {
                        role: match turn.role {
                            TurnRole::User => crate::ingest::event::Role::User,
                            TurnRole::Persona => crate::ingest::event::Role::Persona,
                            TurnRole::System => crate::ingest::event::Role::System,
                        },
                        user_id: turn.user_id,
                        content: turn.content,
                    })
                    .collect(),
            })
            .await
            .map(ok);
        Ok(answer.unwrap_or_else(from_client))
    }
}

/// The beliefs resource's address for `persona`.
pub fn beliefs_uri(persona: &str) -> String {
    format!("persona://{persona}/beliefs")
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for PersonaTools {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_resources()
                .build(),
        )
        .with_server_info(Implementation::new(
            "persona-prefs",
            env!("CARGO_PKG_VERSION"),
        ))
        .with_instructions(
            "The persona's own memory of its opinions, preferences and ideals. Inspect it before \
             speaking about a topic, check a draft for contradictions before sending it, and \
             record what the persona comes to believe. The persona's active beliefs are the \
             resource persona://<persona>/beliefs.",
        )
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        let Ok(persona) = self.persona(&context) else {
            return Ok(ListResourcesResult::default());
        };
        Ok(ListResourcesResult::with_all_items(vec![
            Resource::new(beliefs_uri(&persona), "beliefs")
                .with_description("The persona's active beliefs, strongest first")
                .with_mime_type("application/json"),
        ]))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        Ok(ListResourceTemplatesResult::with_all_items(vec![
            ResourceTemplate::new("persona://{persona}/beliefs", "persona-beliefs")
                .with_mime_type("application/json"),
        ]))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ReadResourceResponse, McpError> {
        let not_found = || {
            McpError::resource_not_found(
                "resource_not_found",
                Some(json!({"uri": request.uri.clone()})),
            )
        };
        let persona = self.persona(&context).map_err(|_| not_found())?;
        // Only the bound persona's beliefs: another persona's address is not found, as if
        // it did not exist.
        if request.uri != beliefs_uri(&persona) {
            return Err(not_found());
        }
        let beliefs = self
            .client
            .list(&ListRequest {
                persona_id: persona,
                category: None,
                include_retracted: false,
                limit: 200,
            })
            .await
            .map_err(|error| McpError::internal_error(error.to_string(), None))?;
        let body = serde_json::to_string_pretty(&beliefs).unwrap_or_default();
        Ok(ReadResourceResult::new(vec![
            ResourceContents::text(body, request.uri.clone()).with_mime_type("application/json"),
        ])
        .into())
    }
}
