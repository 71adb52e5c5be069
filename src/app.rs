//! Wiring: connects the stages into the running service (`serve`) and the demonstration of
//! the main job (`demo`). `main.rs` parses the command line and calls in here, so tests and
//! benches run exactly this code.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_nats::jetstream;
use async_nats::jetstream::consumer::PullConsumer;
use metrics_exporter_prometheus::PrometheusHandle;
use tokio::sync::watch;

use crate::config::Config;
use crate::embed::{self, EmbedError, Embedder};
use crate::erasure::Eraser;
use crate::extract::{self, ExtractError, Extractor};
use crate::ingest::event::{ConversationEvent, EventLimits};
use crate::ingest::pipeline::{Pipeline, PipelineSettings};
use crate::ingest::worker::{Worker, WorkerError, ensure_jetstream};
use crate::serve::{ServeContext, ServeError, Services};
use crate::store::{ListOptions, PersonaLock, Preference, PreferenceStore, StoreError};

#[derive(Debug, thiserror::Error)]
pub enum AppError {
    #[error("redis: {0}")]
    Store(#[from] StoreError),
    #[error("nats at {url}: {message}")]
    Nats { url: String, message: String },
    #[error("embedder: {0}")]
    Embed(#[from] EmbedError),
    #[error("extractor: {0}")]
    Extract(#[from] ExtractError),
    #[error("{0}")]
    Worker(#[from] WorkerError),
    #[error("{0}")]
    Other(String),
}

/// Everything the stages need, connected.
#[derive(Clone)]
pub struct App {
    pub config: Arc<Config>,
    pub store: PreferenceStore,
    pub nats: async_nats::Client,
    pub js: jetstream::Context,
    pub embedder: Arc<dyn Embedder>,
    /// Search text's embedder (`embed::Embedders::queries`).
    pub query_embedder: Arc<dyn Embedder>,
    pub extractor: Arc<dyn Extractor>,
    /// Grey-zone adjudication by the LLM, with the LLM extractor (`extract.adjudication`).
    pub adjudicator: Option<Arc<dyn extract::adjudicate::Adjudicator>>,
}

impl App {
    /// Connects to Redis (and checks or creates the index), NATS, and loads the embedder and
    /// extractor. Fails with an error naming the part that is missing.
    pub async fn start(config: Config) -> Result<App, AppError> {
        let store = PreferenceStore::connect(&config.redis, &config.store)
            .await?
            .with_topic_match_threshold(config.embed.match_threshold())
            .with_min_evidence(config.inject.min_evidence);
        store.ensure_index().await?;
        store.ensure_layout().await?;
        for advice in store.memory_settings_advice().await {
            tracing::warn!("{advice}");
        }
        let nats = connect_nats(&config).await?;
        let js = jetstream::new(nats.clone());
        let embedders = embed::from_config_sharing(&config.embed)?;
        let (extractor, adjudicator) = extract::stages_from_config(
            &config.extract,
            &config.store.categories,
            embedders.local,
        )?;
        Ok(App {
            config: Arc::new(config),
            store,
            nats,
            js,
            embedder: embedders.exact,
            query_embedder: embedders.queries,
            extractor,
            adjudicator,
        })
    }

    pub fn pipeline(&self) -> Pipeline {
        let ingest = &self.config.ingest;
        Pipeline::new(
            self.store.clone(),
            self.extractor.clone(),
            self.embedder.clone(),
            PersonaLock::new(
                self.store.clone(),
                Duration::from_millis(self.config.store.lock_ttl_ms),
            ),
            PipelineSettings {
                match_threshold: self.config.embed.match_threshold(),
                adjudicator: self.adjudicator.clone(),
                max_redacted_share: ingest.max_redacted_share,
                lock_patience: Duration::from_millis(self.config.store.lock_patience_ms),
            },
        )
    }

    /// What the request-reply service needs.
    pub fn serve_context(&self) -> ServeContext {
        ServeContext {
            nats: self.nats.clone(),
            store: self.store.clone(),
            embedder: self.embedder.clone(),
            query_embedder: self.query_embedder.clone(),
            eraser: Eraser::new(self.store.clone(), self.js.clone(), &self.config.ingest),
            config: self.config.serve.clone(),
            max_payload_bytes: self.config.nats.max_payload_bytes,
            locks: PersonaLock::new(
                self.store.clone(),
                Duration::from_millis(self.config.store.lock_ttl_ms),
            ),
            lock_patience: Duration::from_millis(self.config.store.lock_patience_ms),
            max_redacted_share: self.config.ingest.max_redacted_share,
            pipeline: self.pipeline(),
            event_limits: self.event_limits(),
        }
    }

    /// Starts the request-reply service until `shutdown`.
    pub async fn serve(&self, shutdown: watch::Receiver<bool>) -> Result<Services, ServeError> {
        crate::serve::start(self.serve_context(), shutdown).await
    }

    pub fn event_limits(&self) -> EventLimits {
        EventLimits {
            max_payload_bytes: self.config.nats.max_payload_bytes,
            max_messages: self.config.ingest.max_messages_per_event,
            max_message_chars: self.config.ingest.max_message_chars,
            max_participants: self.config.store.max_related_ids,
            max_injected: self.config.store.max_injection_count,
        }
    }

    pub async fn consumer(&self) -> Result<PullConsumer, AppError> {
        Ok(ensure_jetstream(&self.js, &self.config.ingest).await?)
    }

    pub fn worker(&self) -> Worker {
        Worker {
            pipeline: self.pipeline(),
            js: self.js.clone(),
            config: self.config.ingest.clone(),
            limits: self.event_limits(),
        }
    }
}

/// Connects to NATS with the configured timeout and TLS files. Credentials stay in the URL
/// and out of errors.
pub async fn connect_nats(config: &Config) -> Result<async_nats::Client, AppError> {
    let nats = &config.nats;
    let mut options = async_nats::ConnectOptions::new()
        .connection_timeout(Duration::from_millis(nats.connect_timeout_ms))
        .name("persona-prefs");
    let tls = nats.tls();
    if !tls.ca_file.is_empty() {
        options = options.add_root_certificates(tls.ca_file.into());
    }
    if !tls.client_cert_file.is_empty() {
        options =
            options.add_client_certificate(tls.client_cert_file.into(), tls.client_key_file.into());
    }
    if nats.url.starts_with("tls://") {
        options = options.require_tls(true);
    }
    if !nats.nkey_seed_file.is_empty() {
        let seed = std::fs::read_to_string(&nats.nkey_seed_file).map_err(|e| AppError::Nats {
            url: crate::config::redact_url(&nats.url),
            message: format!("nats.nkey_seed_file {}: {e}", nats.nkey_seed_file),
        })?;
        options = options.nkey(seed.trim().to_string());
    }
    if !nats.credentials_file.is_empty() {
        options = options
            .credentials_file(&nats.credentials_file)
            .await
            .map_err(|e| AppError::Nats {
                url: crate::config::redact_url(&nats.url),
                message: format!("nats.credentials_file {}: {e}", nats.credentials_file),
            })?;
    }
    // A comma-separated list: the seed servers of a NATS cluster (the client also learns the
    // others from the servers themselves, and reconnects to any of them).
    let mut servers = Vec::new();
    for url in nats.url.split(',').map(str::trim).filter(|u| !u.is_empty()) {
        servers.push(
            url.parse::<async_nats::ServerAddr>()
                .map_err(|e| AppError::Nats {
                    url: crate::config::redact_url(url),
                    message: e.to_string(),
                })?,
        );
    }
    // async-nats 0.51 ignores credentials in the URL: pass them on (a user and password, or a
    // token alone), percent-decoded, from the first server that names them.
    if let Some(server) = servers.iter().find(|s| s.username().is_some()) {
        let user = percent_decode(server.username().unwrap_or_default());
        options = match server.password() {
            Some(password) => options.user_and_password(user, percent_decode(password)),
            None => options.token(user),
        };
    }
    options.connect(servers).await.map_err(|e| AppError::Nats {
        url: crate::config::redact_url(&nats.url),
        message: e.to_string(),
    })
}

/// `%XX` escapes of a URL's user-info decoded (a password may hold `@`, `:` or `/`).
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let escaped = (bytes[i] == b'%')
            .then(|| text.get(i + 1..i + 3))
            .flatten()
            .and_then(|hex| u8::from_str_radix(hex, 16).ok());
        match escaped {
            Some(byte) => {
                decoded.push(byte);
                i += 3;
            }
            None => {
                decoded.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&decoded).into_owned()
}

/// Starts the metrics/health listener if configured; returns its bound address.
pub async fn start_metrics(
    config: &Config,
    handle: Option<PrometheusHandle>,
    ready: watch::Receiver<bool>,
    shutdown: watch::Receiver<bool>,
) -> Result<Option<std::net::SocketAddr>, AppError> {
    let (Some(handle), false) = (handle, config.metrics.listen.is_empty()) else {
        return Ok(None);
    };
    let listener = tokio::net::TcpListener::bind(&config.metrics.listen)
        .await
        .map_err(|e| AppError::Other(format!("metrics.listen {}: {e}", config.metrics.listen)))?;
    let address = listener
        .local_addr()
        .map_err(|e| AppError::Other(e.to_string()))?;
    tokio::spawn(crate::telemetry::serve_http(
        listener, handle, ready, shutdown,
    ));
    Ok(Some(address))
}

/// `persona-prefs serve`: the ingest worker, the request-reply services and the metrics
/// listener, until `shutdown` turns true.
pub async fn serve(
    config: Config,
    metrics: Option<PrometheusHandle>,
    shutdown: watch::Receiver<bool>,
) -> Result<(), AppError> {
    let (ready_tx, ready) = watch::channel(false);
    // The listener outlives the worker's grace period, so `/readyz` says 503 while it drains.
    let (listener_stop, listener_stopped) = watch::channel(false);
    let address = start_metrics(&config, metrics, ready, listener_stopped).await?;
    let app = App::start(config).await?;
    let consumer = app.consumer().await?;
    let services = app
        .serve(shutdown.clone())
        .await
        .map_err(|e| AppError::Other(e.to_string()))?;
    tokio::spawn(watch_readiness(app.clone(), ready_tx, shutdown.clone()));
    tracing::info!(
        metrics = ?address,
        stream = %app.config.ingest.stream,
        consumer = %app.config.ingest.consumer,
        extractor = ?app.config.extract.kind,
        embedder = ?app.config.embed.kind,
        "persona-prefs serving"
    );
    let report = app.worker().run(consumer, shutdown).await;
    services.stop().await;
    let _ = listener_stop.send(true);
    let report = report?;
    tracing::info!(
        finished = report.finished_in_grace,
        returned = report.returned_for_redelivery,
        "stopped"
    );
    Ok(())
}

/// How often readiness is checked.
pub const READINESS_INTERVAL: Duration = Duration::from_secs(2);

/// Keeps `/readyz` true only while this replica can do its work: Redis answers (and, on a
/// single node, the index is there), NATS is connected and the events stream exists. False
/// from the first failed check until one passes again, and from shutdown on, so an
/// orchestrator stops routing to a replica that cannot serve.
pub async fn watch_readiness(
    app: App,
    ready: watch::Sender<bool>,
    mut shutdown: watch::Receiver<bool>,
) {
    loop {
        let problem = tokio::select! {
            problem = readiness_problem(&app) => problem,
            _ = crate::ingest::worker::stopped(&mut shutdown) => break,
        };
        let now_ready = problem.is_none();
        if *ready.borrow() != now_ready {
            match &problem {
                None => tracing::info!("ready"),
                Some(problem) => tracing::warn!(%problem, "not ready"),
            }
        }
        let _ = ready.send(now_ready);
        tokio::select! {
            _ = tokio::time::sleep(READINESS_INTERVAL) => {}
            _ = crate::ingest::worker::stopped(&mut shutdown) => break,
        }
    }
    let _ = ready.send(false);
}

/// What keeps this replica from working right now, if anything. Each check is bounded by
/// the readiness interval, so a hung server counts as down rather than stalling the check.
async fn readiness_problem(app: &App) -> Option<String> {
    let patience = READINESS_INTERVAL;
    if app.nats.connection_state() != async_nats::connection::State::Connected {
        return Some("NATS is not connected".into());
    }
    match tokio::time::timeout(patience, app.js.get_stream(&app.config.ingest.stream)).await {
        Ok(Ok(_)) => {}
        Ok(Err(error)) => return Some(format!("events stream: {error}")),
        Err(_) => return Some("JetStream did not answer".into()),
    }
    match tokio::time::timeout(patience, app.store.ping()).await {
        Ok(Ok(())) => {}
        Ok(Err(error)) => return Some(format!("redis: {error}")),
        Err(_) => return Some("redis did not answer".into()),
    }
    match tokio::time::timeout(patience, app.store.index_info()).await {
        Ok(Ok(Some(_))) => None,
        Ok(Ok(None)) => Some(format!("index {} is missing", app.store.index_name())),
        Ok(Err(error)) => Some(format!("redis: {error}")),
        Err(_) => Some("redis did not answer".into()),
    }
}

/// What the demo found, for printing.
pub struct DemoReport {
    pub persona_id: String,
    pub events_published: usize,
    pub took: Duration,
    pub preferences: Vec<Preference>,
    pub metrics_address: Option<std::net::SocketAddr>,
    pub decisions: String,
}

/// `persona-prefs demo`: publishes a sample conversation to JetStream, runs the real worker
/// on it, waits until every event is processed, and returns the persona's preferences.
pub async fn demo(
    config: Config,
    sample: &Path,
    metrics: Option<PrometheusHandle>,
) -> Result<DemoReport, AppError> {
    let text = std::fs::read_to_string(sample)
        .map_err(|e| AppError::Other(format!("{}: {e}", sample.display())))?;
    let events: Vec<ConversationEvent> = text
        .lines()
        .filter(|line| !line.trim().is_empty())
        .enumerate()
        .map(|(n, line)| {
            serde_json::from_str(line)
                .map_err(|e| AppError::Other(format!("{} line {}: {e}", sample.display(), n + 1)))
        })
        .collect::<Result<_, _>>()?;
    let persona_id = events
        .first()
        .map(|e| e.persona_id.clone())
        .ok_or_else(|| AppError::Other("sample has no events".into()))?;

    let (shutdown_tx, shutdown) = watch::channel(false);
    let (ready_tx, ready) = watch::channel(false);
    let metrics_address = start_metrics(&config, metrics.clone(), ready, shutdown.clone()).await?;
    let app = App::start(config).await?;
    // A demo starts from a clean slate so its output is the same every run.
    app.store.delete_persona(&persona_id).await?;
    let consumer = app.consumer().await?;
    let _ = ready_tx.send(true);
    let worker = tokio::spawn(app.worker().run(consumer.clone(), shutdown.clone()));

    let started = Instant::now();
    let run = uuid::Uuid::new_v4().simple().to_string();
    for event in &events {
        let payload = serde_json::to_vec(event).map_err(|e| AppError::Other(e.to_string()))?;
        // A fresh id per run: JetStream's duplicate window would drop a second run's events.
        crate::client::publish_event(
            &app.js,
            &app.config.ingest.subject_prefix,
            &event.persona_id,
            payload,
            Some(&format!("demo-{run}-{}", event.event_id)),
        )
        .await
        .map_err(|e| AppError::Other(e.to_string()))?;
    }
    wait_until_drained(&app.js, consumer, Duration::from_secs(120)).await?;
    let took = started.elapsed();
    let _ = shutdown_tx.send(true);
    let _ = worker.await;

    let preferences = app
        .store
        .list_preferences(
            &persona_id,
            &ListOptions {
                include_retracted: true,
                limit: 200,
                ..Default::default()
            },
        )
        .await?;
    let decisions = metrics
        .map(|handle| {
            handle
                .render()
                .lines()
                .filter(|line| {
                    line.starts_with("persona_prefs_decisions_total")
                        || line.starts_with("persona_prefs_events_processed_total")
                })
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default();
    Ok(DemoReport {
        persona_id,
        events_published: events.len(),
        took,
        preferences,
        metrics_address,
        decisions,
    })
}

/// Waits until every event published so far is settled: acked, or terminated after being
/// dead-lettered (not merely between deliveries).
///
/// "So far" is the stream's last sequence when the wait begins. The consumer's own counters
/// are not enough on their own: JetStream answers a publish before it tells the stream's
/// consumers about the new message, so for a moment after a publish the consumer can report
/// nothing pending and nothing delivered beyond its ack floor, and a wait that trusted them
/// returned before the last event was even delivered (a loaded CI machine caught it). The
/// consumer must read every subject of its stream, as the worker's does.
pub async fn wait_until_drained(
    js: &jetstream::Context,
    mut consumer: PullConsumer,
    patience: Duration,
) -> Result<(), AppError> {
    let deadline = Instant::now() + patience;
    let stream_name = consumer
        .info()
        .await
        .map_err(|e| AppError::Other(format!("consumer info: {e}")))?
        .stream_name
        .clone();
    let through = js
        .get_stream(&stream_name)
        .await
        .map_err(|e| AppError::Other(format!("stream {stream_name}: {e}")))?
        .info()
        .await
        .map_err(|e| AppError::Other(format!("stream {stream_name} info: {e}")))?
        .state
        .last_sequence;
    loop {
        let info = consumer
            .info()
            .await
            .map_err(|e| AppError::Other(format!("consumer info: {e}")))?;
        // A nak'ed event waiting out its retry delay is neither pending nor awaiting an ack,
        // but the ack floor has not passed it yet: only then is everything settled.
        if info.num_pending == 0
            && info.num_ack_pending == 0
            && info.delivered.stream_sequence >= through
            && info.ack_floor.stream_sequence >= through
        {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(AppError::Other(format!(
                "events through stream sequence {through} not settled after {patience:?}: \
                 {} pending, {} unacknowledged, delivered through {}, acked through {}",
                info.num_pending,
                info.num_ack_pending,
                info.delivered.stream_sequence,
                info.ack_floor.stream_sequence
            )));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn url_credentials_are_percent_decoded() {
        for (raw, decoded) in [
            ("plain", "plain"),
            ("p%40ss%3Aw%2Frd", "p@ss:w/rd"),
            ("100%", "100%"),
            ("%zz", "%zz"),
            ("%C3%A9", "é"),
        ] {
            assert_eq!(super::percent_decode(raw), decoded, "{raw}");
        }
    }
}
