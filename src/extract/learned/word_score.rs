//! The check's word score: a logistic regression over a sentence's hashed words and word
//! pairs and triples, trained on the tuning sets. It costs microseconds where the model's
//! sentence score costs a pass of MiniLM, so [`super::CheckedRules`] keeps a finding whose
//! word score is high without reading the model at all, and asks the model only about the
//! rest.
//!
//! Why a cascade and not this score alone: on the fourth people's-chat tuning set (which it
//! never trained on) the word score as the whole check read about what the model's does
//! (0.879 / 0.386 at 0.10 against 0.872 / 0.384), but on the development set clearly less
//! (0.865 / 0.451 against 0.890 / 0.461). Where it is sure a sentence voices a view it agrees
//! with the model; where it is unsure the model decides.
//!
//! The weights are a shipped file (`data/check_word_score.bin`, 1 MB: 2^18 little-endian f32,
//! compiled in), made by `scripts/train-check-word-score` in seconds; [`train`] is
//! deterministic.

use crate::extract::evaluate::Labelled;
use crate::model::ExtractedOpinion;

/// Buckets the hashed features fall into.
pub const FEATURE_BITS: u32 = 18;
const BUCKETS: usize = 1 << FEATURE_BITS;

/// The shipped weights (`scripts/train-check-word-score`).
pub const SHIPPED_WORD_SCORE: &[u8] = include_bytes!("../../../data/check_word_score.bin");

/// What wrong findings weigh in training against a right one: few of them survive on the
/// sets the rules were tuned to (31 among 521 on the three chat sets trained on), and they
/// are what the check exists for.
const WRONG_FINDING_WEIGHT: f32 = 3.0;
const EPOCHS: usize = 8;
const LEARNING_RATE: f32 = 0.1;
const L2: f32 = 1e-6;

/// A trained word score. Cloned cheaply: its kinds' readers (the check, the word gate) share
/// one copy of the weights.
#[derive(Clone)]
pub struct WordScore {
    weights: std::sync::Arc<[f32]>,
}

impl std::fmt::Debug for WordScore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "WordScore({} buckets)", self.weights.len())
    }
}

/// A sentence to learn from: its text, whether it voices a view of the speaker's own, and
/// what it weighs.
#[derive(Debug, Clone)]
pub struct Example {
    pub text: String,
    pub voices_a_view: bool,
    pub weight: f32,
}

impl WordScore {
    /// The shipped weights. (The file is compiled in and a test reads it; this cannot fail in
    /// a tested build, and says so if it does rather than scoring with nothing.)
    pub fn shipped() -> Result<WordScore, String> {
        WordScore::from_bytes(SHIPPED_WORD_SCORE)
            .map_err(|e| format!("the shipped word score (data/check_word_score.bin): {e}"))
    }

    /// Weights from their file: exactly 2^18 little-endian f32.
    pub fn from_bytes(bytes: &[u8]) -> Result<WordScore, String> {
        if bytes.len() != BUCKETS * 4 {
            return Err(format!(
                "a word score's file holds {} bytes, not {} (2^{FEATURE_BITS} f32)",
                bytes.len(),
                BUCKETS * 4
            ));
        }
        let weights: Vec<f32> = bytes
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        if weights.iter().any(|w| !w.is_finite()) {
            return Err("a word score's file holds a weight that is not finite".into());
        }
        Ok(WordScore {
            weights: weights.into(),
        })
    }

    /// The weights as their file holds them.
    pub fn to_bytes(&self) -> Vec<u8> {
        self.weights.iter().flat_map(|w| w.to_le_bytes()).collect()
    }

    /// How likely `sentence` voices a view of the speaker's own, in [0, 1].
    pub fn score(&self, sentence: &str) -> f32 {
        let features = features(sentence);
        sigmoid(self.logit(&features))
    }

    fn logit(&self, features: &[usize]) -> f32 {
        logit(&self.weights, features)
    }
}

fn logit(weights: &[f32], features: &[usize]) -> f32 {
    let sum: f32 = features.iter().map(|&i| weights[i]).sum();
    sum / (features.len() as f32).sqrt()
}

fn sigmoid(z: f32) -> f32 {
    1.0 / (1.0 + (-z).exp())
}

