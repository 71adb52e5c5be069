//! How well "same opinion?" is decided: on the labelled pairs in `tests/data/opinion_pairs.jsonl`
//! (same opinion reworded / contradiction / different topic), each sentence goes through the
//! rules extractor and the local all-MiniLM-L6-v2 embedder, exactly as ingest does. The topic
//! key's similarity against `embed.local_match_threshold` decides "same topic", and the stance
//! then decides reinforce vs evolve. Prints the separation and the decision accuracy, beside
//! what whole-sentence embeddings (the seed's key) would give at the seed's 0.80.
#![cfg(feature = "local-embedder")]

use persona_prefs::config::Config;
use persona_prefs::embed::Embedder;
use persona_prefs::embed::local::LocalEmbedder;
use persona_prefs::extract::rules::RulesExtractor;
use serde::Deserialize;

#[derive(Deserialize)]
struct Pair {
    a: String,
    b: String,
    label: String,
}

const MIN_ACCURACY: f64 = 0.85;

fn cosine(a: &[f32], b: &[f32]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (*x as f64) * (*y as f64))
        .sum()
}

#[tokio::test]
async fn topic_key_and_threshold_separate_same_contradicting_and_different_opinions() {
    let config = {
        let mut config = Config::defaults();
        if let Ok(dir) = std::env::var("PERSONA_PREFS_MODEL_DIR") {
            config.embed.model_dir = dir;
        }
        config
    };
    let threshold = config.embed.local_match_threshold;
    let embedder = LocalEmbedder::load(std::path::Path::new(&config.embed.model_dir), 2000)
        .expect("model (scripts/services fetch)");
    let data = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/opinion_pairs.jsonl"
    ))
    .unwrap();
    let pairs: Vec<Pair> = data
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(pairs.len() >= 60);
    let rules = RulesExtractor::new(4);

    let mut correct = 0usize;
    let mut sentence_correct = 0usize;
    let mut by_label: std::collections::BTreeMap<String, Vec<f64>> = Default::default();
    let mut sentence_by_label: std::collections::BTreeMap<String, Vec<f64>> = Default::default();
    let mut wrong = Vec::new();
    for pair in &pairs {
        let a = rules.extract_text(&pair.a);
        let b = rules.extract_text(&pair.b);
        let (Some(a), Some(b)) = (a.first(), b.first()) else {
            wrong.push(format!(
                "{:?} / {:?}: the extractor did not read both",
                pair.a, pair.b
            ));
            continue;
        };
        let vectors = embedder
            .embed(&[
                a.name.clone(),
                b.name.clone(),
                pair.a.clone(),
                pair.b.clone(),
            ])
            .await
            .unwrap();
        let topic_similarity = cosine(&vectors[0], &vectors[1]);
        let sentence_similarity = cosine(&vectors[2], &vectors[3]);
        by_label
            .entry(pair.label.clone())
            .or_default()
            .push(topic_similarity);
        sentence_by_label
            .entry(pair.label.clone())
            .or_default()
            .push(sentence_similarity);
        let decided = match (topic_similarity >= threshold, a.stance == b.stance) {
            (false, _) => "different",
            (true, true) => "same",
            (true, false) => "contradiction",
        };
        // The seed matched whole sentences at 0.80 and compared no stance: a match is "same".
        let seed_decided = if sentence_similarity >= 0.80 {
            "same"
        } else {
            "different"
        };
        if decided == pair.label {
            correct += 1;
        } else {
            wrong.push(format!("{:?} / {:?}: topics {:?} / {:?} at {topic_similarity:.2} -> {decided}, labelled {}", pair.a, pair.b, a.name, b.name, pair.label));
        }
        if seed_decided == pair.label {
            sentence_correct += 1;
        }
    }
    let accuracy = correct as f64 / pairs.len() as f64;
    let range = |values: &Vec<f64>| {
        let min = values.iter().cloned().fold(f64::INFINITY, f64::min);
        let max = values.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        format!("{min:.2}..{max:.2}")
    };
    println!(
        "{} labelled pairs, local embedder, topic threshold {threshold}",
        pairs.len()
    );
    for (label, values) in &by_label {
        println!(
            "  {label:<14} topic similarity {}   whole-sentence {}",
            range(values),
            range(&sentence_by_label[label])
        );
    }
    println!("decision accuracy with topic key + stance: {accuracy:.3}");
    println!(
        "decision accuracy of the seed's whole-sentence 0.80 match (no stance): {:.3}",
        sentence_correct as f64 / pairs.len() as f64
    );
    for line in &wrong {
        println!("  wrong: {line}");
    }
    assert!(
        accuracy >= MIN_ACCURACY,
        "accuracy {accuracy:.3} < {MIN_ACCURACY}"
    );
}

