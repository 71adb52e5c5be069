//! Real `persona-prefs serve` processes: two sharing one persona's events, one killed with
//! SIGKILL mid-stream and restarted, one stopped with SIGTERM. Exactly-once effects are checked
//! through reinforcement counts: N events voicing one opinion must end as one preference
//! reinforced exactly N - 1 times.

mod common;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{Cleanup, test_config};
use persona_prefs::app::{App, wait_until_drained};
use persona_prefs::config::Config;
use persona_prefs::store::{ListOptions, Preference};
use serde_json::json;

fn spawn_worker(config: &Config, log: &std::path::Path) -> Child {
    spawn_worker_with(config, log, &[])
}

fn spawn_worker_with(config: &Config, log: &std::path::Path, extra: &[(&str, String)]) -> Child {
    let log = std::fs::File::create(log).unwrap();
    Command::new(env!("CARGO_BIN_EXE_persona-prefs"))
        .arg("serve")
        .envs(common::cli::config_env(config))
        .envs(extra.iter().map(|(k, v)| (*k, v.as_str())))
        .env("RUST_LOG", "persona_prefs=debug")
        .stdout(Stdio::null())
        .stderr(Stdio::from(log))
        .spawn()
        .expect("start persona-prefs serve")
}

use common::Children as Workers;

