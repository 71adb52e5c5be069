//! NATS servers that authenticate users by NKey (`nats.nkey_seed_file`) or by decentralised
//! JWT auth (`nats.credentials_file`, an operator-mode server): the worker connects with the
//! file named, and without it is refused with the server's reason.

mod common;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::test_config;
use persona_prefs::app::connect_nats;

struct NkeyNats {
    process: Child,
    port: u16,
    dir: std::path::PathBuf,
}

impl NkeyNats {
    async fn start(user_public_key: &str) -> NkeyNats {
        NkeyNats::start_with(
            "nkeynats",
            &format!("authorization {{ users = [ {{ nkey: {user_public_key} }} ] }}"),
        )
        .await
    }

    /// A server with JetStream and `auth` as its authentication section.
    async fn start_with(label: &str, auth: &str) -> NkeyNats {
        NkeyNats::start_with_env(label, auth, &[]).await
    }

    /// [`NkeyNats::start_with`], with environment variables for the server (which resolves
    /// `$NAME` in its configuration from them).
    async fn start_with_env(label: &str, auth: &str, env: &[(&str, &str)]) -> NkeyNats {
        let binary = std::env::var("PERSONA_PREFS_NATS_SERVER")
            .expect("PERSONA_PREFS_NATS_SERVER unset: run through scripts/test");
        let dir = common::scratch_dir(label);
        let port = common::free_port();
        let config = dir.join("server.conf");
        std::fs::write(
            &config,
            format!(
                "listen: 127.0.0.1:{port}\njetstream {{ store_dir: \"{}\" }}\n{auth}\n",
                dir.join("js").display()
            ),
        )
        .unwrap();
        let process = Command::new(binary)
            .arg("-c")
            .arg(&config)
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("server.log")).unwrap())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        while tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_err()
        {
            assert!(
                Instant::now() < deadline,
                "nats-server did not start: {}",
                std::fs::read_to_string(dir.join("server.log")).unwrap_or_default()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        NkeyNats { process, port, dir }
    }
}

