//! Spans out over OTLP (HTTP, protobuf) when `telemetry.otlp.endpoint` is set.
//!
//! The service already keeps its own trace context (`trace_context`): each event and request
//! is a span of the caller's trace (its `traceparent`) or of a new one. When an exporter is
//! installed, each such span is recorded as it ends, with those very ids, and sent in batches
//! by `opentelemetry-otlp`'s exporter; so a chat pipeline's trace continues through this
//! service in the tracing backend. Recording is a bounded channel send: when the exporter
//! falls behind (a collector down), spans are dropped and counted, never queued without end,
//! and the work never waits on telemetry.
//!
//! The exporter's HTTP client is the crate's own `reqwest`, behind `opentelemetry-http`'s trait.

use std::borrow::Cow;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use opentelemetry::trace::{
    SpanContext, SpanId, SpanKind, Status, TraceFlags, TraceId, TraceState,
};
use opentelemetry::{InstrumentationScope, KeyValue};
use opentelemetry_otlp::{WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{SpanData, SpanEvents, SpanExporter, SpanLinks};
use tokio::sync::mpsc;

/// `[telemetry.otlp]`.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OtlpConfig {
    /// The collector's OTLP/HTTP address (`http://collector:4318`; spans go to `/v1/traces`
    /// under it, or to the address itself when it ends in `/v1/traces`). Empty: no export.
    pub endpoint: String,
    /// `service.name` of the exported spans.
    pub service_name: String,
    /// Spans sent in one request at most.
    pub max_batch: usize,
    /// How long a span waits for its batch to fill before it is sent anyway.
    pub batch_delay_ms: u64,
    /// Spans kept waiting for the exporter at most; past that they are dropped and counted.
    pub max_queue: usize,
    /// One export request's timeout.
    pub timeout_ms: u64,
}

/// Why the exporter could not start.
#[derive(Debug, thiserror::Error)]
pub enum OtlpError {
    #[error("telemetry.otlp.endpoint {endpoint:?}: {reason}")]
    Endpoint { endpoint: String, reason: String },
    #[error("an OTLP exporter is already installed in this process")]
    AlreadyInstalled,
}

/// One finished span, as the service knows it.
#[derive(Debug, Clone)]
pub struct FinishedSpan {
    /// 32 lower-case hex digits.
    pub trace_id: String,
    /// 16 lower-case hex digits.
    pub span_id: String,
    /// The caller's span (16 hex digits), when the work continued a trace.
    pub parent_span_id: Option<String>,
    pub flags: u8,
    /// `ingest.event`, `serve.inject`, ...
    pub name: String,
    /// Where the work came from: a consumed event or a request answered.
    pub kind: SpanKind,
    pub start: SystemTime,
    pub end: SystemTime,
}

struct Installed {
    spans: mpsc::Sender<SpanData>,
    scope: InstrumentationScope,
}

static INSTALLED: OnceLock<Installed> = OnceLock::new();
static DROPPED: AtomicU64 = AtomicU64::new(0);

/// Spans dropped because the exporter fell behind (since start-up).
pub fn dropped_spans() -> u64 {
    DROPPED.load(Ordering::Relaxed)
}

/// Whether spans are being exported (an exporter is installed in this process).
pub fn enabled() -> bool {
    INSTALLED.get().is_some()
}

/// Records a finished span for export; nothing when no exporter is installed. Never waits.
pub fn record(span: FinishedSpan) {
    let Some(installed) = INSTALLED.get() else {
        return;
    };
    let (Ok(trace_id), Ok(span_id)) = (
        TraceId::from_hex(&span.trace_id),
        SpanId::from_hex(&span.span_id),
    ) else {
        return;
    };
    let parent_span_id = span
        .parent_span_id
        .as_deref()
        .and_then(|id| SpanId::from_hex(id).ok())
        .unwrap_or(SpanId::INVALID);
    let data = SpanData {
        span_context: SpanContext::new(
            trace_id,
            span_id,
            TraceFlags::new(span.flags),
            false,
            TraceState::default(),
        ),
        parent_span_id,
        parent_span_is_remote: parent_span_id != SpanId::INVALID,
        span_kind: span.kind,
        name: Cow::Owned(span.name),
        start_time: span.start,
        end_time: span.end,
        attributes: Vec::new(),
        dropped_attributes_count: 0,
        events: SpanEvents::default(),
        links: SpanLinks::default(),
        status: Status::Unset,
        instrumentation_scope: installed.scope.clone(),
    };
    if installed.spans.try_send(data).is_err() {
        DROPPED.fetch_add(1, Ordering::Relaxed);
    }
}

