//! The learned extractor (`extract/learned`): the shipped reader over the shipped MiniLM, on
//! its own, after the rules, and as the gate in front of an LLM. What it must keep doing, measured
//! on the part of the tuning sets its training kept apart (its development sixth), never on a
//! held-out set.

mod common;

use std::sync::Arc;

use common::fake_openai::{FakeOpenAi, Reply};
use persona_prefs::config::Config;
use persona_prefs::embed::local::LocalEmbedder;
use persona_prefs::extract::evaluate::{SHIPPED_SETS, evaluate, parse_labelled};
use persona_prefs::extract::learned::{CheckedRules, Head, LearnedExtractor, RulesThenLearned};
use persona_prefs::extract::rules::RulesExtractor;
use persona_prefs::extract::{ExtractionInput, Extractor, ExtractorKind};
use serde_json::json;

fn model() -> Arc<LocalEmbedder> {
    let dir = std::env::var("PERSONA_PREFS_MODEL_DIR").expect(
        "PERSONA_PREFS_MODEL_DIR is not set: run the tests with scripts/test, which fetches the model",
    );
    Arc::new(LocalEmbedder::load(std::path::Path::new(&dir), 2000).unwrap())
}

/// The embedder's model as the service loads it by default: with its 8-bit weights for
/// search queries (`embed.query_precision = "int8"`).
fn model_with_eight_bit_queries() -> Arc<LocalEmbedder> {
    let dir = std::env::var("PERSONA_PREFS_MODEL_DIR").expect("PERSONA_PREFS_MODEL_DIR");
    let options = persona_prefs::embed::local::LocalOptions {
        int8_queries: true,
        ..Default::default()
    };
    Arc::new(LocalEmbedder::load_with(std::path::Path::new(&dir), 2000, options).unwrap())
}

fn input(message: &str) -> ExtractionInput<'_> {
    ExtractionInput {
        persona_message: message,
        context: Vec::new(),
        participants: &[],
    }
}

/// A quarter of the development set (every fourth of its 8 000 people's-chat messages), which
/// no reader trains on: what the shipped reader (additions to every layer) reads alone, and
/// after the rules checked by it at the shipped 0.08, at the pair it stores for after the
/// rules. Measured: alone 0.777 (150/193) / 0.631 (149/236); rules 0.870
/// (120/138) / 0.504, rules checked then learned 0.892 (148/166) / 0.623 (147/236). Floors under those measurements.
#[tokio::test(flavor = "multi_thread")]
async fn on_chat_no_reader_trained_on_it_adds_recall_to_the_checked_rules() {
    let development = development_quarter();
    assert!(development.len() > 1900, "{}", development.len());
    let model = model();
    let learned = LearnedExtractor::new(model.clone(), 8).unwrap();
    let alone = evaluate(&learned, &development, 2).await.unwrap();
    println!(
        "learned alone: precision {:.3} ({}/{}), recall {:.3} ({}/{})",
        alone.precision, alone.matched, alone.found, alone.recall, alone.recalled, alone.expected
    );
    assert!(alone.precision >= 0.70, "{}", alone.precision);
    assert!(alone.recall >= 0.55, "{}", alone.recall);

    let rules = evaluate(&RulesExtractor::new(8), &development, 2)
        .await
        .unwrap();
    let combined = checked_then_learned(model.clone(), None);
    let both = evaluate(&combined, &development, 2).await.unwrap();
    println!(
        "rules: {}; rules checked then learned: {}",
        figures(&rules),
        figures(&both)
    );
    assert!(
        both.recall >= rules.recall + 0.08,
        "the learned extractor adds recall where the checked rules find nothing"
    );
    assert!(
        both.precision >= rules.precision - 0.02,
        "after the checked rules it reads at a pair that keeps about their precision"
    );

    // The reader's finds beside the rules' where they find something (the shipped 0.85):
    // on the whole development set 0.824 / 0.574 -> 0.819 / 0.584; on this quarter 0.888
    // (151/170) / 0.636 (150/236).
    let beside = checked_then_learned(model, Some(0.85));
    let with_beside = evaluate(&beside, &development, 2).await.unwrap();
    println!(
        "the reader's finds beside the rules' at 0.85: {}",
        figures(&with_beside)
    );
    assert!(
        with_beside.recalled >= both.recalled,
        "finds kept beside the rules' only add"
    );
    assert!(
        with_beside.precision >= both.precision - 0.02,
        "at 0.85 they keep about the combination's precision"
    );
}

/// Beside the rules, the rules' findings come first and whole, and the reader adds only
/// topics they did not name: on every message of the development quarter with findings.
#[tokio::test(flavor = "multi_thread")]
async fn the_readers_finds_beside_the_rules_follow_the_rules_findings_whole() {
    let model = model();
    let checked = CheckedRules::new(
        RulesExtractor::new(8),
        LearnedExtractor::after_rules(model.clone(), 8).unwrap(),
        0.08,
    );
    let beside = checked_then_learned(model, Some(0.5));
    let (mut ruled_messages, mut added) = (0, 0);
    for row in &development_quarter() {
        let message = input(&row.text);
        let ruled = checked.extract(&message).await.unwrap();
        if ruled.is_empty() {
            continue;
        }
        ruled_messages += 1;
        let both = beside.extract(&message).await.unwrap();
        assert_eq!(both[..ruled.len()], ruled[..], "{}", row.text);
        for extra in &both[ruled.len()..] {
            added += 1;
            assert!(
                !ruled
                    .iter()
                    .any(|r| persona_prefs::extract::evaluate::same_topic(&r.name, &extra.name)),
                "{} beside {ruled:?}: {}",
                extra.name,
                row.text
            );
        }
    }
    println!("{ruled_messages} messages with the rules' findings, {added} finds added beside");
    assert!(ruled_messages > 40, "{ruled_messages}");
    assert!(added > 0, "at 0.5 the reader reads a second view somewhere");
}

