//! Managed Redis and NATS usually require TLS, often with a private CA and client certificates.
//! Here the worker talks to both over mutual TLS with certificates made for the test: a real
//! NATS server with TLS on, and the test Redis behind a TLS front (the Redis build the project
//! installs has no TLS of its own). An event goes in and an injection comes out. Without the
//! CA, start-up fails and says why.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use common::{Cleanup, Running, free_port, test_config};
use persona_prefs::app::App;
use persona_prefs::config::Config;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use serde_json::{Value, json};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio_rustls::rustls::server::WebPkiClientVerifier;
use tokio_rustls::rustls::{RootCertStore, ServerConfig};

/// A CA, a server certificate for 127.0.0.1 and a client certificate, as DER and as PEM files.
struct Pki {
    dir: PathBuf,
    ca: CertificateDer<'static>,
    server_cert: CertificateDer<'static>,
    server_key: Vec<u8>,
}

impl Pki {
    fn create(label: &str) -> Pki {
        let dir = common::scratch_dir(label);
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "persona-prefs test CA");
        ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let ca_key = KeyPair::generate().unwrap();
        let ca = ca_params.self_signed(&ca_key).unwrap();
        let issuer = Issuer::new(ca_params, ca_key);
        let leaf = |names: Vec<String>, purpose: ExtendedKeyUsagePurpose| {
            let mut params = CertificateParams::new(names).unwrap();
            params.use_authority_key_identifier_extension = true;
            params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
            params.extended_key_usages = vec![purpose];
            let key = KeyPair::generate().unwrap();
            (params.signed_by(&key, &issuer).unwrap(), key)
        };
        let (server, server_key) = leaf(
            vec!["127.0.0.1".into(), "localhost".into()],
            ExtendedKeyUsagePurpose::ServerAuth,
        );
        let (client, client_key) = leaf(
            vec!["persona-prefs".into()],
            ExtendedKeyUsagePurpose::ClientAuth,
        );
        for (name, pem) in [
            ("ca.pem", ca.pem()),
            ("server.pem", server.pem()),
            ("server-key.pem", server_key.serialize_pem()),
            ("client.pem", client.pem()),
            ("client-key.pem", client_key.serialize_pem()),
        ] {
            std::fs::write(dir.join(name), pem).unwrap();
        }
        Pki {
            ca: ca.der().clone(),
            server_cert: server.der().clone(),
            server_key: server_key.serialize_der(),
            dir,
        }
    }

    fn file(&self, name: &str) -> String {
        self.dir.join(name).to_string_lossy().into_owned()
    }
}

impl Drop for Pki {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A NATS server with JetStream that accepts only TLS clients presenting a certificate signed
/// by the test CA.
struct TlsNats {
    process: Child,
    port: u16,
}

impl TlsNats {
    async fn start(pki: &Pki) -> TlsNats {
        let server = std::env::var("PERSONA_PREFS_NATS_SERVER")
            .expect("PERSONA_PREFS_NATS_SERVER unset: run through scripts/test");
        let port = free_port();
        let store_dir = pki.dir.join("jetstream");
        let process = Command::new(server)
            .args(["-a", "127.0.0.1", "-p", &port.to_string(), "-js", "-sd"])
            .arg(&store_dir)
            .args(["--tlsverify", "--tlscert"])
            .arg(pki.file("server.pem"))
            .arg("--tlskey")
            .arg(pki.file("server-key.pem"))
            .arg("--tlscacert")
            .arg(pki.file("ca.pem"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        wait_for_port(port).await;
        TlsNats { process, port }
    }
}

impl Drop for TlsNats {
    fn drop(&mut self) {
        let _ = self.process.kill();
        let _ = self.process.wait();
    }
}

async fn wait_for_port(port: u16) {
    for _ in 0..100 {
        if TcpStream::connect(("127.0.0.1", port)).await.is_ok() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("nothing listens on {port}");
}

/// A mutual-TLS front for the test Redis: the client speaks TLS to it, it speaks plain RESP to
/// the real server.
async fn tls_front_for_redis(pki: &Pki, redis_url: &str) -> u16 {
    let upstream = redis_url
        .trim_start_matches("redis://")
        .split('/')
        .next()
        .unwrap()
        .rsplit('@')
        .next()
        .unwrap()
        .to_string();
    let mut roots = RootCertStore::empty();
    roots.add(pki.ca.clone()).unwrap();
    let verifier = WebPkiClientVerifier::builder(Arc::new(roots))
        .build()
        .unwrap();
    let config = ServerConfig::builder()
        .with_client_cert_verifier(verifier)
        .with_single_cert(
            vec![pki.server_cert.clone()],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(pki.server_key.clone())),
        )
        .unwrap();
    let acceptor = TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            let upstream = upstream.clone();
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(socket).await else {
                    return;
                };
                let Ok(mut plain) = TcpStream::connect(upstream).await else {
                    return;
                };
                let _ = tokio::io::copy_bidirectional(&mut tls, &mut plain).await;
            });
        }
    });
    port
}