/// The local model loaded two ways: the default and `other`, for comparing them.
fn default_and(other: persona_prefs::embed::local::LocalOptions) -> (LocalEmbedder, LocalEmbedder) {
    use persona_prefs::embed::local::LocalOptions;
    let mut config = Config::defaults();
    if let Ok(dir) = std::env::var("PERSONA_PREFS_MODEL_DIR") {
        config.embed.model_dir = dir;
    }
    let dir = std::path::Path::new(&config.embed.model_dir);
    (
        LocalEmbedder::load_with(dir, 2000, LocalOptions::default()).unwrap(),
        LocalEmbedder::load_with(dir, 2000, other).unwrap(),
    )
}

/// The lowest cosine between `a` and `b`, vector by vector.
fn worst_cosine(a: &[Vec<f32>], b: &[Vec<f32>]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(x, y)| cosine(x, y))
        .fold(1.0f64, f64::min)
}

/// The labelled opinion pairs of `tests/data/opinion_pairs.jsonl`.
fn labelled_pairs() -> Vec<Pair> {
    let text = std::fs::read_to_string("tests/data/opinion_pairs.jsonl").unwrap();
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The 8-bit network (`LocalOptions::quantised`, a speed lever `benches/models.rs` measures)
/// reads every labelled sentence as the full one does: each vector within cosine 0.98 of the full model's, and the same-topic decision
/// at the threshold the same on all but a few pairs.
#[tokio::test]
async fn the_eight_bit_model_embeds_as_the_full_one_does() {
    use persona_prefs::embed::local::LocalOptions;
    let config = Config::defaults();
    let (full, eight_bit) = default_and(LocalOptions {
        quantised: true,
        ..LocalOptions::default()
    });
    let pairs = labelled_pairs();
    let sentences: Vec<String> = pairs
        .iter()
        .flat_map(|p| [p.a.clone(), p.b.clone()])
        .collect();
    let a = full.embed(&sentences).await.unwrap();
    let b = eight_bit.embed(&sentences).await.unwrap();
    let worst = worst_cosine(&a, &b);
    println!(
        "{} sentences, worst cosine full vs 8-bit {worst:.4}",
        sentences.len()
    );
    assert!(worst >= 0.98, "worst cosine {worst}");
    let threshold = config.embed.local_match_threshold;
    let differing = (0..pairs.len())
        .filter(|i| {
            (cosine(&a[2 * i], &a[2 * i + 1]) >= threshold)
                != (cosine(&b[2 * i], &b[2 * i + 1]) >= threshold)
        })
        .count();
    println!(
        "same-topic decisions that differ: {differing} of {}",
        pairs.len()
    );
    assert!(
        differing * 50 <= pairs.len(),
        "{differing} of {}",
        pairs.len()
    );
}

/// The hand-written forward pass (the service's default) against candle's BERT on the same
/// weights: one text at a time at its own length against padded batches. They must agree to
/// float rounding, so every threshold tuned on candle's vectors holds, token states included
/// (the learned extractor reads those).
#[tokio::test]
async fn the_hand_written_pass_embeds_as_candle_does() {
    use persona_prefs::embed::local::LocalOptions;
    let (hand_written, candle) = default_and(LocalOptions {
        hand_written: false,
        ..LocalOptions::default()
    });
    let sentences: Vec<String> = labelled_pairs()
        .into_iter()
        .flat_map(|p| [p.a, p.b])
        .collect();
    let mut a = hand_written.embed(&sentences).await.unwrap();
    let mut b = candle.embed(&sentences).await.unwrap();
    // A long text too, on its own (candle would pad every sentence to it): past the 128
    // tokens short texts never reach.
    let long = vec!["I really do love a long walk by the sea in winter, ".repeat(12)];
    a.extend(hand_written.embed(&long).await.unwrap());
    b.extend(candle.embed(&long).await.unwrap());
    assert_eq!(a.len(), b.len());
    let worst = worst_cosine(&a, &b);
    println!(
        "{} sentences, worst cosine hand-written vs candle {worst:.7}",
        a.len()
    );
    assert!(worst >= 0.99999, "worst cosine {worst}");
    for vector in &a {
        let norm: f32 = vector.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-4, "norm {norm}");
    }

    let sentence = "Honestly, pineapple on pizza is a crime against food.";
    let (x, y) = (
        hand_written.token_states(sentence).unwrap(),
        candle.token_states(sentence).unwrap(),
    );
    assert_eq!(x.words, y.words);
    assert_eq!(x.first_token, y.first_token);
    assert_eq!(x.states.len(), y.states.len());
    for (s, t) in x.states.iter().zip(&y.states) {
        assert!(
            cosine(s, t) >= 0.99999,
            "token state cosine {}",
            cosine(s, t)
        );
    }
    assert!(cosine(&x.mean, &y.mean) >= 0.99999);
}

