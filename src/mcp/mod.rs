//! `persona-prefs mcp`: a persona's memory as tools an agent calls, over the Model Context
//! Protocol (the official Rust SDK, `rmcp`), on stdio or streamable HTTP.
//!
//! The tools mirror the original system's two (seed 000), `manage_persona_preferences` (add,
//! reinforce, evolve, retract) and `inspect_persona_preferences` (get, list, search, stats),
//! plus `inject_preferences` (what a prompt should hold) and `check_consistency` (what a draft
//! would contradict, before it goes out). The persona's active beliefs are a resource,
//! `persona://<persona>/beliefs`. Each tool asks the running service through the typed client
//! over NATS, so the roles of docs/PERMISSIONS.md apply unchanged.
//!
//! **The persona is bound by the server, never taken from what the model sends.** On stdio it
//! is the one the configuration names (`mcp.persona`, or `--persona`); over HTTP, the one the
//! request's bearer token maps to (`mcp.tokens`), checked before the MCP session sees the
//! request. No tool takes a persona argument, and arguments a tool does not know are refused,
//! so a model cannot reach another persona whatever it writes.

pub mod http;
mod tools;

use rmcp::ServiceExt;

pub use tools::{BoundPersona, PersonaTools, beliefs_uri};

use crate::client::Client;
use crate::config::{Config, McpConfig};

/// Why the MCP server could not start or stopped.
#[derive(Debug, thiserror::Error)]
pub enum McpError {
    /// A setting is missing or wrong (names it).
    #[error("{0}")]
    Setup(String),
    /// The transport failed.
    #[error("{0}")]
    Transport(String),
}

/// Serves `persona` over stdio (an MCP host starts this process and speaks on its standard
/// input and output; logs go to standard error) until the host closes it.
pub async fn serve_stdio(config: &Config, persona: &str) -> Result<(), McpError> {
    crate::store::validate::persona_id(persona)
        .map_err(|e| McpError::Setup(format!("mcp.persona (or --persona): {e}")))?;
    let nats = crate::app::connect_nats(config)
        .await
        .map_err(|e| McpError::Setup(e.to_string()))?;
    let tools = PersonaTools::new(Client::new(nats, config), Some(persona.to_string()));
    let running = tools
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|e| McpError::Transport(e.to_string()))?;
    running
        .waiting()
        .await
        .map_err(|e| McpError::Transport(e.to_string()))?;
    Ok(())
}

/// Serves streamable HTTP on `listen` (`/mcp`), each request's persona bound by its bearer
/// token (`mcp.tokens`), until `shutdown`.
pub async fn serve_http(
    config: &Config,
    listen: &str,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), McpError> {
    let tokens = http::Tokens::from_config(&config.mcp).map_err(McpError::Setup)?;
    if config.mcp.tokens.is_empty() {
        return Err(McpError::Setup(
            "mcp.tokens names no token: over HTTP each persona is reached with its own bearer token".into(),
        ));
    }
    let nats = crate::app::connect_nats(config)
        .await
        .map_err(|e| McpError::Setup(e.to_string()))?;
    let cancel = tokio_util::sync::CancellationToken::new();
    let routes = http::router(
        Client::new(nats, config),
        tokens,
        &config.mcp.allowed_hosts,
        cancel.child_token(),
    );
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .map_err(|e| McpError::Setup(format!("mcp.listen {listen}: {e}")))?;
    tracing::info!(address = %listener.local_addr().map_err(|e| McpError::Transport(e.to_string()))?, "MCP server listening on /mcp");
    axum::serve(listener, routes)
        .with_graceful_shutdown(async move {
            shutdown.await;
            cancel.cancel();
        })
        .await
        .map_err(|e| McpError::Transport(e.to_string()))
}