/// Waits until `count` workers have a pull request open on the consumer.
async fn wait_for_pullers(app: &App, count: usize) {
    let mut consumer = app.consumer().await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while consumer.info().await.unwrap().num_waiting < count {
        assert!(Instant::now() < deadline, "workers did not start pulling");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn publish(app: &App, persona: &str, n: usize, text: &str) {
    let event = json!({
        "event_id": format!("{persona}-{n}-{text}"), "persona_id": persona, "platform": "p", "channel_id": "c",
        "messages": [
            {"message_id": format!("{persona}-{n}-{text}-u"), "role": "user", "user_id": "u1", "content": "And?",
             "timestamp": format!("2026-11-20T09:{:02}:{:02}Z", (n / 60) % 60, n % 60)},
            {"message_id": format!("{persona}-{n}-{text}-p"), "role": "persona", "content": text,
             "timestamp": format!("2026-11-20T10:{:02}:{:02}Z", (n / 60) % 60, n % 60)}
        ]
    });
    let subject =
        persona_prefs::subjects::event_subject(&app.config.ingest.subject_prefix, persona);
    app.js
        .publish(subject, serde_json::to_vec(&event).unwrap().into())
        .await
        .unwrap()
        .await
        .unwrap();
}

async fn preferences(app: &App, persona: &str) -> Vec<Preference> {
    app.store
        .list_preferences(
            persona,
            &ListOptions {
                include_retracted: true,
                limit: 100,
                ..Default::default()
            },
        )
        .await
        .unwrap()
}

fn processed_in(log: &std::path::Path) -> usize {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .matches("event processed")
        .count()
}

fn setup(label: &str) -> (Config, Cleanup, tempdir::Dir) {
    let mut config = test_config(label);
    config.ingest.ack_wait_ms = 3000;
    let cleanup = Cleanup(config.clone());
    (config, cleanup, tempdir::Dir::new(label))
}

#[tokio::test]
async fn two_worker_processes_on_one_persona_make_no_twins_and_lose_no_reinforcement() {
    let (mut config, _cleanup, dir) = setup("twoworkers");
    // Small pull batches, so one worker cannot take every event in a single pull.
    config.ingest.max_in_flight = 4;
    let app = App::start(config.clone()).await.unwrap();
    app.consumer().await.unwrap();
    let logs = [dir.path("a.log"), dir.path("b.log")];
    let _workers = Workers(vec![
        spawn_worker(&config, &logs[0]),
        spawn_worker(&config, &logs[1]),
    ]);
    wait_for_pullers(&app, 2).await;

    let per_topic = 25;
    for n in 0..per_topic {
        publish(&app, "ada", n, "I love green tea.").await;
        publish(&app, "ada", n, "Honestly, jazz is wonderful.").await;
    }
    drained(&app).await;

    let stored = preferences(&app, "ada").await;
    let names: Vec<&str> = stored.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(stored.len(), 2, "no twins: {names:?}");
    for preference in &stored {
        assert_eq!(
            preference.reinforcement_count,
            per_topic as u64 - 1,
            "{} reinforced once per later event",
            preference.name
        );
    }
    let (a, b) = (processed_in(&logs[0]), processed_in(&logs[1]));
    assert_eq!(a + b, 2 * per_topic, "each event processed once in all");
    assert!(a > 0 && b > 0, "both workers took part: {a} and {b}");
}

#[tokio::test]
async fn a_worker_killed_mid_stream_loses_nothing_and_doubles_nothing_after_restart() {
    let (config, _cleanup, dir) = setup("killed");
    let app = App::start(config.clone()).await.unwrap();
    app.consumer().await.unwrap();
    let mut workers = Workers(vec![spawn_worker(&config, &dir.path("first.log"))]);
    wait_for_pullers(&app, 1).await;

    let total = 60;
    for n in 0..total {
        publish(&app, "ada", n, "I love green tea.").await;
    }
    // Kill it once it is well into the stream.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let stored = preferences(&app, "ada").await;
        if stored.first().is_some_and(|p| p.reinforcement_count >= 10) {
            break;
        }
        assert!(Instant::now() < deadline, "first worker made no progress");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    workers.0[0].kill().unwrap();
    workers.0[0].wait().unwrap();
    let at_kill = preferences(&app, "ada").await[0].reinforcement_count;
    assert!(
        at_kill < total as u64 - 1,
        "killed before the end ({at_kill})"
    );

    workers
        .0
        .push(spawn_worker(&config, &dir.path("second.log")));
    drained(&app).await;
    let stored = preferences(&app, "ada").await;
    assert_eq!(stored.len(), 1);
    assert_eq!(
        stored[0].reinforcement_count,
        total as u64 - 1,
        "every event applied exactly once across the crash"
    );
}

#[tokio::test]
async fn sigterm_stops_intake_and_exits_cleanly_with_nothing_lost() {
    let (config, _cleanup, dir) = setup("sigterm");
    let app = App::start(config.clone()).await.unwrap();
    app.consumer().await.unwrap();
    let mut first = spawn_worker(&config, &dir.path("first.log"));
    wait_for_pullers(&app, 1).await;
    let total = 40;
    for n in 0..total {
        publish(&app, "ada", n, "I love green tea.").await;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let status = Command::new("kill")
        .arg("-TERM")
        .arg(first.id().to_string())
        .status()
        .unwrap();
    assert!(status.success());
    let exit = first.wait().unwrap();
    assert!(exit.success(), "graceful exit, got {exit:?}");
    let log = std::fs::read_to_string(dir.path("first.log")).unwrap();
    assert!(log.contains("stopping intake"), "announces the shutdown");

    let _second = Workers(vec![spawn_worker(&config, &dir.path("second.log"))]);
    drained(&app).await;
    let stored = preferences(&app, "ada").await;
    assert_eq!(stored[0].reinforcement_count, total as u64 - 1);
}

/// A replica shutting down stops taking requests at once, while its worker finishes the event
/// in flight: the other replica answers every request meanwhile, none times out.
#[tokio::test(flavor = "multi_thread")]
async fn a_replica_shutting_down_hands_requests_to_the_others_at_once() {
    let (config, _cleanup, dir) = setup("handover");
    // The replica's worker is busy for 3 s with one event: its LLM answers slowly.
    let fake = common::fake_openai::FakeOpenAi::start().await;
    fake.respond_with(|_, _| {
        common::fake_openai::Reply::Delay(
            Duration::from_secs(3),
            Box::new(common::fake_openai::Reply::opinions(json!([]))),
        )
    });
    let leaving = spawn_worker_with(
        &config,
        &dir.path("leaving.log"),
        &[
            ("PERSONA_PREFS__EXTRACT__KIND", "llm".into()),
            (
                "PERSONA_PREFS__EXTRACT__LLM__BASE_URL",
                fake.base_url.clone(),
            ),
        ],
    );
    let mut leaving = Workers(vec![leaving]);
    // The replica that stays: the service only, in this process.
    let app = App::start(config.clone()).await.unwrap();
    let (_stop, stopped) = tokio::sync::watch::channel(false);
    let staying = app.serve(stopped).await.unwrap();
    wait_for_pullers(&app, 1).await;

    publish(&app, "ada", 0, "I love green tea.").await;
    let deadline = Instant::now() + Duration::from_secs(30);
    while fake.received().is_empty() {
        assert!(Instant::now() < deadline, "the event never reached the LLM");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let status = Command::new("kill")
        .arg("-TERM")
        .arg(leaving.0[0].id().to_string())
        .status()
        .unwrap();
    assert!(status.success());
    tokio::time::sleep(Duration::from_millis(300)).await;

    // The leaving replica is still finishing its event; every request is answered anyway.
    let subject = persona_prefs::serve::Endpoint::Stats.subject(
        &config.serve.subject_prefix,
        &config.serve.tenant,
        "ada",
    );
    for n in 0..20 {
        let reply = tokio::time::timeout(
            Duration::from_secs(2),
            app.nats
                .request(subject.clone(), r#"{"persona_id": "ada"}"#.into()),
        )
        .await;
        assert!(
            matches!(reply, Ok(Ok(_))),
            "request {n} during the handover was not answered: {reply:?}"
        );
    }
    let exit = leaving.0.pop().unwrap().wait().unwrap();
    assert!(exit.success(), "graceful exit, got {exit:?}");
    staying.stop().await;
}

/// A scratch folder removed on drop.
mod tempdir {
    pub struct Dir(std::path::PathBuf);
    impl Dir {
        pub fn new(label: &str) -> Dir {
            let path = std::env::temp_dir().join(super::common::unique(label));
            std::fs::create_dir_all(&path).unwrap();
            Dir(path)
        }
        pub fn path(&self, name: &str) -> std::path::PathBuf {
            self.0.join(name)
        }
    }
    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// Waits until every event published so far is settled, by whichever workers are running.
async fn drained(app: &App) {
    wait_until_drained(
        &app.js,
        app.consumer().await.unwrap(),
        Duration::from_secs(120),
    )
    .await
    .unwrap();
}

#[tokio::test]
async fn a_publishers_trace_continues_through_ingest_the_llm_call_and_injection() {
    use persona_prefs::trace_context::{TRACEPARENT, TraceContext};
    let (config, _cleanup, dir) = setup("trace");
    let fake = common::fake_openai::FakeOpenAi::start().await;
    fake.respond_with(|_, _| common::fake_openai::Reply::opinions(json!([])));
    let app = App::start(config.clone()).await.unwrap();
    app.consumer().await.unwrap();
    let log = dir.path("worker.log");
    let _workers = Workers(vec![spawn_worker_with(
        &config,
        &log,
        &[
            ("PERSONA_PREFS__EXTRACT__KIND", "llm".into()),
            (
                "PERSONA_PREFS__EXTRACT__LLM__BASE_URL",
                fake.base_url.clone(),
            ),
            ("PERSONA_PREFS__LOG__FORMAT", "json".into()),
        ],
    )]);
    wait_for_pullers(&app, 1).await;

    // A chat pipeline publishes an event inside its own trace.
    let event_trace = "0af7651916cd43dd8448eb211c80319c";
    let publisher_span = "b7ad6b7169203331";
    let mut headers = async_nats::HeaderMap::new();
    headers.insert(
        TRACEPARENT,
        format!("00-{event_trace}-{publisher_span}-01").as_str(),
    );
    let event = json!({"event_id": "traced", "persona_id": "ada", "platform": "p", "channel_id": "c",
        "messages": [{"message_id": "m1", "role": "persona", "content": "I love owls.", "timestamp": "2026-11-20T08:00:00Z"}]});
    let subject = persona_prefs::subjects::event_subject(&config.ingest.subject_prefix, "ada");
    app.js
        .publish_with_headers(subject, headers, serde_json::to_vec(&event).unwrap().into())
        .await
        .unwrap()
        .await
        .unwrap();
    drained(&app).await;

    // The LLM call names the worker's span, in the publisher's trace, as its parent.
    let sent = fake.received();
    assert_eq!(sent.len(), 1, "{sent:?}");
    let llm_parent = sent[0]
        .traceparent
        .as_deref()
        .and_then(TraceContext::parse)
        .expect("the LLM request carries a valid traceparent");
    assert_eq!(llm_parent.trace_id, event_trace);
    assert_ne!(
        llm_parent.span_id, publisher_span,
        "a span of the worker's own"
    );
    assert_eq!(llm_parent.flags, 1, "the sampling decision is kept");

    // A prompt builder's injection request, in another trace.
    let request_trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    let mut headers = async_nats::HeaderMap::new();
    headers.insert(
        TRACEPARENT,
        format!("00-{request_trace}-00f067aa0ba902b7-01").as_str(),
    );
    let subject = persona_prefs::serve::Endpoint::Inject.subject(
        &config.serve.subject_prefix,
        &config.serve.tenant,
        "ada",
    );
    let reply = app
        .nats
        .request_with_headers(
            subject,
            headers,
            r#"{"persona_id": "ada", "query": "owls"}"#.into(),
        )
        .await
        .unwrap();
    assert!(reply.headers.is_none(), "inject succeeded");

    // Both show in the worker's JSON logs under their trace ids, with the callers' spans as
    // parents: a log pipeline joins them to the callers' traces.
    let deadline = Instant::now() + Duration::from_secs(10);
    let lines = loop {
        let text = std::fs::read_to_string(&log).unwrap();
        let lines: Vec<serde_json::Value> = text
            .lines()
            .filter_map(|line| serde_json::from_str(line).ok())
            .collect();
        let answered = lines
            .iter()
            .any(|line| line["fields"]["message"] == "request answered");
        if answered || Instant::now() > deadline {
            break lines;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let with_message = |message: &str| {
        lines
            .iter()
            .find(|line| line["fields"]["message"] == message)
            .unwrap_or_else(|| panic!("no {message:?} line in {lines:#?}"))
            .clone()
    };
    let processed = with_message("event processed");
    assert_eq!(processed["span"]["trace_id"], event_trace, "{processed}");
    assert_eq!(processed["span"]["parent_span_id"], publisher_span);
    assert_eq!(processed["span"]["span_id"], llm_parent.span_id.as_str());
    let answered = with_message("request answered");
    assert_eq!(answered["span"]["trace_id"], request_trace, "{answered}");
    assert_eq!(answered["span"]["parent_span_id"], "00f067aa0ba902b7");
    assert_eq!(answered["span"]["work"], "inject");
}

/// A stand-in OTLP/HTTP collector: decodes every `/v1/traces` request's protobuf and keeps
/// the spans with their resource's `service.name`.
struct Collector {
    url: String,
    spans: std::sync::Arc<
        std::sync::Mutex<Vec<(String, opentelemetry_proto::tonic::trace::v1::Span)>>,
    >,
    _server: tokio::task::JoinHandle<()>,
}

impl Collector {
    async fn start() -> Collector {
        use opentelemetry_proto::tonic::collector::trace::v1::{
            ExportTraceServiceRequest, ExportTraceServiceResponse,
        };
        use prost::Message;
        let spans = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let kept = spans.clone();
        let receive = move |body: axum::body::Bytes| {
            let kept = kept.clone();
            async move {
                let Ok(request) = ExportTraceServiceRequest::decode(body) else {
                    return (axum::http::StatusCode::BAD_REQUEST, Vec::new());
                };
                for resource_spans in request.resource_spans {
                    let service = resource_spans
                        .resource
                        .iter()
                        .flat_map(|r| r.attributes.iter())
                        .find(|a| a.key == "service.name")
                        .and_then(|a| a.value.clone())
                        .map(|v| format!("{:?}", v.value))
                        .unwrap_or_default();
                    for scope in resource_spans.scope_spans {
                        for span in scope.spans {
                            kept.lock().unwrap().push((service.clone(), span));
                        }
                    }
                }
                (
                    axum::http::StatusCode::OK,
                    ExportTraceServiceResponse::default().encode_to_vec(),
                )
            }
        };
        let app = axum::Router::new().route("/v1/traces", axum::routing::post(receive));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let server = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        Collector {
            url,
            spans,
            _server: server,
        }
    }

    fn named(&self, name: &str) -> Option<(String, opentelemetry_proto::tonic::trace::v1::Span)> {
        self.spans
            .lock()
            .unwrap()
            .iter()
            .find(|(_, span)| span.name == name)
            .cloned()
    }
}

/// With `telemetry.otlp.endpoint` set, `persona-prefs serve` exports a span for each event and
/// each request over OTLP/HTTP, continuing the caller's `traceparent`: the same trace id, the
/// caller's span as parent.
#[tokio::test]
async fn spans_are_exported_over_otlp_continuing_the_callers_traces() {
    use persona_prefs::trace_context::TRACEPARENT;
    let (config, _cleanup, dir) = setup("otlp");
    let collector = Collector::start().await;
    let app = App::start(config.clone()).await.unwrap();
    app.consumer().await.unwrap();
    let _workers = Workers(vec![spawn_worker_with(
        &config,
        &dir.path("worker.log"),
        &[
            (
                "PERSONA_PREFS__TELEMETRY__OTLP__ENDPOINT",
                collector.url.clone(),
            ),
            (
                "PERSONA_PREFS__TELEMETRY__OTLP__BATCH_DELAY_MS",
                "50".into(),
            ),
        ],
    )]);
    wait_for_pullers(&app, 1).await;

    let event_trace = "0af7651916cd43dd8448eb211c80319c";
    let publisher_span = "b7ad6b7169203331";
    let mut headers = async_nats::HeaderMap::new();
    headers.insert(
        TRACEPARENT,
        format!("00-{event_trace}-{publisher_span}-01").as_str(),
    );
    let event = json!({"event_id": "traced", "persona_id": "ada", "platform": "p", "channel_id": "c",
        "messages": [{"message_id": "m1", "role": "persona", "content": "I love owls.", "timestamp": "2026-11-20T08:00:00Z"}]});
    let subject = persona_prefs::subjects::event_subject(&config.ingest.subject_prefix, "ada");
    app.js
        .publish_with_headers(subject, headers, serde_json::to_vec(&event).unwrap().into())
        .await
        .unwrap()
        .await
        .unwrap();
    drained(&app).await;

    let request_trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    let caller_span = "00f067aa0ba902b7";
    let mut headers = async_nats::HeaderMap::new();
    headers.insert(
        TRACEPARENT,
        format!("00-{request_trace}-{caller_span}-01").as_str(),
    );
    let subject = persona_prefs::serve::Endpoint::Inject.subject(
        &config.serve.subject_prefix,
        &config.serve.tenant,
        "ada",
    );
    let reply = app
        .nats
        .request_with_headers(
            subject,
            headers,
            r#"{"persona_id": "ada", "query": "owls"}"#.into(),
        )
        .await
        .unwrap();
    assert!(reply.headers.is_none(), "inject succeeded");

    let deadline = Instant::now() + Duration::from_secs(30);
    let (ingested, injected) = loop {
        if let (Some(ingested), Some(injected)) = (
            collector.named("ingest.event"),
            collector.named("serve.inject"),
        ) {
            break (ingested, injected);
        }
        assert!(
            Instant::now() < deadline,
            "spans never reached the collector: {:?}",
            collector.spans.lock().unwrap()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let hex = |bytes: &[u8]| bytes.iter().map(|b| format!("{b:02x}")).collect::<String>();
    use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
    let (service, span) = ingested;
    assert!(service.contains("persona-prefs"), "service.name: {service}");
    assert_eq!(hex(&span.trace_id), event_trace);
    assert_eq!(hex(&span.parent_span_id), publisher_span);
    assert_ne!(
        hex(&span.span_id),
        publisher_span,
        "a span of the worker's own"
    );
    assert_eq!(span.kind, SpanKind::Consumer as i32);
    assert!(span.end_time_unix_nano >= span.start_time_unix_nano);
    let (_, span) = injected;
    assert_eq!(hex(&span.trace_id), request_trace);
    assert_eq!(hex(&span.parent_span_id), caller_span);
    assert_eq!(span.kind, SpanKind::Server as i32);
}
