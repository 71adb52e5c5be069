//! Which quantisation the personas' vector sets use, chosen by measurement: recall@5 and
//! recall@16 of `VSIM` against exact brute-force cosine search, and memory per vector, on
//! real all-MiniLM-L6-v2 embeddings of every text and topic of the labelled sets in
//! `tests/data/`. Prints the table (`scripts/test -E 'test(quantisation)' --no-capture`); the
//! floors guard the default (q8) against regressions.

mod common;

use std::collections::BTreeSet;

use common::{Cleanup, test_config};
use persona_prefs::store::query::vector_to_bytes;

/// Every distinct text of the labelled sets: utterances, their topics, opinion pairs,
/// injection preferences and queries.
fn corpus() -> Vec<String> {
    let data = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let mut texts = BTreeSet::new();
    for file in ["rules_extraction.jsonl", "rules_extraction_heldout.jsonl"] {
        for line in std::fs::read_to_string(data.join(file)).unwrap().lines() {
            let value: serde_json::Value = serde_json::from_str(line).unwrap();
            texts.insert(value["text"].as_str().unwrap().to_string());
            for opinion in value["opinions"].as_array().into_iter().flatten() {
                if let Some(topic) = opinion["topic"].as_str() {
                    texts.insert(topic.to_string());
                }
            }
        }
    }
    for line in std::fs::read_to_string(data.join("opinion_pairs.jsonl"))
        .unwrap()
        .lines()
    {
        let value: serde_json::Value = serde_json::from_str(line).unwrap();
        texts.insert(value["a"].as_str().unwrap().to_string());
        texts.insert(value["b"].as_str().unwrap().to_string());
    }
    let injection: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(data.join("injection_relevance.json")).unwrap(),
    )
    .unwrap();
    for preference in injection["preferences"].as_array().unwrap() {
        texts.insert(preference["name"].as_str().unwrap().to_string());
        texts.insert(preference["opinion"].as_str().unwrap().to_string());
    }
    for query in injection["queries"].as_array().unwrap() {
        texts.insert(query["query"].as_str().unwrap().to_string());
    }
    texts.into_iter().filter(|t| !t.trim().is_empty()).collect()
}

/// The embedder's vectors are unit length, so the dot product is the cosine.
fn cosine(a: &[f32], b: &[f32]) -> f64 {
    a.iter().zip(b).map(|(x, y)| f64::from(x * y)).sum()
}

/// The ids of the `k` nearest by exact cosine, the query itself excluded.
fn exact_top(vectors: &[Vec<f32>], query: usize, k: usize) -> Vec<usize> {
    let mut scored: Vec<(usize, f64)> = vectors
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != query)
        .map(|(i, v)| (i, cosine(&vectors[query], v)))
        .collect();
    scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    scored.into_iter().take(k).map(|(i, _)| i).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn vector_set_quantisation_recall_and_memory() {
    let config = test_config("quantisation");
    let _cleanup = Cleanup(config.clone());
    let texts = corpus();
    assert!(texts.len() >= 400, "{} texts", texts.len());
    let embedder = persona_prefs::embed::from_config(&config.embed).unwrap();
    let mut vectors = Vec::new();
    for chunk in texts.chunks(32) {
        vectors.extend(embedder.embed(chunk).await.unwrap());
    }
    let store = persona_prefs::store::PreferenceStore::connect(&config.redis, &config.store)
        .await
        .unwrap();
    let mut connection = store.connection();

    println!(
        "\n{} texts of tests/data, all-MiniLM-L6-v2, every text a query (itself excluded)",
        texts.len()
    );
    println!(
        "{:<8} {:>10} {:>10} {:>16}",
        "quant", "recall@5", "recall@16", "bytes/vector"
    );
    // Exact neighbours once: the 16 nearest of every query (the first 5 are its top 5).
    let exact: Vec<Vec<usize>> = (0..vectors.len())
        .map(|query| exact_top(&vectors, query, 16))
        .collect();
    let mut recall_by = Vec::new();
    for (label, option) in [("fp32", "NOQUANT"), ("q8", "Q8"), ("bin", "BIN")] {
        let key = format!("{}:quantisation:{{{label}}}", config.redis.key_prefix);
        for (i, vector) in vectors.iter().enumerate() {
            let _: bool = redis::cmd("VADD")
                .arg(&key)
                .arg("FP32")
                .arg(vector_to_bytes(vector))
                .arg(i.to_string())
                .arg(option)
                .query_async(&mut connection)
                .await
                .unwrap();
        }
        let mut recall = [0.0f64; 2];
        for (slot, k) in [5usize, 16].into_iter().enumerate() {
            let mut found = 0usize;
            for query in 0..vectors.len() {
                let exact: BTreeSet<usize> = exact[query].iter().copied().take(k).collect();
                // One more than k: the query's own element comes back first.
                let ids: Vec<String> = redis::cmd("VSIM")
                    .arg(&key)
                    .arg("FP32")
                    .arg(vector_to_bytes(&vectors[query]))
                    .arg("COUNT")
                    .arg(k + 1)
                    .query_async(&mut connection)
                    .await
                    .unwrap();
                let approximate: BTreeSet<usize> = ids
                    .iter()
                    .map(|id| id.parse::<usize>().unwrap())
                    .filter(|&id| id != query)
                    .take(k)
                    .collect();
                found += exact.intersection(&approximate).count();
            }
            recall[slot] = found as f64 / (k * vectors.len()) as f64;
        }
        let bytes: u64 = redis::cmd("MEMORY")
            .arg("USAGE")
            .arg(&key)
            .query_async(&mut connection)
            .await
            .unwrap();
        println!(
            "{label:<8} {:>10.3} {:>10.3} {:>16.0}",
            recall[0],
            recall[1],
            bytes as f64 / vectors.len() as f64
        );
        recall_by.push((label, recall, bytes));
    }
    let (_, fp32, fp32_bytes) = recall_by[0];
    let (_, q8, q8_bytes) = recall_by[1];
    let (_, bin, _) = recall_by[2];
    // The default (q8) must stay within a point or two of full precision, at well under its
    // memory; bin is measured to show why it is not the default.
    assert!(fp32[1] >= 0.97, "fp32 recall@16 {}", fp32[1]);
    assert!(
        q8[0] >= fp32[0] - 0.03,
        "q8 recall@5 {} vs fp32 {}",
        q8[0],
        fp32[0]
    );
    assert!(
        q8[1] >= fp32[1] - 0.03,
        "q8 recall@16 {} vs fp32 {}",
        q8[1],
        fp32[1]
    );
    assert!(
        q8_bytes * 10 < fp32_bytes * 7,
        "q8 {q8_bytes} bytes vs fp32 {fp32_bytes}"
    );
    assert!(bin[1] < q8[1], "bin recall@16 {} vs q8 {}", bin[1], q8[1]);
}