/// Starts exporting when `config.endpoint` is set: the exporter runs on a task of the current
/// Tokio runtime until [`Exporter::shutdown`] flushes it. `None` when no endpoint is set.
pub fn install(config: &OtlpConfig) -> Result<Option<Exporter>, OtlpError> {
    if config.endpoint.trim().is_empty() {
        return Ok(None);
    }
    let endpoint = traces_url(&config.endpoint);
    let invalid = |reason: String| OtlpError::Endpoint {
        endpoint: config.endpoint.clone(),
        reason,
    };
    if !(endpoint.starts_with("http://") || endpoint.starts_with("https://")) {
        return Err(invalid("an http:// or https:// address".into()));
    }
    let mut exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_http_client(ReqwestClient(reqwest::Client::new()))
        .with_endpoint(endpoint)
        .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
        .with_timeout(Duration::from_millis(config.timeout_ms))
        .build()
        .map_err(|e| invalid(e.to_string()))?;
    exporter.set_resource(
        &Resource::builder_empty()
            .with_service_name(config.service_name.clone())
            .with_attribute(KeyValue::new("service.version", env!("CARGO_PKG_VERSION")))
            .build(),
    );
    let (spans, received) = mpsc::channel(config.max_queue.max(1));
    let scope = InstrumentationScope::builder("persona-prefs")
        .with_version(env!("CARGO_PKG_VERSION"))
        .build();
    INSTALLED
        .set(Installed { spans, scope })
        .map_err(|_| OtlpError::AlreadyInstalled)?;
    let (stop, stopped) = tokio::sync::oneshot::channel();
    let task = tokio::spawn(export_loop(
        exporter,
        received,
        stopped,
        config.max_batch.max(1),
        Duration::from_millis(config.batch_delay_ms),
    ));
    tracing::info!(endpoint = %config.endpoint, "exporting spans over OTLP");
    Ok(Some(Exporter {
        stop: Some(stop),
        task,
    }))
}

/// The running export; [`Exporter::shutdown`] sends what is left.
pub struct Exporter {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
}

impl Exporter {
    /// Sends the spans still waiting, then stops.
    pub async fn shutdown(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let _ = (&mut self.task).await;
    }
}

fn traces_url(endpoint: &str) -> String {
    let endpoint = endpoint.trim();
    if endpoint.ends_with("/v1/traces") {
        endpoint.to_string()
    } else {
        format!("{}/v1/traces", endpoint.trim_end_matches('/'))
    }
}

async fn export_loop(
    exporter: opentelemetry_otlp::SpanExporter,
    mut received: mpsc::Receiver<SpanData>,
    mut stopped: tokio::sync::oneshot::Receiver<()>,
    max_batch: usize,
    delay: Duration,
) {
    let mut batch = Vec::with_capacity(max_batch);
    loop {
        let stopping = tokio::select! {
            span = received.recv() => match span {
                Some(span) => {
                    batch.push(span);
                    // Gather what else arrives within the delay, up to a full batch.
                    let deadline = tokio::time::Instant::now() + delay;
                    while batch.len() < max_batch {
                        match tokio::time::timeout_at(deadline, received.recv()).await {
                            Ok(Some(span)) => batch.push(span),
                            _ => break,
                        }
                    }
                    false
                }
                None => true,
            },
            _ = &mut stopped => true,
        };
        if stopping {
            while let Ok(span) = received.try_recv() {
                batch.push(span);
            }
        }
        for chunk in batch.chunks(max_batch) {
            if let Err(error) = exporter.export(chunk.to_vec()).await {
                tracing::warn!(%error, spans = chunk.len(), "OTLP export failed; spans dropped");
                DROPPED.fetch_add(chunk.len() as u64, Ordering::Relaxed);
            }
        }
        batch.clear();
        if stopping {
            return;
        }
    }
}

/// `opentelemetry-http`'s client over the crate's own reqwest.
#[derive(Debug, Clone)]
struct ReqwestClient(reqwest::Client);

#[async_trait::async_trait]
impl opentelemetry_http::HttpClient for ReqwestClient {
    async fn send_bytes(
        &self,
        request: http::Request<bytes::Bytes>,
    ) -> Result<http::Response<bytes::Bytes>, opentelemetry_http::HttpError> {
        let (parts, body) = request.into_parts();
        let mut outgoing = self.0.request(parts.method, parts.uri.to_string());
        for (name, value) in &parts.headers {
            outgoing = outgoing.header(name, value);
        }
        let response = outgoing.body(body).send().await?;
        let mut reply = http::Response::builder().status(response.status());
        for (name, value) in response.headers() {
            reply = reply.header(name, value);
        }
        Ok(reply.body(response.bytes().await?)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_traces_path_is_added_once() {
        for (given, url) in [
            ("http://c:4318", "http://c:4318/v1/traces"),
            ("http://c:4318/", "http://c:4318/v1/traces"),
            ("http://c:4318/v1/traces", "http://c:4318/v1/traces"),
            (
                "https://otel.example/base",
                "https://otel.example/base/v1/traces",
            ),
        ] {
            assert_eq!(traces_url(given), url, "{given}");
        }
    }
}
