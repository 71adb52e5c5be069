//! `persona-prefs ui`: the persona inspector, a web page where a persona's designers see what
//! it believes, how it changed its mind and why.
//!
//! Server-rendered HTML (askama templates in `templates/`, escaped by default) over axum, with
//! plain forms: no script at all, so the Content-Security-Policy forbids every script and a
//! stored opinion that slipped past escaping still could not run. Everything is read from the
//! running service over NATS through the typed [`Client`], with the credentials of the
//! configuration, so the inspector sees exactly what prompt builders see and can do no more
//! than its NATS user may. Curation needs both `ui.allow_writes` and a NATS user with the
//! write role; without the former, curation is hidden and refused here.
//!
//! Forms that write carry a CSRF token (double submit: a random cookie, `SameSite=Strict`,
//! equal to a hidden field), and a cross-origin `Origin` is refused.

pub mod chart;
mod pages;

use std::sync::Arc;

use axum::Router;
use axum::http::{HeaderValue, header};
use axum::response::Response;
use axum::routing::{get, post};

use crate::client::Client;
use crate::config::Config;
use crate::ingest::dead_letters::DeadLetters;

/// What the inspector needs, shared by its handlers.
pub struct Inspector {
    pub client: Client,
    pub dead_letters: DeadLetters,
    /// Curation shown and accepted (`ui.allow_writes`).
    pub writable: bool,
    pub categories: Vec<String>,
    pub reinforce_rate: f64,
}

/// The inspector's routes over `inspector`.
pub fn router(inspector: Inspector) -> Router {
    let state = Arc::new(inspector);
    Router::new()
        .route("/", get(pages::personas))
        .route("/healthz", get(|| async { "ok" }))
        .route("/static/style.css", get(pages::style))
        .route("/personas/{persona}", get(pages::persona))
        .route("/personas/{persona}/inject", get(pages::inject))
        .route(
            "/personas/{persona}/purge",
            get(pages::confirm_purge).post(pages::purge),
        )
        .route(
            "/personas/{persona}/delete",
            get(pages::confirm_delete).post(pages::delete),
        )
        .route("/personas/{persona}/add", post(pages::add))
        .route("/personas/{persona}/prefs/{id}", get(pages::preference))
        .route(
            "/personas/{persona}/prefs/{id}/retract",
            post(pages::retract),
        )
        .route("/personas/{persona}/prefs/{id}/evolve", post(pages::evolve))
        .route(
            "/personas/{persona}/prefs/{id}/restore",
            post(pages::restore),
        )
        .route("/dead-letters", get(pages::dead_letters))
        .route("/dead-letters/{sequence}/replay", post(pages::replay))
        .route("/dead-letters/{sequence}/discard", post(pages::discard))
        .layer(axum::middleware::map_response(security_headers))
        .with_state(state)
}

/// No script, no frames, no foreign origin: what a page may load and where its forms go.
async fn security_headers(mut response: Response) -> Response {
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; \
             frame-ancestors 'none'; base-uri 'none'",
        ),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    response
}

/// Runs the inspector on `listen` until `shutdown` resolves.
pub async fn serve(
    config: &Config,
    listen: &str,
    writable: bool,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let nats = crate::app::connect_nats(config).await?;
    let js = async_nats::jetstream::new(nats.clone());
    let inspector = Inspector {
        client: Client::new(nats, config),
        dead_letters: DeadLetters::new(js, config.ingest.clone()),
        writable,
        categories: config.store.categories.clone(),
        reinforce_rate: config.store.reinforce_rate,
    };
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .map_err(|error| anyhow::anyhow!("ui.listen {listen}: {error}"))?;
    tracing::info!(address = %listener.local_addr()?, writable, "persona inspector listening");
    axum::serve(listener, router(inspector))
        .with_graceful_shutdown(shutdown)
        .await?;
    Ok(())
}