impl Drop for NkeyNats {
    fn drop(&mut self) {
        let _ = self.process.kill();
        let _ = self.process.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_worker_authenticates_with_an_nkey_seed() {
    let user = nkeys::KeyPair::new_user();
    let nats = NkeyNats::start(&user.public_key()).await;
    let seed_file = nats.dir.join("user.nk");
    std::fs::write(&seed_file, format!("{}\n", user.seed().unwrap())).unwrap();

    let mut config = test_config("nkey");
    config.nats.url = format!("nats://127.0.0.1:{}", nats.port);
    config.nats.connect_timeout_ms = 2000;
    config.nats.nkey_seed_file = seed_file.to_string_lossy().into_owned();
    config.validate().unwrap();
    let client = connect_nats(&config).await.expect("accepted with the seed");
    let mut echo = client.subscribe("nkey.echo").await.unwrap();
    client.publish("nkey.echo", "hello".into()).await.unwrap();
    let got = tokio::time::timeout(Duration::from_secs(5), futures::StreamExt::next(&mut echo))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(&got.payload[..], b"hello");

    config.nats.nkey_seed_file = String::new();
    let refused = connect_nats(&config).await.expect_err("refused without it");
    assert!(
        refused.to_string().to_lowercase().contains("authorization"),
        "{refused}"
    );

    config.nats.nkey_seed_file = "/nonexistent/user.nk".into();
    let error = config.validate().unwrap_err().to_string();
    assert!(error.contains("nats.nkey_seed_file"), "{error}");
}

/// A NATS JWT: `claims` (with `iss`, `sub`, `iat` and `jti` filled in) signed by `issuer`,
/// the way `nsc` writes them.
fn jwt(issuer: &nkeys::KeyPair, subject: &str, mut claims: serde_json::Value) -> String {
    use base64::Engine;
    let encode = |bytes: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes);
    claims["iss"] = issuer.public_key().into();
    claims["sub"] = subject.into();
    claims["iat"] = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        .into();
    claims["jti"] = uuid::Uuid::new_v4()
        .simple()
        .to_string()
        .to_uppercase()
        .into();
    let signed = format!(
        "{}.{}",
        encode(br#"{"typ":"JWT","alg":"ed25519-nkey"}"#),
        encode(claims.to_string().as_bytes())
    );
    let signature = issuer.sign(signed.as_bytes()).unwrap();
    format!("{signed}.{}", encode(&signature))
}

/// An operator, an account with JetStream, and a user of it; the server trusts the operator
/// and knows the account from a memory resolver, as a decentralised deployment does.
#[tokio::test(flavor = "multi_thread")]
async fn the_worker_authenticates_with_a_creds_file_on_an_operator_mode_server() {
    let operator = nkeys::KeyPair::new_operator();
    let account = nkeys::KeyPair::new_account();
    let user = nkeys::KeyPair::new_user();
    let operator_jwt = jwt(
        &operator,
        &operator.public_key(),
        serde_json::json!({"name": "test-operator", "nats": {"type": "operator", "version": 2}}),
    );
    let unlimited = -1;
    let account_jwt = jwt(
        &operator,
        &account.public_key(),
        serde_json::json!({"name": "persona-prefs", "nats": {
            "type": "account", "version": 2,
            "limits": {"subs": unlimited, "data": unlimited, "payload": unlimited,
                       "imports": unlimited, "exports": unlimited, "wildcards": true,
                       "conn": unlimited, "leaf": unlimited,
                       "mem_storage": unlimited, "disk_storage": unlimited,
                       "streams": unlimited, "consumer": unlimited},
            "default_permissions": {"pub": {}, "sub": {}}}}),
    );
    let user_jwt = jwt(
        &account,
        &user.public_key(),
        serde_json::json!({"name": "worker", "nats": {
            "type": "user", "version": 2, "pub": {}, "sub": {},
            "subs": unlimited, "data": unlimited, "payload": unlimited}}),
    );
    // JetStream needs the server's own system account.
    let system = nkeys::KeyPair::new_account();
    let system_jwt = jwt(
        &operator,
        &system.public_key(),
        serde_json::json!({"name": "SYS", "nats": {"type": "account", "version": 2}}),
    );
    let nats = NkeyNats::start_with(
        "credsnats",
        &format!(
            "operator: {operator_jwt}\nsystem_account: {system}\nresolver: MEMORY\n\
             resolver_preload: {{ {system}: {system_jwt}, {account}: {account_jwt} }}",
            system = system.public_key(),
            account = account.public_key()
        ),
    )
    .await;
    let creds = nats.dir.join("worker.creds");
    std::fs::write(
        &creds,
        format!(
            "-----BEGIN NATS USER JWT-----\n{user_jwt}\n------END NATS USER JWT------\n\n\
             ************************* IMPORTANT *************************\n\
             NKEY Seed printed below can be used to sign and prove identity.\n\n\
             -----BEGIN USER NKEY SEED-----\n{}\n------END USER NKEY SEED------\n",
            user.seed().unwrap()
        ),
    )
    .unwrap();

    let mut config = test_config("creds");
    config.nats.url = format!("nats://127.0.0.1:{}", nats.port);
    config.nats.connect_timeout_ms = 2000;
    config.nats.credentials_file = creds.to_string_lossy().into_owned();
    config.validate().unwrap();
    // The whole worker, JetStream included: the account's JWT must grant it.
    let _cleanup = common::Cleanup(config.clone());
    let running = common::Running::worker(config.clone()).await;
    let event = serde_json::json!({
        "event_id": "e1", "persona_id": "ada", "platform": "discord", "channel_id": "c1",
        "messages": [
            {"message_id": "e1-0", "role": "user", "user_id": "u1", "content": "Tea?",
             "timestamp": "2026-11-20T08:00:00Z"},
            {"message_id": "e1-1", "role": "persona", "content": "I love green tea.",
             "timestamp": "2026-11-20T08:01:00Z"}]
    });
    running.publish_event(&event).await;
    running.drain().await;
    let stored = common::active_preferences(&running.app.store, "ada").await;
    assert_eq!(
        stored.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(),
        vec!["green tea"]
    );
    running.stop().await;

    // Another user's seed with this user's JWT proves nothing.
    let impostor = nkeys::KeyPair::new_user();
    let forged = nats.dir.join("forged.creds");
    std::fs::write(
        &forged,
        std::fs::read_to_string(&creds)
            .unwrap()
            .replace(&user.seed().unwrap(), &impostor.seed().unwrap()),
    )
    .unwrap();
    config.nats.credentials_file = forged.to_string_lossy().into_owned();
    let refused = connect_nats(&config)
        .await
        .expect_err("refused with a forged seed");
    assert!(
        refused.to_string().to_lowercase().contains("authorization"),
        "{refused}"
    );
    config.nats.credentials_file = String::new();
    connect_nats(&config)
        .await
        .expect_err("refused with no credentials");

    // Files that cannot work are refused at start-up, with the key named.
    let seed_only = nats.dir.join("seed-only.creds");
    std::fs::write(&seed_only, user.seed().unwrap()).unwrap();
    config.nats.credentials_file = seed_only.to_string_lossy().into_owned();
    let error = config.validate().unwrap_err().to_string();
    assert!(
        error.contains("nats.credentials_file") && error.contains("not a .creds file"),
        "{error}"
    );
    config.nats.credentials_file = creds.to_string_lossy().into_owned();
    config.nats.nkey_seed_file = seed_only.to_string_lossy().into_owned();
    let error = config.validate().unwrap_err().to_string();
    assert!(
        error.contains("nats.credentials_file") && error.contains("not both"),
        "{error}"
    );
}

/// `deploy/nats/authorization.conf` as shipped, with the test's subject, stream and consumer
/// names in place of the defaults it is written for.
fn shipped_authorization(config: &persona_prefs::config::Config) -> String {
    let defaults = persona_prefs::config::Config::defaults();
    let mut text = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/nats/authorization.conf"),
    )
    .unwrap();
    for (default, ours) in [
        (&defaults.ingest.consumer, &config.ingest.consumer),
        (&defaults.ingest.stream, &config.ingest.stream),
        (&defaults.ingest.dlq_stream, &config.ingest.dlq_stream),
        (
            &defaults.ingest.subject_prefix,
            &config.ingest.subject_prefix,
        ),
        (
            &defaults.ingest.dlq_subject_prefix,
            &config.ingest.dlq_subject_prefix,
        ),
        (&defaults.serve.subject_prefix, &config.serve.subject_prefix),
    ] {
        assert!(
            text.contains(default.as_str()),
            "{default} is not in the file"
        );
        text = text.replace(default.as_str(), ours);
    }
    text
}

/// A client of one role, which records the server's permission errors.
struct RoleClient {
    client: async_nats::Client,
    errors: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    /// The server's log, for a failure message.
    server_log: std::path::PathBuf,
}

impl RoleClient {
    /// Connects as `user` (async-nats itself ignores credentials in a URL).
    async fn connect(nats: &NkeyNats, user: &str, password: &str) -> RoleClient {
        let port = nats.port;
        let errors = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let seen = errors.clone();
        let client = async_nats::ConnectOptions::new()
            .event_callback(move |event| {
                let seen = seen.clone();
                async move {
                    if let async_nats::Event::ServerError(error) = event {
                        seen.lock().unwrap().push(error.to_string());
                    }
                }
            })
            .user_and_password(user.into(), password.into())
            .connect(format!("nats://127.0.0.1:{port}"))
            .await
            .unwrap();
        RoleClient {
            client,
            errors,
            server_log: nats.dir.join("server.log"),
        }
    }