/// Search text (injection's and search's queries) goes through the 8-bit pass by default;
/// everything stored through the F32 one. The configured embedders must split that way: the
/// stored side's vectors are the F32 model's exactly, the query side's within cosine 0.99 of
/// them (and not the same: the 8-bit pass really runs), and a query ranks the labelled topics
/// as the F32 query does, nearest first, on all but a few sentences. With
/// `embed.query_precision = "f32"` both sides are one embedder.
#[tokio::test]
async fn queries_use_the_eight_bit_pass_and_what_is_stored_the_full_one() {
    use persona_prefs::embed::{QueryPrecision, from_config_sharing};
    let mut config = Config::defaults();
    if let Ok(dir) = std::env::var("PERSONA_PREFS_MODEL_DIR") {
        config.embed.model_dir = dir;
    }
    let embedders = from_config_sharing(&config.embed).unwrap();
    let reference =
        LocalEmbedder::load(std::path::Path::new(&config.embed.model_dir), 2000).unwrap();
    let pairs = labelled_pairs();
    let topics: Vec<String> = pairs.iter().map(|p| p.a.clone()).collect();
    let queries: Vec<String> = pairs.iter().map(|p| p.b.clone()).collect();

    let stored = embedders.exact.embed(&topics).await.unwrap();
    assert_eq!(stored, reference.embed(&topics).await.unwrap());
    let exact_queries = reference.embed(&queries).await.unwrap();
    let quantised_queries = embedders.queries.embed(&queries).await.unwrap();
    let worst = worst_cosine(&exact_queries, &quantised_queries);
    println!(
        "{} queries, worst cosine 8-bit vs F32 {worst:.5}",
        queries.len()
    );
    assert!(worst >= 0.99, "worst cosine {worst}");
    assert_ne!(exact_queries, quantised_queries, "the 8-bit pass ran");
    // The nearest stored topic of each query, by either query vector.
    let nearest = |query: &Vec<f32>| {
        (0..stored.len())
            .max_by(|&i, &j| cosine(query, &stored[i]).total_cmp(&cosine(query, &stored[j])))
            .unwrap()
    };
    let differing = exact_queries
        .iter()
        .zip(&quantised_queries)
        .filter(|(a, b)| nearest(a) != nearest(b))
        .count();
    println!("nearest topic differs for {differing} of {}", queries.len());
    assert!(
        differing * 25 <= queries.len(),
        "{differing} of {}",
        queries.len()
    );

    config.embed.query_precision = QueryPrecision::F32;
    let embedders = from_config_sharing(&config.embed).unwrap();
    assert_eq!(
        embedders.queries.embed(&queries).await.unwrap(),
        exact_queries
    );
}

