//! NATS servers that authenticate users by NKey: the worker connects with the seed file named
//! in `nats.nkey_seed_file`, and without it is refused with the server's reason.

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
        let binary = std::env::var("PERSONA_PREFS_NATS_SERVER")
            .expect("PERSONA_PREFS_NATS_SERVER unset: run through scripts/test");
        let dir = common::scratch_dir("nkeynats");
        let port = common::free_port();
        let config = dir.join("server.conf");
        std::fs::write(
            &config,
            format!(
                "listen: 127.0.0.1:{port}\njetstream {{ store_dir: \"{}\" }}\nauthorization {{ users = [ {{ nkey: {user_public_key} }} ] }}\n",
                dir.join("js").display()
            ),
        )
        .unwrap();
        let process = Command::new(binary)
            .arg("-c")
            .arg(&config)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        while tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_err()
        {
            assert!(Instant::now() < deadline, "nats-server did not start");
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