/// Lower-cased words (apostrophes kept), the punctuation that changes what a sentence does
/// (? ! , . : ;), and start and end marks.
fn tokens(text: &str) -> Vec<String> {
    let mut out = vec!["<s>".to_string()];
    let mut word = String::new();
    for c in text.chars() {
        if c.is_alphanumeric() || c == '\'' || c == '\u{2019}' {
            word.extend(c.to_lowercase());
        } else {
            if !word.is_empty() {
                out.push(std::mem::take(&mut word));
            }
            if matches!(c, '?' | '!' | ',' | '.' | ':' | ';') {
                out.push(c.to_string());
            }
        }
    }
    if !word.is_empty() {
        out.push(word);
    }
    out.push("</s>".into());
    out
}

/// FNV-1a, salted by the kind of feature, folded to [`FEATURE_BITS`].
fn bucket(text: &str, salt: u64) -> usize {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325 ^ salt;
    for byte in text.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    (hash >> (64 - FEATURE_BITS)) as usize
}

/// A sentence's features: a bias, each word, each pair and triple of neighbouring words, and
/// its first word; each once.
fn features(text: &str) -> Vec<usize> {
    let tokens = tokens(text);
    let mut features = vec![0usize];
    for (i, word) in tokens.iter().enumerate() {
        features.push(bucket(word, 1));
        if let Some(next) = tokens.get(i + 1) {
            features.push(bucket(&format!("{word} {next}"), 2));
            if let Some(after) = tokens.get(i + 2) {
                features.push(bucket(&format!("{word} {next} {after}"), 3));
            }
        }
    }
    if let Some(first) = tokens.get(1) {
        features.push(bucket(first, 4));
    }
    features.sort_unstable();
    features.dedup();
    features
}

/// The text a finding is judged by: its own sentence when it quotes one from the message,
/// otherwise the message (a finding whose evidence is the whole message, or a view of the
/// addressee rewritten).
pub fn judged_text(message: &str, opinion: &ExtractedOpinion) -> String {
    let sentence = opinion.evidence.trim();
    if sentence == message.trim() || !message.contains(sentence) {
        message.to_string()
    } else {
        sentence.to_string()
    }
}

/// What the word score learns from, given each labelled utterance with the rules' findings in
/// it: every sentence of an utterance that holds no opinion (does not voice one), cut as the
/// rules cut the sentences their findings quote ([`crate::extract::rules::sentences`]), so
/// it learns from the texts it judges; an utterance of one sentence that holds one (does),
/// and the judged text of every finding,
/// right or wrong (wrong ones weigh [`WRONG_FINDING_WEIGHT`]).
pub fn examples(rows: &[(Labelled, Vec<ExtractedOpinion>)]) -> Vec<Example> {
    let mut examples = Vec::new();
    for (row, found) in rows {
        let parts = crate::extract::rules::sentences(&row.text);
        if row.opinions.is_empty() {
            examples.extend(parts.iter().map(|sentence| Example {
                text: sentence.to_string(),
                voices_a_view: false,
                weight: 1.0,
            }));
        } else if parts.len() == 1 {
            examples.push(Example {
                text: row.text.clone(),
                voices_a_view: true,
                weight: 1.0,
            });
        }
        for opinion in found {
            let right = row.labels(opinion);
            examples.push(Example {
                text: judged_text(&row.text, opinion),
                voices_a_view: right,
                weight: if right { 1.0 } else { WRONG_FINDING_WEIGHT },
            });
        }
    }
    examples
}

