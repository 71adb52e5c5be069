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

/// Texts embedded recently are answered from memory, and a text repeated within one call is
/// sent once: the paid API sees each topic once while it stays in the cache.
#[tokio::test]
async fn repeated_texts_are_embedded_once() {
    let fake = FakeOpenAi::start().await;
    fake.respond_with(|_, body| {
        // A vector that names its text: [length, 1, 0], normalised by the embedder.
        let data: Vec<serde_json::Value> = body["input"]
            .as_array()
            .unwrap()
            .iter()
            .enumerate()
            .map(|(index, text)| {
                let length = text.as_str().unwrap().len() as f64;
                json!({"index": index, "embedding": [length, 1.0, 0.0]})
            })
            .collect();
        Reply::ok(json!({"data": data}))
    });
    let mut config = Config::defaults().embed;
    config.kind = persona_prefs::embed::EmbedderKind::Openai;
    config.openai.base_url = fake.base_url.clone();
    config.openai.dims = 3;
    config.cache_size = 8;
    let embedder = persona_prefs::embed::from_config(&config).unwrap();

    let texts = |list: &[&str]| list.iter().map(|t| t.to_string()).collect::<Vec<_>>();
    let first = embedder
        .embed(&texts(&["tea", "jazz", "tea"]))
        .await
        .unwrap();
    assert_eq!(first[0], first[2]);
    assert_ne!(first[0], first[1]);
    let second = embedder.embed(&texts(&["jazz", "owls"])).await.unwrap();
    assert_eq!(second[0], first[1], "from the cache");
    let sent: Vec<serde_json::Value> = fake
        .received()
        .iter()
        .map(|request| request.body["input"].clone())
        .collect();
    assert_eq!(sent, vec![json!(["tea", "jazz"]), json!(["owls"])]);

    // With the cache off, every call reaches the API.
    config.cache_size = 0;
    let uncached = persona_prefs::embed::from_config(&config).unwrap();
    uncached.embed(&texts(&["tea"])).await.unwrap();
    uncached.embed(&texts(&["tea"])).await.unwrap();
    assert_eq!(fake.received().len(), 4);
}