/// Every 8-bit kernel this CPU has (AVX-512 VNNI, AVX2, the portable one) sums the same
/// integers (`tests/int8_products.rs`), so the query vectors do not depend on which ran: the
/// default (the fastest) gives each kernel's vectors bit for bit, one text and a batch.
#[tokio::test]
async fn the_eight_bit_pass_gives_the_same_vectors_whichever_kernel_runs_it() {
    use persona_prefs::embed::local::LocalOptions;
    use persona_prefs_int8::Kernel;
    let queries: Vec<String> = labelled_pairs().into_iter().map(|p| p.b).collect();
    let kernels = Kernel::available();
    println!("kernels on this CPU: {kernels:?}");
    for kernel in kernels {
        let (fastest, chosen) = default_and(LocalOptions {
            int8_kernel: Some(kernel),
            ..LocalOptions::default()
        });
        let (fastest, chosen) = (fastest.for_queries(), chosen.for_queries());
        for query in &queries[..10] {
            let query = std::slice::from_ref(query);
            assert_eq!(
                chosen.embed(query).await.unwrap(),
                fastest.embed(query).await.unwrap(),
                "{kernel:?}: {query:?}"
            );
        }
        assert_eq!(
            chosen.embed(&queries[..40]).await.unwrap(),
            fastest.embed(&queries[..40]).await.unwrap(),
            "{kernel:?}: a batch"
        );
    }
}

/// The 8-bit pass splits a text's tokens between two threads; each row's arithmetic is the
/// same whichever thread runs it, and a product's integers do not depend on how its rows are
/// blocked, so one thread gives the same query vectors bit for bit (a batch too, where rows
/// of several texts share a part).
#[tokio::test]
async fn the_eight_bit_pass_gives_the_same_vectors_on_one_thread_as_on_two() {
    use persona_prefs::embed::local::LocalOptions;
    let (two, one) = default_and(LocalOptions {
        threads: 1,
        ..LocalOptions::default()
    });
    let (two, one) = (two.for_queries(), one.for_queries());
    let queries: Vec<String> = labelled_pairs().into_iter().map(|p| p.b).collect();
    for query in &queries[..20] {
        let query = std::slice::from_ref(query);
        assert_eq!(
            one.embed(query).await.unwrap(),
            two.embed(query).await.unwrap(),
            "{query:?}"
        );
    }
    assert_eq!(
        one.embed(&queries).await.unwrap(),
        two.embed(&queries).await.unwrap()
    );
}

/// What is stored is embedded in batches, which are cut into a group of texts for each thread,
/// each group run through the whole pass on one thread; a lone text keeps its products split
/// between the threads. Each value is computed in the same order whichever way a text goes, so
/// a batch gives, bit for bit, what each of its texts gives alone, and what one thread gives.
#[tokio::test]
async fn the_full_pass_gives_the_same_vectors_in_a_batch_cut_between_threads_as_alone() {
    use persona_prefs::embed::local::LocalOptions;
    let (two, one) = default_and(LocalOptions {
        threads: 1,
        ..LocalOptions::default()
    });
    let topics: Vec<String> = labelled_pairs()
        .into_iter()
        .flat_map(|p| [p.a, p.b])
        .take(40)
        .collect();
    let batch = two.embed(&topics).await.unwrap();
    assert_eq!(batch, one.embed(&topics).await.unwrap(), "one thread");
    // A machine with more cores cuts a batch into more groups: still the same vectors.
    let (_, four) = default_and(LocalOptions {
        threads: 4,
        ..LocalOptions::default()
    });
    assert_eq!(batch, four.embed(&topics).await.unwrap(), "four threads");
    for (topic, vector) in topics.iter().zip(&batch) {
        let alone = two.embed(std::slice::from_ref(topic)).await.unwrap();
        assert_eq!(&alone[0], vector, "{topic:?} alone");
    }
}