/// The rules checked by the shipped reader at the shipped 0.08, then the reader where they find
/// nothing, its finds kept beside theirs at `beside_rules` when given.
fn checked_then_learned(model: Arc<LocalEmbedder>, beside_rules: Option<f32>) -> RulesThenLearned {
    RulesThenLearned {
        rules: CheckedRules::new(
            RulesExtractor::new(8),
            LearnedExtractor::after_rules(model, 8).unwrap(),
            0.08,
        ),
        beside_rules,
        word_gate: None,
    }
}

/// A score as precision (right/found) / recall (recalled/labelled).
fn figures(score: &persona_prefs::extract::evaluate::Score) -> String {
    format!(
        "{:.3} ({}/{}) / {:.3} ({}/{})",
        score.precision, score.matched, score.found, score.recall, score.recalled, score.expected
    )
}

/// Every fourth message of the development set: people's chat no reader trains on.
fn development_quarter() -> Vec<persona_prefs::extract::evaluate::Labelled> {
    let (_, text) = persona_prefs::extract::evaluate::DEVELOPMENT_SET;
    parse_labelled(text)
        .unwrap()
        .into_iter()
        .step_by(4)
        .collect()
}

/// The check on the rules (`extract.rules_min_sentence_score`), measured on a quarter of the
/// development set, which no reader trains on: at 0.08 (chosen with the earlier reader on the
/// fourth chat tuning set, the highest value that cost at most 0.02 of recall there) the rules'
/// findings read precision 0.938 (120/128) against 0.870
/// (120/138) unchecked, recall 0.504 both. Floors: precision up by at
/// least 0.03, recall down by at most 0.03; a plain view passes, a remark of the moment does
/// not, and each finding is judged by its own sentence, not by the message around it.
#[tokio::test(flavor = "multi_thread")]
async fn checked_rules_trade_a_little_recall_for_precision_on_chat_the_reader_never_saw() {
    let rows = development_quarter();
    let checked = CheckedRules::new(
        RulesExtractor::new(8),
        LearnedExtractor::new(model(), 8).unwrap(),
        0.08,
    );
    let rules = evaluate(&RulesExtractor::new(8), &rows, 2).await.unwrap();
    let both = evaluate(&checked, &rows, 2).await.unwrap();
    println!("rules: {}; checked: {}", figures(&rules), figures(&both));
    assert!(both.precision >= rules.precision + 0.03);
    assert!(both.recall >= rules.recall - 0.03);

    let kept = checked
        .extract(&input("I love green tea, it's so calming."))
        .await
        .unwrap();
    assert_eq!(kept.len(), 1, "{kept:?}");
    assert_eq!(kept[0].name, "green tea");
    // Two of what it exists for, from the set: the rules read an answer to an unseen question
    // and a "same for me" as views of their own; the message's score says neither is one.
    for text in ["Writing the code, yes.", "same and same for me dude."] {
        let ruled = RulesExtractor::new(8).extract(&input(text)).await.unwrap();
        assert_eq!(ruled.len(), 1, "{text}: {ruled:?}");
        let kept = checked.extract(&input(text)).await.unwrap();
        assert!(kept.is_empty(), "{text}: {kept:?}");
    }
    // Beside a view of its own, the same remark is still dropped: the message reads as one
    // holding a view (so a check by the message's score would keep both), its sentence does
    // not.
    let text = "Writing the code, yes. I love hiking.";
    let ruled = RulesExtractor::new(8).extract(&input(text)).await.unwrap();
    assert_eq!(ruled.len(), 2, "{ruled:?}");
    let message_score = checked.learned.read(text).await.unwrap().sentence_score;
    assert!(message_score >= 0.08, "{message_score}");
    let kept = checked.extract(&input(text)).await.unwrap();
    assert_eq!(
        kept.iter().map(|o| o.name.as_str()).collect::<Vec<_>>(),
        ["hiking"],
        "{kept:?}"
    );
    // After the rules, a message whose finds the check dropped is the learned reader's, as
    // one the rules found nothing in is.
    let combined = checked_then_learned(model(), None);
    let after_rules = LearnedExtractor::after_rules(model(), 8).unwrap();
    for text in [
        "Writing the code, yes.",
        "I love green tea, it's so calming.",
    ] {
        let both = combined.extract(&input(text)).await.unwrap();
        let expected = if text.starts_with("Writing") {
            after_rules.extract(&input(text)).await.unwrap()
        } else {
            RulesExtractor::new(8).extract(&input(text)).await.unwrap()
        };
        assert_eq!(both, expected, "{text}");
    }
}

