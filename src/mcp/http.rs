//! The MCP server over streamable HTTP (`/mcp`), behind a bearer-token check: a request
//! without a known token is answered 401 before any MCP session sees it, and a known token's
//! persona is set on the request for the tools (`BoundPersona`). Tokens come from environment
//! variables (`mcp.tokens`), compared by digest so their length and content take the same time
//! to refuse.

use std::sync::Arc;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use sha2::{Digest, Sha256};

use super::{BoundPersona, McpConfig, PersonaTools};
use crate::client::Client;

/// Digests of the configured tokens and the persona each is bound to.
#[derive(Clone)]
pub struct Tokens(Arc<Vec<([u8; 32], String)>>);

impl Tokens {
    /// The tokens `config` names, read from their environment variables. An unset or empty
    /// variable is an error naming it: a server that silently served nobody would look up.
    pub fn from_config(config: &McpConfig) -> Result<Tokens, String> {
        let mut tokens = Vec::new();
        for (n, token) in config.tokens.iter().enumerate() {
            let value = std::env::var(&token.token_env).unwrap_or_default();
            if value.len() < 16 {
                return Err(format!(
                    "mcp.tokens[{n}]: the environment variable {} holds no token of 16 characters or more",
                    token.token_env
                ));
            }
            tokens.push((digest(&value), token.persona.clone()));
        }
        Ok(Tokens(Arc::new(tokens)))
    }

    /// Tokens given directly (tests).
    pub fn new(pairs: &[(&str, &str)]) -> Tokens {
        Tokens(Arc::new(
            pairs
                .iter()
                .map(|(token, persona)| (digest(token), persona.to_string()))
                .collect(),
        ))
    }

    fn persona_of(&self, token: &str) -> Option<String> {
        let presented = digest(token);
        // Every entry is compared, equal or not, so the time says nothing about which matched.
        let mut found = None;
        for (known, persona) in self.0.iter() {
            let same = known
                .iter()
                .zip(presented.iter())
                .fold(0u8, |acc, (a, b)| acc | (a ^ b))
                == 0;
            if same && found.is_none() {
                found = Some(persona.clone());
            }
        }
        found
    }
}

fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

/// Refuses a request without a known bearer token; binds the token's persona to the rest.
async fn bearer(State(tokens): State<Tokens>, mut request: Request, next: Next) -> Response {
    let presented = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "))
        .map(str::trim);
    let Some(persona) = presented.and_then(|token| tokens.persona_of(token)) else {
        return (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, "Bearer")],
            "a bearer token of mcp.tokens is needed\n",
        )
            .into_response();
    };
    request.extensions_mut().insert(BoundPersona(persona));
    next.run(request).await
}

/// The routes: `/mcp` (streamable HTTP, behind the token check) and `/healthz`.
pub fn router(
    client: Client,
    tokens: Tokens,
    allowed_hosts: &[String],
    cancel: tokio_util::sync::CancellationToken,
) -> Router {
    let mut config = StreamableHttpServerConfig::default().with_cancellation_token(cancel);
    if !allowed_hosts.is_empty() {
        config = config.with_allowed_hosts(allowed_hosts.iter().cloned());
    }
    let service = StreamableHttpService::new(
        move || Ok(PersonaTools::new(client.clone(), None)),
        LocalSessionManager::default().into(),
        config,
    );
    Router::new()
        .nest_service("/mcp", service)
        .layer(axum::middleware::from_fn_with_state(tokens, bearer))
        .route("/healthz", axum::routing::get(|| async { "ok\n" }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_gives_its_own_persona_and_nothing_else() {
        let tokens = Tokens::new(&[
            ("token-of-ada-0123456789", "ada"),
            ("token-of-bob-0123456789", "bob"),
        ]);
        assert_eq!(
            tokens.persona_of("token-of-ada-0123456789").as_deref(),
            Some("ada")
        );
        assert_eq!(
            tokens.persona_of("token-of-bob-0123456789").as_deref(),
            Some("bob")
        );
        assert_eq!(tokens.persona_of("token-of-ada-012345678"), None);
        assert_eq!(tokens.persona_of(""), None);
    }
}
