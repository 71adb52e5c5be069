//! The learned extractor (`extract/learned`): the shipped head over the shipped MiniLM, on its
//! own, after the rules, and as the gate in front of an LLM. What it must keep doing, measured
//! on the part of the tuning sets its training kept apart (its development sixth), never on a
//! held-out set.

mod common;

use std::sync::Arc;

use common::fake_openai::{FakeOpenAi, Reply};
use persona_prefs::config::Config;
use persona_prefs::embed::local::LocalEmbedder;
use persona_prefs::extract::evaluate::{SHIPPED_SETS, evaluate, parse_labelled};
use persona_prefs::extract::learned::{Head, LearnedExtractor, RulesThenLearned, training};
use persona_prefs::extract::rules::RulesExtractor;
use persona_prefs::extract::{ExtractionInput, Extractor, ExtractorKind};
use serde_json::json;

fn model() -> Arc<LocalEmbedder> {
    let dir = std::env::var("PERSONA_PREFS_MODEL_DIR").expect(
        "PERSONA_PREFS_MODEL_DIR is not set: run the tests with scripts/test, which fetches the model",
    );
    Arc::new(LocalEmbedder::load(std::path::Path::new(&dir), 2000).unwrap())
}

fn input(message: &str) -> ExtractionInput<'_> {
    ExtractionInput {
        persona_message: message,
        context: Vec::new(),
        participants: &[],
    }
}

/// On the development sixth of the tuning sets (1 345 utterances, 220 opinions since the third
/// people's-chat sample joined them), which its training did not fit: the learned extractor
/// alone measured precision 0.845, recall 0.432 since it skips questions and views reported
/// (0.832 / 0.436 before that; 0.711 / 0.268 reading each word's own state alone; on the 822
/// before that sample: 0.746 / 0.329; on the 480 before the second: 0.62 / 0.39); the rules then the learned extractor where they find
/// nothing raise the rules' recall there (0.927 / 0.645 to 0.863 / 0.700). Floors under those
/// measurements.
#[tokio::test(flavor = "multi_thread")]
async fn on_utterances_its_training_kept_apart_it_adds_recall_to_the_rules() {
    let mut development = Vec::new();
    for (name, text) in SHIPPED_SETS {
        if name.contains("held-out") {
            continue;
        }
        development.extend(
            parse_labelled(text)
                .unwrap()
                .into_iter()
                .filter(|row| training::in_development(&row.text)),
        );
    }
    assert!(development.len() > 400, "{}", development.len());
    let model = model();
    let learned = LearnedExtractor::new(model.clone(), 8).unwrap();
    let alone = evaluate(&learned, &development, 2).await.unwrap();
    println!(
        "learned alone: precision {:.3} ({}/{}), recall {:.3} ({}/{})",
        alone.precision, alone.matched, alone.found, alone.recall, alone.recalled, alone.expected
    );
    assert!(alone.precision >= 0.75, "{}", alone.precision);
    assert!(alone.recall >= 0.38, "{}", alone.recall);

    let rules = evaluate(&RulesExtractor::new(8), &development, 2)
        .await
        .unwrap();
    let combined = RulesThenLearned {
        rules: RulesExtractor::new(8),
        learned: LearnedExtractor::new(model, 8).unwrap(),
    };
    let both = evaluate(&combined, &development, 2).await.unwrap();
    println!(
        "rules: {:.3} / {:.3}; rules then learned: {:.3} / {:.3}",
        rules.precision, rules.recall, both.precision, both.recall
    );
    assert!(
        both.recall >= rules.recall + 0.03,
        "the learned extractor adds recall where the rules find nothing"
    );
}

/// What it reads in a plain opinion: the topic's words, the stance, the sentence as evidence.
#[tokio::test(flavor = "multi_thread")]
async fn it_reads_a_plain_opinion() {
    let learned = LearnedExtractor::new(model(), 8).unwrap();
    let message = "Honestly, I absolutely love green tea.";
    let found = learned.extract(&input(message)).await.unwrap();
    assert!(
        found.iter().any(|o| o.name.contains("green tea")
            && o.stance == persona_prefs::store::Stance::For
            && persona_prefs::extract::evidence_in_message(&o.evidence, message)),
        "{found:?}"
    );
    let reading = learned.read("What time is it over there?").await.unwrap();
    assert!(
        reading.sentence_score < 0.5,
        "a question holds no opinion: {}",
        reading.sentence_score
    );
}