/// Trains the score on `examples`: AdaGrad over the logistic loss, [`EPOCHS`] passes in an
/// order shuffled from a fixed seed. Deterministic.
pub fn train(examples: &[Example]) -> WordScore {
    let featured: Vec<(Vec<usize>, f32, f32)> = examples
        .iter()
        .map(|e| {
            (
                features(&e.text),
                if e.voices_a_view { 1.0 } else { 0.0 },
                e.weight,
            )
        })
        .collect();
    let mut weights = vec![0.0f32; BUCKETS];
    let mut squared_gradients = vec![1e-8f32; BUCKETS];
    let mut order: Vec<usize> = (0..featured.len()).collect();
    let mut state = 7u64;
    for _ in 0..EPOCHS {
        for i in (1..order.len()).rev() {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            order.swap(i, (state % (i as u64 + 1)) as usize);
        }
        for &k in &order {
            let (features, label, weight) = &featured[k];
            let predicted = sigmoid(logit(&weights, features));
            let gradient = (predicted - label) * weight / (features.len() as f32).sqrt();
            for &i in features {
                let g = gradient + L2 * weights[i];
                squared_gradients[i] += g * g;
                weights[i] -= LEARNING_RATE * g / squared_gradients[i].sqrt();
            }
        }
    }
    WordScore {
        weights: weights.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::extract::evaluate::Expected;
    use crate::model::Stance;

    fn row(text: &str, topics: &[&str]) -> Labelled {
        Labelled {
            text: text.into(),
            opinions: topics
                .iter()
                .map(|topic| Expected {
                    topic: topic.to_string(),
                    stance: Stance::For,
                })
                .collect(),
        }
    }

    #[test]
    fn a_sentence_reads_as_its_words_pairs_and_triples_each_once() {
        assert_eq!(
            tokens("I LOVE tea, don't you?"),
            ["<s>", "i", "love", "tea", ",", "don't", "you", "?", "</s>"]
        );
        let once = features("tea tea tea");
        let mut sorted = once.clone();
        sorted.dedup();
        assert_eq!(once, sorted);
        assert_eq!(features("I love tea."), features("i love TEA."));
        assert_ne!(features("I love tea."), features("I love tea?"));
    }

    #[test]
    fn what_it_learns_from_follows_the_labels_and_the_findings() {
        let view = row("I love hiking.", &["hiking"]);
        let chatter = row("Writing the code, yes. See you soon!", &[]);
        let mixed = row("Writing the code, yes. I love hiking.", &["hiking"]);
        let wrong = ExtractedOpinion {
            name: "code".into(),
            opinion: "I like code".into(),
            category: "other".into(),
            stance: Stance::For,
            strength: 0.5,
            related_user_ids: vec![],
            evidence: "Writing the code, yes.".into(),
            found_by: None,
        };
        let found = examples(&[(view, vec![]), (chatter, vec![]), (mixed, vec![wrong])]);
        let labels: Vec<(&str, bool, f32)> = found
            .iter()
            .map(|e| (e.text.as_str(), e.voices_a_view, e.weight))
            .collect();
        assert_eq!(
            labels,
            [
                ("I love hiking.", true, 1.0),
                ("Writing the code, yes.", false, 1.0),
                ("See you soon!", false, 1.0),
                // A message of two sentences with a view gives no example of its own; its
                // wrong finding is judged by its sentence and weighs more.
                ("Writing the code, yes.", false, WRONG_FINDING_WEIGHT),
            ]
        );
    }

    #[test]
    fn training_separates_views_from_chatter_and_is_deterministic() {
        let mut rows = Vec::new();
        for topic in [
            "tea", "jazz", "hiking", "rain", "chess", "cats", "opera", "kale",
        ] {
            rows.push((row(&format!("I really love {topic}."), &[topic]), vec![]));
            rows.push((row(&format!("Did you bring the {topic}?"), &[]), vec![]));
        }
        let examples = examples(&rows);
        let score = train(&examples);
        assert!(score.score("I really love sailing.") > 0.7);
        assert!(score.score("Did you bring the sailing?") < 0.3);
        assert_eq!(train(&examples).to_bytes(), score.to_bytes());
    }

    #[test]
    fn weights_come_back_from_their_file_and_a_wrong_file_is_refused() {
        let shipped = WordScore::from_bytes(SHIPPED_WORD_SCORE).expect("the shipped file reads");
        assert_eq!(shipped.to_bytes(), SHIPPED_WORD_SCORE);
        assert!(
            WordScore::from_bytes(&[0; 12])
                .unwrap_err()
                .contains("bytes")
        );
        let mut bad = SHIPPED_WORD_SCORE.to_vec();
        bad[..4].copy_from_slice(&f32::NAN.to_le_bytes());
        assert!(WordScore::from_bytes(&bad).unwrap_err().contains("finite"));
    }
}