/// The word score before the check (`extract.rules_check_keeps_at_word_score`): findings it is
/// sure of are kept without the model, which reads the rest. On the fourth chat tuning set
/// (never trained on by the word score; the every-layer reader trains on it) at the shipped
/// 0.4 it measured 0.882 (383/434) / 0.405 with the model reading 265 of 462 findings, against
/// the model alone's 0.884 (382/432) / 0.404; on the persona tuning set the model read 1 of
/// 507. Floors: the
/// same precision and recall within 0.01, and the model reading at most 70% of the findings
/// on chat and 10% on persona text. At 1 the model reads every finding.
#[tokio::test(flavor = "multi_thread")]
async fn the_word_score_spares_the_model_most_findings_and_keeps_the_checks_figures() {
    use persona_prefs::extract::learned::word_score::WordScore;
    let set = |wanted: &str| {
        let (_, text) = SHIPPED_SETS
            .iter()
            .find(|(name, _)| *name == wanted)
            .expect("the set ships");
        parse_labelled(text).unwrap()
    };
    let chat = set("people's chat (tuning 4)");
    let model = model();
    let checked = |keeps_at: f32| {
        CheckedRules::new(
            RulesExtractor::new(8),
            LearnedExtractor::new(model.clone(), 8).unwrap(),
            0.08,
        )
        .with_word_score(WordScore::shipped().unwrap(), keeps_at)
    };
    let by_model = checked(1.0);
    let alone = evaluate(&by_model, &chat, 2).await.unwrap();
    let (judged, read) = by_model.reads();
    assert_eq!(judged, read, "at 1 the model reads every finding");
    let ruled = evaluate(&RulesExtractor::new(8), &chat, 2).await.unwrap();
    assert_eq!(judged, ruled.found);

    let cascade = checked(0.4);
    let both = evaluate(&cascade, &chat, 2).await.unwrap();
    let (judged, read) = cascade.reads();
    println!(
        "chat: the model alone {:.3} ({}/{}) / {:.3}; with the word score first {:.3} ({}/{}) / {:.3}, the model reading {read} of {judged}",
        alone.precision,
        alone.matched,
        alone.found,
        alone.recall,
        both.precision,
        both.matched,
        both.found,
        both.recall
    );
    assert!((both.precision - alone.precision).abs() <= 0.01);
    assert!((both.recall - alone.recall).abs() <= 0.01);
    assert!(read * 10 <= judged * 7, "{read} of {judged}");

    let persona = set("tuning");
    let cascade = checked(0.4);
    evaluate(&cascade, &persona, 2).await.unwrap();
    let (judged, read) = cascade.reads();
    println!("persona: the model read {read} of {judged}");
    assert!(judged > 400 && read * 10 <= judged, "{read} of {judged}");
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

/// A span in a question, or in a view someone else holds, is not the persona's view: the
/// labels hold none there. Whatever the reader's confidence, `Head::opinions` leaves such a
/// span out, and keeps the same span where the words are a statement; end to end, the
/// extractor finds nothing in those messages and the statement's view in the statement.
#[tokio::test(flavor = "multi_thread")]
async fn it_finds_no_view_in_a_question_or_a_view_reported() {
    use persona_prefs::extract::learned::{Reading, Span};
    let head = Head::shipped(persona_prefs::embed::LOCAL_DIMS).unwrap();
    // A reading as sure as a reading gets: one span over the topic, at full confidence.
    let sure = |message: &str, topic: &str| {
        let start = message.find(topic).unwrap();
        Reading {
            spans: vec![Span {
                range: start..start + topic.len(),
                stance: persona_prefs::store::Stance::Against,
                confidence: 1.0,
            }],
            sentence_score: 1.0,
        }
    };
    let learned = LearnedExtractor::new(model(), 8).unwrap();
    for (message, topic) in [
        (
            "Are you sick of super hero movies or something?",
            "super hero movies",
        ),
        (
            "Everyone tells me the new museum is stunning.",
            "new museum",
        ),
    ] {
        let kept = head.opinions(message, &sure(message, topic), 8);
        assert!(kept.is_empty(), "{message:?}: {kept:?}");
        let found = learned.extract(&input(message)).await.unwrap();
        assert!(found.is_empty(), "{message:?}: {found:?}");
    }
    let statement = "I'm so sick of super hero movies.";
    let kept = head.opinions(statement, &sure(statement, "super hero movies"), 8);
    assert_eq!(kept.len(), 1, "{kept:?}");
    let found = learned.extract(&input(statement)).await.unwrap();
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
        .extract(&input("so how can someone get a job like that?"))
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
        .extract(&input("so how can someone get a job like that?"))
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
    let layer = adapted::load(std::path::Path::new(&dir), vb, adapted::RANK).unwrap();
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

/// A reader trained with low-rank additions to the model's last layer
/// (`scripts/train-learned-extractor`, the reader shipped before the every-layer one) is read
/// with them merged into that layer's weights once (`LocalEmbedder::last_layer_with`) rather
/// than through the training's copy of the layer on every message. Both read the same states,
/// within f32 rounding of two implementations, and they are not the plain model's: the
/// additions take effect.
#[test]
fn the_merged_last_layer_reads_what_the_trained_layer_read() {
    use candle_core::{Device, Tensor};
    use candle_nn::VarBuilder;
    use persona_prefs::embed::local::LayerAdditions;
    use persona_prefs::extract::learned::adapted;
    let model = model();
    let dir = std::env::var("PERSONA_PREFS_MODEL_DIR").unwrap();
    let (hidden, intermediate, rank) = (384usize, 1536usize, adapted::RANK);
    let mut additions = LayerAdditions::new();
    let mut tensors = std::collections::HashMap::new();
    for (p, name) in adapted::PRODUCTS.iter().enumerate() {
        let (outputs, inputs) = match *name {
            "intermediate" => (intermediate, hidden),
            "output" => (hidden, intermediate),
            _ => (hidden, hidden),
        };
        let down: Vec<f32> = (0..rank * inputs)
            .map(|i| (((i * 7 + p) % 13) as f32 - 6.0) * 0.004)
            .collect();
        let up: Vec<f32> = (0..outputs * rank)
            .map(|i| (((i * 5 + p) % 11) as f32 - 5.0) * 0.004)
            .collect();
        let cpu = &Device::Cpu;
        tensors.insert(
            format!("adapt.{name}.down"),
            Tensor::from_vec(down.clone(), (rank, inputs), cpu).unwrap(),
        );
        tensors.insert(
            format!("adapt.{name}.up"),
            Tensor::from_vec(up.clone(), (outputs, rank), cpu).unwrap(),
        );
        additions.insert(name.to_string(), (down, up));
    }
    let merged = model.last_layer_with(&additions).unwrap();
    let vb = VarBuilder::from_tensors(tensors, candle_core::DType::F32, &Device::Cpu);
    let trained = adapted::load(std::path::Path::new(&dir), vb, rank).unwrap();
    for text in [
        "I love hiking, but crowds wear me out.",
        "ok",
        "Honestly the new museum wing is a bit of a letdown compared to the old one.",
    ] {
        let read = model.token_states_with_last(text, &merged).unwrap();
        let before = model
            .token_states_through(text, adapted::ADAPTED_LAYER)
            .unwrap();
        let expected = adapted::adapted_states(&trained, &before).unwrap();
        let largest = largest_difference(&read.states, &expected.states);
        assert!(largest < 1e-3, "{text}: states differ by up to {largest}");
        let plain = model.token_states(text).unwrap();
        let moved = largest_difference(&read.states, &plain.states);
        assert!(
            moved > 0.01,
            "{text}: the additions changed nothing ({moved})"
        );
    }
    // Additions that do not fit the layer are refused, not read out of bounds.
    let mut wrong = additions.clone();
    wrong.get_mut("query").unwrap().1.pop();
    assert!(model.last_layer_with(&wrong).is_err());
    wrong.remove("query");
    assert!(model.last_layer_with(&wrong).is_err());
}

/// `rules_then_learned` reads at the pair its training chose for after the rules (the most
/// recall that kept the rules' precision on the development sixth), `learned` at its own
/// (the best F0.5 there): the combination exists to add to the rules' recall, not to trade
/// their precision for it.
#[test]
fn after_the_rules_the_reader_reads_at_its_own_pair() {
    let model = model();
    let alone = LearnedExtractor::new(model.clone(), 8).unwrap();
    let after_rules = LearnedExtractor::after_rules(model, 8).unwrap();
    let stored = Head::after_rules_thresholds(persona_prefs::extract::learned::SHIPPED_HEAD)
        .unwrap()
        .expect("the shipped reader stores a pair for after the rules");
    assert_eq!(after_rules.thresholds(), stored);
    assert_ne!(alone.thresholds(), after_rules.thresholds());
    let (confidence, sentence) = stored;
    assert!((0.0..=1.0).contains(&confidence) && (0.0..=1.0).contains(&sentence));
}

/// The check reads its sentence scores in batches gathered across events; a batch reads what
/// each text read alone does, whatever else is in it.
#[tokio::test(flavor = "multi_thread")]
async fn sentence_scores_read_in_a_batch_are_each_texts_own() {
    let learned = LearnedExtractor::new(model(), 8).unwrap();
    let texts: Vec<String> = [
        "I love green tea, it's so calming.",
        "Writing the code, yes.",
        "What time is it over there?",
        "Honestly I think jazz from the fifties is the best music ever made, no contest.",
    ]
    .map(String::from)
    .to_vec();
    let together = learned.sentence_scores(texts.clone()).await.unwrap();
    assert_eq!(together.len(), texts.len());
    for (text, score) in texts.iter().zip(&together) {
        let alone = learned.read(text).await.unwrap().sentence_score;
        assert!(
            (alone - score).abs() < 1e-4,
            "{text}: {alone} alone, {score} in the batch"
        );
    }
    assert!(together[0] > 0.5 && together[2] < 0.5, "{together:?}");
}

/// Where the rules find nothing, the reader reads whole messages, gathered into batches across
/// concurrent events (`rules_then_learned`, `learned`, the LLM's gate). A message read in a
/// batch is read exactly as it is alone, spans, confidences and score, whatever else is in it.
#[tokio::test(flavor = "multi_thread")]
async fn messages_read_in_batches_are_each_read_as_alone() {
    let model = model();
    let alone = LearnedExtractor::after_rules(model.clone(), 8).unwrap();
    let batched = LearnedExtractor::after_rules(model, 8).unwrap().batched(4);
    let messages: Vec<String> = [
        "honestly rainy sundays with a good book are the best thing ever",
        "the train left at 412 so I walked the rest of the way",
        "I can't stand people who chew loudly, it drives me up the wall.",
        "What time is it over there?",
        "my sister moved to a flat on street number 9 last week",
        "Old westerns are so much fun to watch with my dad.",
        "ok",
        "Writing the code, yes. I really dislike meetings that could have been an email.",
        "we drove 300 miles yesterday to see my grandparents",
        "Jazz from the fifties is wonderful, and bebop most of all.",
    ]
    .map(String::from)
    .to_vec();
    let each_alone = {
        let mut readings = Vec::new();
        for message in &messages {
            readings.push(alone.read(message).await.unwrap());
        }
        readings
    };
    assert!(
        each_alone.iter().filter(|r| !r.spans.is_empty()).count() >= 3,
        "some messages hold spans, or the comparison is of empty readings: {each_alone:?}"
    );
    let in_one_pass = alone.read_many(messages.clone()).await.unwrap();
    assert_eq!(in_one_pass, each_alone, "one pass of all ten");
    let gathered = futures::future::join_all(messages.iter().map(|m| batched.read(m))).await;
    for ((message, reading), expected) in messages.iter().zip(gathered).zip(&each_alone) {
        assert_eq!(&reading.unwrap(), expected, "{message}");
    }
}

/// A reader trained with additions to every layer (`scripts/train-learned-reader`) is read
/// through a copy of the whole model with them merged in: additions of nothing read exactly
/// what the model reads, an addition to the first layer alone reaches the last states, and
/// additions for more layers than the model has, or of the wrong shape, are refused.
#[test]
fn additions_to_every_layer_are_merged_into_a_copy_of_the_model() {
    use persona_prefs::embed::local::LayerAdditions;
    use persona_prefs::extract::learned::adapted;
    let model = model();
    let layers = model.layer_count().expect("the hand-written pass");
    let (hidden, intermediate, rank) = (384usize, 1536usize, 2usize);
    let sizes = |name: &str| match name {
        "intermediate" => (intermediate, hidden),
        "output" => (hidden, intermediate),
        _ => (hidden, hidden),
    };
    let additions = |scale: f32| -> LayerAdditions {
        adapted::PRODUCTS
            .iter()
            .map(|name| {
                let (outputs, inputs) = sizes(name);
                let down: Vec<f32> = (0..rank * inputs)
                    .map(|i| ((i % 7) as f32 - 3.0) * 0.01)
                    .collect();
                let up = vec![scale; outputs * rank];
                (name.to_string(), (down, up))
            })
            .collect()
    };
    let text = "I love hiking, but crowds wear me out.";
    let plain = model.token_states(text).unwrap();

    let nothing = model
        .last_layers_with(&vec![additions(0.0); layers])
        .unwrap();
    let read = model.token_states_with_last(text, &nothing).unwrap();
    assert_eq!(
        read.states, plain.states,
        "additions of nothing changed the states"
    );
    assert_eq!(read.words, plain.words);

    let mut first_only = vec![additions(0.0); layers];
    first_only[0] = additions(0.05);
    let changed = model.last_layers_with(&first_only).unwrap();
    let moved = largest_difference(
        &model.token_states_with_last(text, &changed).unwrap().states,
        &plain.states,
    );
    assert!(
        moved > 0.01,
        "an addition to the first layer changed nothing ({moved})"
    );

    assert!(
        model
            .last_layers_with(&vec![additions(0.0); layers + 1])
            .is_err()
    );
    let mut misshapen = vec![additions(0.0); layers];
    misshapen[2].get_mut("output").unwrap().0.pop();
    assert!(model.last_layers_with(&misshapen).is_err());
}

/// A reader's file names the layers its additions change (`adapt.<layer>.<product>`): the
/// shipped one changes all six and loads; one whose changed layers have a gap, or that changes
/// more layers than the model has, is refused with the reason, never read half-changed.
#[tokio::test(flavor = "multi_thread")]
async fn a_readers_additions_must_change_a_run_of_the_models_last_layers() {
    use persona_prefs::extract::learned::{Reads, SHIPPED_HEAD};
    let model = model();
    let cpu = candle_core::Device::Cpu;
    let shipped = candle_core::safetensors::load_buffer(SHIPPED_HEAD, &cpu).unwrap();
    assert!(
        shipped.contains_key("adapt.0.query.down") && shipped.contains_key("adapt.5.output.up")
    );
    LearnedExtractor::from_file(model.clone(), 8, SHIPPED_HEAD, Reads::AfterRules).unwrap();
    let written = |tensors: &std::collections::HashMap<String, candle_core::Tensor>| {
        let path =
            std::env::temp_dir().join(format!("reader-{}.safetensors", uuid::Uuid::new_v4()));
        candle_core::safetensors::save(tensors, &path).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        bytes
    };
    let mut gap = shipped.clone();
    gap.retain(|name, _| !name.starts_with("adapt.2."));
    let refused = LearnedExtractor::from_file(model.clone(), 8, &written(&gap), Reads::Alone)
        .err()
        .expect("a gap in the changed layers is refused");
    assert!(
        refused.to_string().contains("not to a run of layers"),
        "{refused}"
    );
    let mut extra = shipped.clone();
    for (name, tensor) in &shipped {
        if let Some(product) = name.strip_prefix("adapt.5.") {
            extra.insert(format!("adapt.6.{product}"), tensor.clone());
        }
    }
    let refused = LearnedExtractor::from_file(model, 8, &written(&extra), Reads::Alone)
        .err()
        .expect("a seventh layer's additions are refused for a six-layer model");
    assert!(refused.to_string().contains("this model has"), "{refused}");
}

/// A tiny MPNet with random weights, and a random reader over it, with what PyTorch reads
/// with them (`scripts/python/tiny_mpnet.py`, `scripts/python/tiny_mpnet_reader.py`).
fn tiny_mpnet_dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/tiny_mpnet")
}

/// The configuration with these environment overrides over the built-in defaults.
fn config_with(pairs: &[(&str, &str)]) -> Result<Config, persona_prefs::config::ConfigError> {
    let env: Vec<(String, String)> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    Config::load_from(None, &env)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_reader_over_its_own_encoder_reads_what_pytorch_reads() {
    let dir = tiny_mpnet_dir();
    let encoder = Arc::new(LocalEmbedder::load(&dir, 2000).unwrap());
    assert_eq!(encoder.hidden_size(), 32);
    let reader_file = std::fs::read(dir.join("reader.safetensors")).unwrap();
    let reader = LearnedExtractor::from_file(
        encoder.clone(),
        8,
        &reader_file,
        persona_prefs::extract::learned::Reads::Alone,
    )
    .unwrap();
    let expected: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("reader_expected.json")).unwrap())
            .unwrap();
    for case in expected.as_array().unwrap() {
        let text = case["text"].as_str().unwrap();
        let reading = reader.read(text).await.unwrap();
        let want = case["sentence_score"].as_f64().unwrap() as f32;
        assert!(
            (reading.sentence_score - want).abs() < 1e-5,
            "{text}: sentence score {} against PyTorch's {want}",
            reading.sentence_score
        );
        // Each word's tag as PyTorch's probabilities pick it, decoded as the crate decodes.
        let tags: Vec<(u32, f32)> = case["tag_probabilities"]
            .as_array()
            .unwrap()
            .iter()
            .map(|row| {
                let row: Vec<f32> = row
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|p| p.as_f64().unwrap() as f32)
                    .collect();
                let (tag, p) = row
                    .iter()
                    .enumerate()
                    .max_by(|a, b| a.1.total_cmp(b.1))
                    .unwrap();
                (tag as u32, *p)
            })
            .collect();
        let words = encoder.token_states(text).unwrap().words;
        let want = persona_prefs::extract::learned::spans(text, &words, &tags);
        assert!(!want.is_empty(), "{text}: the random reader tags nothing");
        assert_eq!(reading.spans.len(), want.len(), "{text}");
        for (got, want) in reading.spans.iter().zip(&want) {
            assert_eq!(
                (&got.range, got.stance),
                (&want.range, want.stance),
                "{text}"
            );
            assert!((got.confidence - want.confidence).abs() < 1e-4, "{text}");
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_configured_reader_reads_with_its_own_encoder_and_never_with_the_wrong_one() {
    let dir = tiny_mpnet_dir();
    let reader = dir.join("reader.safetensors").display().to_string();
    let encoder = dir.display().to_string();
    let with = config_with;
    // Through the configuration, as the worker builds it: no embedder model given.
    let config = with(&[
        ("PERSONA_PREFS__EXTRACT__KIND", "learned"),
        ("PERSONA_PREFS__EXTRACT__LEARNED_READER", &reader),
        ("PERSONA_PREFS__EXTRACT__LEARNED_ENCODER_DIR", &encoder),
    ])
    .unwrap();
    let extractor = persona_prefs::extract::from_config(&config.extract, &[], None).unwrap();
    extractor
        .extract(&input("Honestly, pineapple on pizza is a crime."))
        .await
        .unwrap();

    // The shipped reader was trained over MiniLM: over this encoder it is refused, by width.
    let shipped_over_tiny = with(&[
        ("PERSONA_PREFS__EXTRACT__KIND", "learned"),
        ("PERSONA_PREFS__EXTRACT__LEARNED_ENCODER_DIR", &encoder),
    ])
    .unwrap_err()
    .to_string();
    assert!(
        shipped_over_tiny.contains("extract.learned_encoder_dir")
            && shipped_over_tiny.contains("extract.learned_reader"),
        "{shipped_over_tiny}"
    );
    let wrong_encoder = LearnedExtractor::from_file(
        Arc::new(LocalEmbedder::load(&dir, 2000).unwrap()),
        8,
        persona_prefs::extract::learned::SHIPPED_HEAD,
        persona_prefs::extract::learned::Reads::Alone,
    )
    .err()
    .unwrap()
    .to_string();
    assert!(
        wrong_encoder.contains("384-wide") && wrong_encoder.contains("gives 32"),
        "{wrong_encoder}"
    );
    // And this reader over the embedder's MiniLM, the other way round.
    let tiny_over_minilm = LearnedExtractor::from_file(
        model(),
        8,
        &std::fs::read(&reader).unwrap(),
        persona_prefs::extract::learned::Reads::Alone,
    )
    .err()
    .unwrap()
    .to_string();
    assert!(tiny_over_minilm.contains("32-wide"), "{tiny_over_minilm}");

    let missing = with(&[(
        "PERSONA_PREFS__EXTRACT__LEARNED_ENCODER_DIR",
        "/no/such/encoder",
    )])
    .unwrap_err()
    .to_string();
    assert!(
        missing.contains("extract.learned_encoder_dir") && missing.contains("not a folder"),
        "{missing}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_gate_keeps_what_neither_the_rules_nor_the_sentence_score_pass_from_a_costly_encoder() {
    let dir = tiny_mpnet_dir();
    let reader = dir.join("reader.safetensors").display().to_string();
    let encoder = dir.display().to_string();
    let config_at = |gate: &str| {
        config_with(&[
            ("PERSONA_PREFS__EXTRACT__KIND", "learned"),
            ("PERSONA_PREFS__EXTRACT__LEARNED_READER", reader.as_str()),
            (
                "PERSONA_PREFS__EXTRACT__LEARNED_ENCODER_DIR",
                encoder.as_str(),
            ),
            ("PERSONA_PREFS__EXTRACT__LEARNED_GATE_MIN_SCORE", gate),
        ])
        .unwrap()
    };
    // "green tea": nothing the rules read, and the random reader over the tiny encoder finds
    // it; the shipped sentence score never reaches 1, so at 1 only the rules pass a message.
    let message = input("green tea");
    let ungated =
        persona_prefs::extract::from_config(&config_at("0").extract, &[], Some(model())).unwrap();
    let found = ungated.extract(&message).await.unwrap();
    assert_eq!(
        found.iter().map(|o| o.name.as_str()).collect::<Vec<_>>(),
        ["green tea"]
    );
    let gated =
        persona_prefs::extract::from_config(&config_at("1").extract, &[], Some(model())).unwrap();
    assert!(gated.extract(&message).await.unwrap().is_empty());
    // The same through the 8-bit passes (`extract.learned_int8`): the reader's own encoder's
    // and, for the gate, the embedder's search-query pass.
    let with_int8 = model_with_eight_bit_queries();
    for (gate, found) in [("0", vec!["green tea"]), ("1", vec![])] {
        let mut config = config_at(gate);
        config.extract.learned_int8 = true;
        let extractor =
            persona_prefs::extract::from_config(&config.extract, &[], Some(with_int8.clone()))
                .unwrap();
        let names: Vec<String> = extractor
            .extract(&message)
            .await
            .unwrap()
            .into_iter()
            .map(|o| o.name)
            .collect();
        assert_eq!(names, found, "8 bits, gate at {gate}");
    }

    // The gate reads with the embedder's model: without one it is refused, by name.
    let refused = persona_prefs::extract::from_config(&config_at("0.5").extract, &[], None)
        .err()
        .unwrap()
        .to_string();
    assert!(
        refused.contains("extract.learned_gate_min_score"),
        "{refused}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_reader_over_its_own_encoder_in_eight_bits_reads_what_it_reads_in_f32() {
    let dir = tiny_mpnet_dir();
    let reader_path = dir.join("reader.safetensors").display().to_string();
    let encoder_path = dir.display().to_string();
    let config_at = |int8: &str| {
        config_with(&[
            ("PERSONA_PREFS__EXTRACT__KIND", "learned"),
            (
                "PERSONA_PREFS__EXTRACT__LEARNED_READER",
                reader_path.as_str(),
            ),
            (
                "PERSONA_PREFS__EXTRACT__LEARNED_ENCODER_DIR",
                encoder_path.as_str(),
            ),
            ("PERSONA_PREFS__EXTRACT__LEARNED_INT8", int8),
        ])
        .unwrap()
    };
    let encoder_of = |int8: &str| {
        persona_prefs::extract::own_encoder(&config_at(int8).extract, 2000)
            .unwrap()
            .expect("an encoder is named")
    };
    let (full, eight_bit) = (encoder_of("false"), encoder_of("true"));
    let reader_file = std::fs::read(&reader_path).unwrap();
    let reader_over = |encoder: &Arc<LocalEmbedder>| {
        LearnedExtractor::from_file(
            encoder.clone(),
            8,
            &reader_file,
            persona_prefs::extract::learned::Reads::Alone,
        )
        .unwrap()
    };
    let (full_reader, eight_bit_reader) = (reader_over(&full), reader_over(&eight_bit));
    let expected: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("reader_expected.json")).unwrap())
            .unwrap();
    for case in expected.as_array().unwrap() {
        let text = case["text"].as_str().unwrap();
        // The 8-bit pass really runs (its states are not F32's, bit for bit) and stays close.
        let texts = [text.to_string()];
        let full_states = full.token_states_many(&texts, None).unwrap().remove(0);
        let eight_bit_states = eight_bit.token_states_many(&texts, None).unwrap().remove(0);
        assert_ne!(full_states.states, eight_bit_states.states, "{text}");
        for (a, b) in full_states.states.iter().zip(&eight_bit_states.states) {
            let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
            let norm = |v: &[f32]| v.iter().map(|x| x * x).sum::<f32>().sqrt();
            let cosine = dot / (norm(a) * norm(b));
            assert!(cosine > 0.99, "{text}: a token's state at cosine {cosine}");
        }
        // And the reader reads the same spans through either.
        let (a, b) = (
            full_reader.read(text).await.unwrap(),
            eight_bit_reader.read(text).await.unwrap(),
        );
        assert!(
            (a.sentence_score - b.sentence_score).abs() < 0.02,
            "{text}: sentence score {} in F32, {} in 8 bits",
            a.sentence_score,
            b.sentence_score
        );
        // This random reader's tags sit near their ties, so 8 bits may cut its spans
        // elsewhere; the shipped MPNet reader's findings on the development set are the
        // measure of that (README, "The MPNet reader in the service": 530/640 against 528/636).
        assert_eq!(a.spans.is_empty(), b.spans.is_empty(), "{text}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_shipped_reader_reads_through_the_embedders_eight_bit_pass_when_asked() {
    let local = model_with_eight_bit_queries();
    let reader_over = |int8: &str| {
        let config = config_with(&[
            ("PERSONA_PREFS__EXTRACT__KIND", "rules_then_learned"),
            ("PERSONA_PREFS__EXTRACT__LEARNED_INT8", int8),
        ])
        .unwrap();
        let model = persona_prefs::extract::reader_model(&config.extract, Some(local.clone()))
            .unwrap()
            .unwrap();
        LearnedExtractor::from_file(
            model,
            8,
            persona_prefs::extract::learned::SHIPPED_HEAD,
            persona_prefs::extract::learned::Reads::Alone,
        )
        .unwrap()
    };
    let (full, eight_bit) = (reader_over("false"), reader_over("true"));
    let messages: Vec<String> = [
        "Honestly, pineapple on pizza is a crime.",
        "we got back from the market around 5 and my brother cooked dinner",
        "I think jazz is the best music there is, but opera bores me.",
    ]
    .map(String::from)
    .to_vec();
    let (a, b) = (
        full.read_many(messages.clone()).await.unwrap(),
        eight_bit.read_many(messages.clone()).await.unwrap(),
    );
    for ((text, a), b) in messages.iter().zip(&a).zip(&b) {
        // Not the F32 pass (its scores would be equal to the bit), and close to it.
        assert_ne!(a.sentence_score, b.sentence_score, "{text}");
        assert!(
            (a.sentence_score - b.sentence_score).abs() < 0.05,
            "{text}: {} in F32, {} in 8 bits",
            a.sentence_score,
            b.sentence_score
        );
    }

    // Without the embedder's 8-bit pass, and no encoder of the reader's own, the key is
    // refused by name.
    let refused = config_with(&[
        ("PERSONA_PREFS__EXTRACT__LEARNED_INT8", "true"),
        ("PERSONA_PREFS__EMBED__QUERY_PRECISION", "f32"),
    ])
    .unwrap_err()
    .to_string();
    assert!(
        refused.contains("extract.learned_int8") && refused.contains("embed.query_precision"),
        "{refused}"
    );
}

/// The word gate in front of the reader after the checked rules (`extract.learned_word_gate`),
/// through the configuration, on the development quarter (no reader trains on it): at 1 no
/// message gets past it, so the kind reads exactly what the checked rules read; at 0.4 the
/// reader still adds finds where the rules find nothing, fewer than ungated and no less
/// precisely (on the whole development set, in 8 bits: checked rules 0.914 / 0.456, gated at
/// 0.4 0.905 / 0.475, ungated 0.846 / 0.557).
#[tokio::test(flavor = "multi_thread")]
async fn the_word_gate_lets_the_reader_read_only_messages_that_sound_like_a_view() {
    let development = development_quarter();
    let local = model_with_eight_bit_queries();
    let configured = |kind: &str, gate: &str| {
        let config = config_with(&[
            ("PERSONA_PREFS__EXTRACT__KIND", kind),
            ("PERSONA_PREFS__EXTRACT__LEARNED_INT8", "true"),
            ("PERSONA_PREFS__EXTRACT__LEARNED_WORD_GATE", gate),
        ])
        .unwrap();
        persona_prefs::extract::from_config(
            &config.extract,
            &config.store.categories,
            Some(local.clone()),
        )
        .unwrap()
    };
    let read = async |kind: &str, gate: &str| {
        evaluate(configured(kind, gate).as_ref(), &development, 2)
            .await
            .unwrap()
    };
    let checked = read("rules", "0").await;
    let shut = read("rules_then_learned", "1").await;
    let gated = read("rules_then_learned", "0.4").await;
    let ungated = read("rules_then_learned", "0").await;
    println!(
        "checked rules: {}; gate 1: {}; gate 0.4: {}; ungated: {}",
        figures(&checked),
        figures(&shut),
        figures(&gated),
        figures(&ungated)
    );
    assert_eq!(
        (shut.found, shut.recalled),
        (checked.found, checked.recalled),
        "a gate nothing passes leaves the checked rules"
    );
    assert!(
        gated.recalled > checked.recalled,
        "past the gate the reader still adds"
    );
    assert!(gated.recalled <= ungated.recalled && gated.found < ungated.found);
    assert!(
        gated.precision >= ungated.precision,
        "what the gate keeps from the reader is its less precise part"
    );
}