/// A span the head reads in a question, or in a view someone else holds, is not the persona's
/// view: the labels hold none there, and the extractor leaves it out where the head alone would
/// have kept it. The same words as a statement are kept.
#[tokio::test(flavor = "multi_thread")]
async fn it_finds_no_view_in_a_question_or_a_view_reported() {
    let head = Head::shipped(persona_prefs::embed::LOCAL_DIMS).unwrap();
    let learned = LearnedExtractor::new(model(), 8).unwrap();
    for message in [
        "Are you sick of super hero movies or something?",
        "Everyone tells me the new museum is stunning.",
    ] {
        let reading = learned.read(message).await.unwrap();
        assert!(
            reading.sentence_score >= head.min_sentence_score
                && reading
                    .spans
                    .iter()
                    .any(|span| span.confidence >= head.min_confidence),
            "the head alone reads a view in {message:?}: {reading:?}"
        );
        let found = learned.extract(&input(message)).await.unwrap();
        assert!(found.is_empty(), "{message:?}: {found:?}");
    }
    let found = learned
        .extract(&input("I'm so sick of super hero movies."))
        .await
        .unwrap();
    assert!(
        found.iter().any(|o| o.name.contains("super hero movies")),
        "{found:?}"
    );
}

/// The gate in front of the LLM (`extract.llm.gate_min_score`, on by default with the local
/// model): a message the rules read nothing in and the sentence score rates low is not sent;
/// one with an opinion is.
#[tokio::test(flavor = "multi_thread")]
async fn the_gate_keeps_messages_without_an_opinion_from_the_model() {
    let fake = FakeOpenAi::start().await;
    fake.respond_with(|_, _| Reply::opinions(json!([])));
    let mut config = Config::defaults();
    config.extract.kind = ExtractorKind::Llm;
    config.extract.llm.base_url = fake.base_url.clone();
    config.embed.model_dir = std::env::var("PERSONA_PREFS_MODEL_DIR").unwrap();
    assert!(config.extract.llm.gate_min_score > 0.0, "on by default");
    let local = persona_prefs::embed::from_config_sharing(&config.embed)
        .unwrap()
        .local;
    let extractor =
        persona_prefs::extract::from_config(&config.extract, &config.store.categories, local)
            .unwrap();
    extractor
        .extract(&input("ok see you tomorrow at ten"))
        .await
        .unwrap();
    assert_eq!(fake.received().len(), 0, "kept from the model");
    extractor
        .extract(&input("I adore thunderstorms."))
        .await
        .unwrap();
    assert_eq!(fake.received().len(), 1, "an opinion goes to the model");

    config.extract.llm.gate_min_score = 0.0;
    let local = persona_prefs::embed::from_config_sharing(&config.embed)
        .unwrap()
        .local;
    let ungated =
        persona_prefs::extract::from_config(&config.extract, &config.store.categories, local)
            .unwrap();
    ungated
        .extract(&input("ok see you tomorrow at ten"))
        .await
        .unwrap();
    assert_eq!(fake.received().len(), 2, "0 sends every message");
}

/// The training experiment's copy of the last layer (`learned::adapted`), with its low-rank
/// additions at rest, is the model's own last layer: the states after five layers, through
/// it, are the states after six (within f32 rounding of two implementations).
#[test]
fn the_adapted_layer_at_rest_is_the_models_last_layer() {
    use candle_nn::{VarBuilder, VarMap};
    use persona_prefs::extract::learned::adapted;
    let model = model();
    let dir = std::env::var("PERSONA_PREFS_MODEL_DIR").unwrap();
    let varmap = VarMap::new();
    let vb = VarBuilder::from_varmap(&varmap, candle_core::DType::F32, &candle_core::Device::Cpu);
    let layer = adapted::load(std::path::Path::new(&dir), vb).unwrap();
    for var in varmap.all_vars() {
        var.set(&var.as_tensor().zeros_like().unwrap()).unwrap();
    }
    for text in ["I love hiking, but crowds wear me out.", "ok"] {
        let before = model
            .token_states_through(text, adapted::ADAPTED_LAYER)
            .unwrap();
        let through = adapted::adapted_states(&layer, &before).unwrap();
        let whole = model.token_states(text).unwrap();
        assert_eq!(through.states.len(), whole.states.len());
        let largest = largest_difference(&through.states, &whole.states);
        assert!(largest < 1e-3, "{text}: states differ by up to {largest}");
        assert_ne!(before.states, whole.states, "five layers are not six");
    }
    // And the additions are live: once trained away from zero, the layer reads otherwise.
    for var in varmap.all_vars() {
        var.set(&(var.as_tensor().ones_like().unwrap() * 0.05).unwrap())
            .unwrap();
    }
    let text = "I love hiking.";
    let before = model
        .token_states_through(text, adapted::ADAPTED_LAYER)
        .unwrap();
    let moved = adapted::adapted_states(&layer, &before).unwrap();
    let whole = model.token_states(text).unwrap();
    let largest = largest_difference(&moved.states, &whole.states);
    assert!(largest > 0.01, "the additions changed nothing ({largest})");
}

/// The largest difference between two texts' token states, value by value.
fn largest_difference(a: &[Vec<f32>], b: &[Vec<f32>]) -> f32 {
    a.iter()
        .flatten()
        .zip(b.iter().flatten())
        .map(|(a, b)| (a - b).abs())
        .fold(0f32, f32::max)
}
