//! The `openai` embedder against a local server speaking the `/v1/embeddings` wire format.

mod common;

use common::fake_openai::{FakeOpenAi, Reply};
use persona_prefs::config::Config;
use persona_prefs::embed::openai::OpenAiEmbedder;
use persona_prefs::embed::{EmbedError, Embedder};
use serde_json::json;

fn embedder(fake: &FakeOpenAi, dims: usize) -> OpenAiEmbedder {
    let mut config = Config::defaults().embed.openai;
    config.base_url = fake.base_url.clone();
    config.dims = dims;
    config.timeout_ms = 500;
    config.max_retries = 2;
    OpenAiEmbedder::new(&config, 100).unwrap()
}

#[tokio::test]
async fn vectors_come_back_in_input_order_and_normalised() {
    let fake = FakeOpenAi::start().await;
    // Out of order on purpose: the index field decides.
    fake.script([Reply::ok(json!({"object": "list", "data": [
        {"object": "embedding", "index": 1, "embedding": [0.0, 2.0, 0.0]},
        {"object": "embedding", "index": 0, "embedding": [3.0, 0.0, 4.0]}
    ], "model": "m"}))]);
    let vectors = embedder(&fake, 3)
        .embed(&["first".into(), "second".into()])
        .await
        .unwrap();
    assert_eq!(vectors, vec![vec![0.6, 0.0, 0.8], vec![0.0, 1.0, 0.0]]);
    let request = &fake.received()[0];
    assert_eq!(request.path, "/v1/embeddings");
    assert_eq!(request.body["input"], json!(["first", "second"]));
}

#[tokio::test]
async fn failures_are_retried_and_classified() {
    let fake = FakeOpenAi::start().await;
    fake.script([
        Reply::status(503),
        Reply::ok(json!({"data": [{"index": 0, "embedding": [1.0, 0.0, 0.0]}]})),
    ]);
    assert_eq!(
        embedder(&fake, 3).embed(&["x".into()]).await.unwrap().len(),
        1,
        "a 503 is retried"
    );

    fake.script([Reply::ok(
        json!({"data": [{"index": 0, "embedding": [1.0, 0.0]}]}),
    )]);
    let error = embedder(&fake, 3).embed(&["x".into()]).await.unwrap_err();
    assert!(
        matches!(error, EmbedError::Rejected(_)) && error.to_string().contains("2 dimensions"),
        "{error}"
    );

    fake.script([Reply::status(401)]);
    assert!(
        !embedder(&fake, 3)
            .embed(&["x".into()])
            .await
            .unwrap_err()
            .is_retryable()
    );

    fake.script(std::iter::repeat_n(Reply::status(500), 3));
    assert!(
        embedder(&fake, 3)
            .embed(&["x".into()])
            .await
            .unwrap_err()
            .is_retryable(),
        "exhausted retries stay retryable"
    );
}