    /// A request the role may make: its reply, which must not be an error reply.
    async fn allowed(&self, subject: String, body: serde_json::Value) -> serde_json::Value {
        let reply = tokio::time::timeout(
            Duration::from_secs(10),
            self.client
                .request(subject.clone(), serde_json::to_vec(&body).unwrap().into()),
        )
        .await
        .unwrap_or_else(|_| {
            panic!(
                "{subject}: no reply; server errors {:?}; server log:\n{}",
                self.errors(),
                std::fs::read_to_string(&self.server_log).unwrap_or_default()
            )
        })
        .unwrap();
        let body: serde_json::Value = serde_json::from_slice(&reply.payload).unwrap();
        assert!(reply.headers.is_none(), "{subject} failed: {body}");
        body
    }

    /// A request the role may not make: the server refuses to deliver it, and says so.
    async fn refused(&self, subject: String) {
        let reply = tokio::time::timeout(
            Duration::from_secs(1),
            self.client.request(subject.clone(), "{}".into()),
        )
        .await;
        assert!(
            !matches!(reply, Ok(Ok(_))),
            "{subject} was answered: {reply:?}"
        );
        let deadline = Instant::now() + Duration::from_secs(5);
        while !self
            .errors()
            .iter()
            .any(|e| e.contains("Permissions Violation") && e.contains(&subject))
        {
            assert!(
                Instant::now() < deadline,
                "no permission error for {subject}: {:?}",
                self.errors()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    fn errors(&self) -> Vec<String> {
        self.errors.lock().unwrap().clone()
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn each_role_does_its_own_work_with_the_shipped_permissions_and_nothing_more() {
    use persona_prefs::serve::Endpoint;
    let mut config = test_config("roles");
    let passwords = [
        ("PERSONA_PREFS_PRODUCER_PASSWORD", "producer-secret"),
        ("PERSONA_PREFS_PROMPT_BUILDER_PASSWORD", "builder-secret"),
        ("PERSONA_PREFS_ADMIN_PASSWORD", "admin-secret"),
        ("PERSONA_PREFS_WORKER_PASSWORD", "worker-secret"),
    ];
    // Beside the shipped roles, two prompt builders each held to one persona's subjects.
    let prefix = config.serve.subject_prefix.clone();
    let scoped = |user: &str, persona: &str| {
        format!(
            "    {{ user: {user}, password: \"{user}-secret\", permissions: {{ publish: {{ allow: [\"{prefix}.read.*.default.{persona}\"] }}, subscribe: {{ allow: [\"_INBOX.>\"] }} }} }}\n"
        )
    };
    let authorization = shipped_authorization(&config).replacen(
        "  users = [\n",
        &format!(
            "  users = [\n{}{}",
            scoped("builder_ada", "ada"),
            scoped("builder_bob", "bob")
        ),
        1,
    );
    let nats = NkeyNats::start_with_env("roles", &authorization, &passwords).await;
    let url =
        |user: &str, password: &str| format!("nats://{user}:{password}@127.0.0.1:{}", nats.port);
    let _cleanup = common::Cleanup(config.clone());

    // The worker, with the worker's grant only: ingest, dead letters, the service.
    config.nats.url = url("worker", "worker-secret");
    let app = match persona_prefs::app::App::start(config.clone()).await {
        Ok(app) => app,
        Err(error) => panic!(
            "the worker could not start with its grant: {error}\n{}",
            std::fs::read_to_string(nats.dir.join("server.log")).unwrap_or_default()
        ),
    };
    let consumer = app.consumer().await.unwrap();
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let worker = tokio::spawn(app.worker().run(consumer.clone(), stopped.clone()));
    let services = app.serve(stopped).await.unwrap();
    let subject = |endpoint: Endpoint| {
        endpoint.subject(&config.serve.subject_prefix, &config.serve.tenant, "ada")
    };

    // A producer publishes events, one of them broken (a dead letter), and calls nothing.
    let producer = RoleClient::connect(&nats, "producer", "producer-secret").await;
    let js = async_nats::jetstream::new(producer.client.clone());
    let event = serde_json::json!({"event_id": "e1", "persona_id": "ada", "platform": "p", "channel_id": "c",
        "messages": [
            {"message_id": "u1", "role": "user", "user_id": "bob", "content": "And owls?", "timestamp": "2026-11-20T07:59:00Z"},
            {"message_id": "m1", "role": "persona", "content": "I love owls.", "timestamp": "2026-11-20T08:00:00Z"}]});
    for payload in [serde_json::to_vec(&event).unwrap(), b"not json".to_vec()] {
        persona_prefs::client::publish_event(
            &js,
            &config.ingest.subject_prefix,
            "ada",
            payload,
            None,
        )
        .await
        .expect("a producer may publish events");
    }
    producer.refused(subject(Endpoint::Inject)).await;
    producer.refused(subject(Endpoint::Add)).await;
    persona_prefs::app::wait_until_drained(&app.js, consumer, Duration::from_secs(30))
        .await
        .unwrap();

    // A prompt builder injects, and is refused curation and erasure.
    let builder = RoleClient::connect(&nats, "prompt_builder", "builder-secret").await;
    let injected = builder
        .allowed(
            subject(Endpoint::Inject),
            serde_json::json!({"persona_id": "ada", "query": "owls", "active_user_ids": ["bob"]}),
        )
        .await;
    assert_eq!(
        injected["preferences"].as_array().unwrap().len(),
        1,
        "{injected}"
    );
    builder.refused(subject(Endpoint::Add)).await;
    builder.refused(subject(Endpoint::PurgeUser)).await;
    // The old subjects name no persona: no client is granted them.
    builder
        .refused(Endpoint::Inject.legacy_subject(&config.serve.subject_prefix))
        .await;
    builder
        .refused(Endpoint::Inject.role_subject(&config.serve.subject_prefix))
        .await;

    // Two prompt builders held to one persona each: each reaches its own, never the other's,
    // whether by the other's subject (NATS refuses it) or by naming it in the body (the
    // service refuses it).
    let scoped_subject = |endpoint: Endpoint, persona: &str| {
        endpoint.subject(&config.serve.subject_prefix, &config.serve.tenant, persona)
    };
    for (user, own, other) in [("builder_ada", "ada", "bob"), ("builder_bob", "bob", "ada")] {
        let scoped_builder = RoleClient::connect(&nats, user, &format!("{user}-secret")).await;
        scoped_builder
            .allowed(
                scoped_subject(Endpoint::Stats, own),
                serde_json::json!({"persona_id": own}),
            )
            .await;
        scoped_builder
            .refused(scoped_subject(Endpoint::Stats, other))
            .await;
        scoped_builder
            .refused(scoped_subject(Endpoint::Inject, other))
            .await;
        scoped_builder
            .refused(scoped_subject(Endpoint::Personas, own))
            .await;
        let smuggled = scoped_builder
            .client
            .request(
                scoped_subject(Endpoint::Stats, own),
                serde_json::to_vec(&serde_json::json!({"persona_id": other}))
                    .unwrap()
                    .into(),
            )
            .await
            .unwrap();
        assert_eq!(
            common::service_error_code(&smuggled),
            Some(400),
            "{user}: another persona in the body"
        );
    }

    // An administrator curates, erases, and works the dead letters and status from the CLI.
    let admin = RoleClient::connect(&nats, "admin", "admin-secret").await;
    admin
        .allowed(
            subject(Endpoint::Add),
            serde_json::json!({"persona_id": "ada", "name": "rain", "stance": "for",
                "opinion": "Rain on a window is the best sound."}),
        )
        .await;
    let purged = admin
        .allowed(
            subject(Endpoint::PurgeUser),
            serde_json::json!({"persona_id": "ada", "user_id": "bob", "pseudonym": "erased-1"}),
        )
        .await;
    assert_eq!(purged["stored_events"]["events_erased"], 1, "{purged}");
    let mut admin_config = config.clone();
    admin_config.nats.url = url("admin", "admin-secret");
    let letters = common::cli::run(&admin_config, &["dlq", "list", "--json"]).await;
    assert!(
        letters.status.success(),
        "{}",
        common::cli::stderr(&letters)
    );
    assert!(common::cli::stdout(&letters).contains("invalid_json"));
    let status = common::cli::run(&admin_config, &["status"]).await;
    assert!(status.status.success(), "{}", common::cli::stderr(&status));

    // Nobody was refused anything the role needs: the server logged no violation but the
    // ones asked for above (by the producer and the prompt builder).
    let _ = stop.send(true);
    services.stop().await;
    worker.await.unwrap().unwrap();
    let log = std::fs::read_to_string(nats.dir.join("server.log")).unwrap();
    let violations: Vec<&str> = log.lines().filter(|l| l.contains("Violation")).collect();
    for line in &violations {
        assert!(
            ["producer", "prompt_builder", "builder_ada", "builder_bob"]
                .iter()
                .any(|user| line.contains(&format!("/user:{user}\""))),
            "an unexpected refusal: {line}\n{log}"
        );
    }
    assert!(admin.errors().is_empty(), "{:?}", admin.errors());
}
