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
