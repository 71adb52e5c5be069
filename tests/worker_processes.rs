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

struct Workers(Vec<Child>);

impl Drop for Workers {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

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
    let subject = persona_prefs::serve::Endpoint::Stats.subject(&config.serve.subject_prefix);
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