fn tls_config(base: &Config, pki: &Pki, redis_port: u16, nats_port: u16) -> Config {
    let mut config = base.clone();
    config.redis.url = format!("rediss://127.0.0.1:{redis_port}");
    config.redis.tls_ca_file = pki.file("ca.pem");
    config.redis.tls_client_cert_file = pki.file("client.pem");
    config.redis.tls_client_key_file = pki.file("client-key.pem");
    config.nats.url = format!("tls://127.0.0.1:{nats_port}");
    config.nats.tls_ca_file = pki.file("ca.pem");
    config.nats.tls_client_cert_file = pki.file("client.pem");
    config.nats.tls_client_key_file = pki.file("client-key.pem");
    config
}

#[tokio::test(flavor = "multi_thread")]
async fn the_worker_ingests_and_serves_over_mutual_tls_to_redis_and_nats() {
    let pki = Pki::create("tls");
    let plain = test_config("tls");
    let _cleanup = Cleanup(plain.clone());
    let nats = TlsNats::start(&pki).await;
    let redis_port = tls_front_for_redis(&pki, &plain.redis.url).await;
    let config = tls_config(&plain, &pki, redis_port, nats.port);
    config.validate().unwrap();

    let running = Running::worker_and_service(config.clone()).await;
    let app = &running.app;

    let event = json!({"event_id": "tls-1", "persona_id": "ada", "platform": "p", "channel_id": "c",
        "messages": [{"message_id": "m1", "role": "persona", "content": "I love green tea.",
                      "timestamp": "2026-11-20T08:00:00Z"}]});
    running.publish_event(&event).await;
    running.drain().await;
    let stored = common::active_preferences(&app.store, "ada").await;
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0].name, "green tea");

    let client = persona_prefs::app::connect_nats(&config).await.unwrap();
    let reply = client
        .request(
            persona_prefs::serve::Endpoint::Inject.subject(
                &config.serve.subject_prefix,
                &config.serve.tenant,
                "ada",
            ),
            serde_json::to_vec(&json!({"persona_id": "ada", "query": "green tea"}))
                .unwrap()
                .into(),
        )
        .await
        .unwrap();
    let body: Value = serde_json::from_slice(&reply.payload).unwrap();
    assert_eq!(body["preferences"][0]["name"], "green tea", "{body}");
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn without_the_ca_the_worker_refuses_the_servers_and_says_so() {
    let pki = Pki::create("tlsca");
    let plain = test_config("tlsca");
    let _cleanup = Cleanup(plain.clone());
    let nats = TlsNats::start(&pki).await;
    let redis_port = tls_front_for_redis(&pki, &plain.redis.url).await;
    let trusted = tls_config(&plain, &pki, redis_port, nats.port);

    // Redis: the system roots do not know the test CA.
    let mut config = trusted.clone();
    config.redis.tls_ca_file = String::new();
    let error = App::start(config).await.err().expect("must not start");
    assert!(
        error.to_string().to_lowercase().contains("certificate"),
        "{error}"
    );

    // NATS, with Redis trusted: the same.
    let mut config = trusted.clone();
    config.nats.tls_ca_file = String::new();
    config.nats.connect_timeout_ms = 2000;
    let error = App::start(config).await.err().expect("must not start");
    assert!(
        error.to_string().contains("tls://127.0.0.1"),
        "the error names the server: {error}"
    );

    // A password in the URL never reaches the error.
    let mut config = trusted;
    config.nats.url = format!("tls://admin:hunter2@127.0.0.1:{}", free_port());
    config.nats.connect_timeout_ms = 500;
    let error = App::start(config).await.err().expect("must not start");
    assert!(!error.to_string().contains("hunter2"), "{error}");
    assert!(error.to_string().contains("***@127.0.0.1"), "{error}");
}

#[test]
fn tls_files_are_checked_at_start_up_with_the_key_named() {
    let pki = Pki::create("tlsconfig");
    let mut config = Config::defaults();
    config.redis.tls_ca_file = pki.file("ca.pem");
    let error = config.validate().unwrap_err().to_string();
    assert!(
        error.contains("redis.url"),
        "TLS files need rediss://: {error}"
    );

    config.redis.url = "rediss://127.0.0.1:6380".into();
    config.validate().unwrap();
    config.redis.tls_client_cert_file = pki.file("client.pem");
    let error = config.validate().unwrap_err().to_string();
    assert!(error.contains("redis.tls_client_key_file"), "{error}");

    let mut config = Config::defaults();
    config.nats.tls_ca_file = Path::new(&pki.file("missing.pem"))
        .to_string_lossy()
        .into_owned();
    let error = config.validate().unwrap_err().to_string();
    assert!(error.contains("nats.tls_ca_file"), "{error}");
}
