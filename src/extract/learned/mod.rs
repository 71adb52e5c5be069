//! A learned extractor: the shipped MiniLM reads the persona's message, and a small reader
//! trained on the tuning sets tags the words that name a topic, with their stance, and scores
//! whether the message holds an opinion at all.
//!
//! - The reader is two parts, trained together (`scripts/train-learned-reader`, in PyTorch):
//!   rank-8 additions to each dense product of every one of MiniLM's layers (the embedder's
//!   weights stay frozen beneath them; [`adapted`] trained the earlier reader's additions to
//!   the last layer alone), and the head ([`Head`]): two layers over each word's features
//!   ([`word_features`]: its first-token state, those of the words up to two away, the message's mean state; tags:
//!   outside, or the beginning or inside of a topic held for or against) and one over the
//!   message's mean state (the sentence score). Its weights and two pairs of thresholds (its
//!   own, and for reading after the rules) are a small shipped file
//!   (`data/learned_extractor.safetensors`, 2.5 MB, compiled in), made by
//!   `scripts/train-learned-reader` from the tuning sets only, its thresholds chosen by this
//!   crate's own reading of it ([`training::calibrate`]); `extract.learned_reader` names
//!   another.
//! - [`LearnedExtractor`] merges the additions into a copy of the layers they change once
//!   (`LocalEmbedder::last_layers_with`), so a message costs one pass of the model, as an
//!   embedding does; it reads topics as the spans of tagged words whose mean confidence
//!   reaches the threshold; the evidence is the sentence the span is in, verbatim.
//! - [`training`] reproduces the earlier reader's weights and chooses any reader's thresholds.

pub mod adapted;
pub mod stance;
pub mod training;
pub mod word_score;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use candle_core::{DType, Device, Module, Tensor};
use candle_nn::{Linear, VarBuilder};
use futures::future::BoxFuture;
use rayon::prelude::*;

use super::{ExtractError, ExtractedOpinion, ExtractionInput, Extractor};
use crate::embed::EmbedError;
use crate::embed::batcher::{BatchWork, Batcher};
use crate::embed::fast_bert::ChangedLayers;
use crate::embed::local::{LayerAdditions, LocalEmbedder, TokenStates};
use crate::model::Stance;

/// The shipped reader: the head's weights, the additions to the model's last layer it was
/// trained with, and its two pairs of thresholds (alone, and after the rules).
pub const SHIPPED_HEAD: &[u8] = include_bytes!("../../../data/learned_extractor.safetensors");

/// The name, in a reader's file, of the pair of thresholds (span confidence, sentence score)
/// its training chose for it after the rules (`rules_then_learned`); `thresholds` holds its
/// own, for reading alone.
pub const AFTER_RULES_THRESHOLDS: &str = "thresholds_after_rules";

/// Tags a word can get.
pub const TAGS: usize = 5;
/// Outside any topic.
pub const OUTSIDE: u32 = 0;
/// The first word of a topic held for; then its other words.
pub const BEGIN_FOR: u32 = 1;
pub const INSIDE_FOR: u32 = 2;
/// The same, held against.
pub const BEGIN_AGAINST: u32 = 3;
pub const INSIDE_AGAINST: u32 = 4;

/// The width of the head's hidden layer.
pub const HIDDEN: usize = 128;

/// The trained head over MiniLM's states.
pub struct Head {
    hidden: Linear,
    tags: Linear,
    sentence: Linear,
    /// The least mean confidence a tagged span needs (chosen on the training's own
    /// development split).
    pub min_confidence: f32,
    /// The least sentence score of a message whose spans count.
    pub min_sentence_score: f32,
}

impl Head {
    /// A head over `dims`-wide states, its weights from `vb` (trained or to be trained).
    pub fn new(vb: VarBuilder, dims: usize) -> candle_core::Result<Head> {
        Ok(Head {
            hidden: candle_nn::linear(WORD_CONTEXT * dims, HIDDEN, vb.pp("hidden"))?,
            tags: candle_nn::linear(HIDDEN, TAGS, vb.pp("tags"))?,
            sentence: candle_nn::linear(dims, 1, vb.pp("sentence"))?,
            min_confidence: 0.5,
            min_sentence_score: 0.0,
        })
    }

    /// The shipped head, with the thresholds stored beside its weights.
    pub fn shipped(dims: usize) -> Result<Head, ExtractError> {
        Head::from_file(SHIPPED_HEAD, dims)
    }

    /// A head from a reader's file (the training's output), at its own thresholds.
    pub fn from_file(bytes: &[u8], dims: usize) -> Result<Head, ExtractError> {
        Head::from_reader(&reader_file(bytes)?, dims)
    }

    fn from_reader(vb: &VarBuilder<'static>, dims: usize) -> Result<Head, ExtractError> {
        let thresholds = vb
            .get(2, "thresholds")
            .and_then(|t| t.to_vec1::<f32>())
            .map_err(reader_error)?;
        let mut head = Head::new(vb.clone(), dims).map_err(reader_error)?;
        head.min_confidence = thresholds[0];
        head.min_sentence_score = thresholds[1];
        Ok(head)
    }

    /// The pair of thresholds a reader's file holds for reading after the rules, if any.
    pub fn after_rules_thresholds(bytes: &[u8]) -> Result<Option<(f32, f32)>, ExtractError> {
        Head::after_rules_thresholds_in(&reader_file(bytes)?)
    }

    fn after_rules_thresholds_in(vb: &VarBuilder) -> Result<Option<(f32, f32)>, ExtractError> {
        if !vb.contains_tensor(AFTER_RULES_THRESHOLDS) {
            return Ok(None);
        }
        let pair = vb
            .get(2, AFTER_RULES_THRESHOLDS)
            .and_then(|t| t.to_vec1::<f32>())
            .map_err(reader_error)?;
        Ok(Some((pair[0], pair[1])))
    }

    /// Tag logits of each row of word features ([`word_features`]: `[rows, WORD_CONTEXT ×
    /// dims]` → `[rows, TAGS]`).
    pub fn tag_logits(&self, states: &Tensor) -> candle_core::Result<Tensor> {
        self.tags.forward(&self.hidden.forward(states)?.relu()?)
    }

    /// The sentence logit of each row of `means` (`[rows, dims]` → `[rows]`).
    pub fn sentence_logits(&self, means: &Tensor) -> candle_core::Result<Tensor> {
        self.sentence.forward(means)?.squeeze(1)
    }

    /// The opinions of a reading, at most `max`, one a topic: spans confident enough, in a
    /// message likely to hold one, in a sentence that voices a view of the speaker's own. The
    /// head reads words, not a sentence's form, so a question ("Are you sick of super hero
    /// movies?"), a view reported or a hypothetical reads to it like a view stated; the labels
    /// hold none of these (`rules::not_the_speakers_view`). On the tuning sets' development
    /// sixth that check removed one to three wrong finds at every threshold and no right one.
    pub fn opinions(&self, message: &str, reading: &Reading, max: usize) -> Vec<ExtractedOpinion> {
        self.opinions_at(
            message,
            reading,
            max,
            (self.min_confidence, self.min_sentence_score),
        )
    }

    /// [`Head::opinions`] at another pair of thresholds (span confidence, sentence score).
    pub fn opinions_at(
        &self,
        message: &str,
        reading: &Reading,
        max: usize,
        (min_confidence, min_sentence_score): (f32, f32),
    ) -> Vec<ExtractedOpinion> {
        if reading.sentence_score < min_sentence_score {
            return Vec::new();
        }
        let mut found: Vec<ExtractedOpinion> = Vec::new();
        for span in &reading.spans {
            if found.len() == max {
                break;
            }
            if span.confidence < min_confidence {
                continue;
            }
            let Some(mut opinion) = opinion_of(message, span) else {
                continue;
            };
            // The head reads most views as held for; a denied liking, a fault or an
            // exception beside the span says otherwise ([`stance::cued_stance`]).
            if opinion.stance == Stance::For
                && stance::cued_stance(message, span.range.clone()) == Some(Stance::Against)
            {
                opinion.stance = Stance::Against;
            }
            if found.iter().any(|o| o.name == opinion.name)
                || super::rules::not_the_speakers_view(&opinion.evidence).is_some()
            {
                continue;
            }
            found.push(opinion);
        }
        found
    }

    /// The sentence score of a text whose mean state is `mean`: how likely it holds a view of
    /// the speaker's own.
    pub fn sentence_score(&self, mean: &[f32]) -> candle_core::Result<f32> {
        let mean = Tensor::from_vec(mean.to_vec(), (1, mean.len()), &Device::Cpu)?;
        let logit = self.sentence_logits(&mean)?.to_vec1::<f32>()?[0];
        Ok(1.0 / (1.0 + (-logit).exp()))
    }

    /// What the head reads in one message: its tagged spans and its sentence score.
    pub fn read(&self, text: &str, states: &TokenStates) -> candle_core::Result<Reading> {
        let device = Device::Cpu;
        let rows = word_features(states);
        let dims = states.mean.len();
        let words = states.first_token.len();
        let sentence_score = self.sentence_score(&states.mean)?;
        if words == 0 {
            return Ok(Reading {
                spans: Vec::new(),
                sentence_score,
            });
        }
        let logits = self.tag_logits(&Tensor::from_vec(
            rows,
            (words, WORD_CONTEXT * dims),
            &device,
        )?)?;
        let probabilities = candle_nn::ops::softmax(&logits, 1)?.to_vec2::<f32>()?;
        let tags: Vec<(u32, f32)> = probabilities
            .iter()
            .map(|p| {
                let (tag, confidence) = p
                    .iter()
                    .enumerate()
                    .max_by(|a, b| a.1.total_cmp(b.1))
                    .map(|(tag, confidence)| (tag as u32, *confidence))
                    .unwrap_or((OUTSIDE, 1.0));
                (tag, confidence)
            })
            .collect();
        Ok(Reading {
            spans: spans(text, &states.words, &tags),
            sentence_score,
        })
    }
}

/// The words beside a word whose states its features hold, by offset, in this order.
pub const NEIGHBOURS: [isize; 4] = [-1, 1, -2, 2];

/// How many states a word's features hold ([`word_features`]): its own, its neighbours', the
/// message's mean.
pub const WORD_CONTEXT: usize = NEIGHBOURS.len() + 2;

/// Each word's features, row after row: its first token's state, the states of the words
/// [`NEIGHBOURS`] away (zeros past the message's ends), and the message's mean state. A word's
/// own state alone tells "tea" in "I love tea" from "tea" in "she asked for tea" poorly: the
/// neighbours carry the verb and the determiner, the mean whether the message judges at all.
/// Measured on the development sixth (the same 1 345 utterances, thresholds by F0.5): the word
/// alone 0.711 / 0.268, ±1 word 0.798 / 0.350, ±2 0.832 / 0.436, ±3 0.755 / 0.500 (a lower
/// F0.5: 0.685 against ±2's 0.704).
pub fn word_features(states: &TokenStates) -> Vec<f32> {
    let dims = states.mean.len();
    let words = states.first_token.len();
    let zeros = vec![0.0f32; dims];
    let state_of = |word: Option<usize>| -> &[f32] {
        match word.and_then(|w| states.first_token.get(w)) {
            Some(&token) => &states.states[token],
            None => &zeros,
        }
    };
    let mut rows = Vec::with_capacity(words * WORD_CONTEXT * dims);
    for word in 0..words {
        rows.extend_from_slice(state_of(Some(word)));
        for offset in NEIGHBOURS {
            rows.extend_from_slice(state_of(word.checked_add_signed(offset)));
        }
        rows.extend_from_slice(&states.mean);
    }
    rows
}

/// What the head read in one message.
#[derive(Debug, Clone, PartialEq)]
pub struct Reading {
    pub spans: Vec<Span>,
    /// How likely the message holds an opinion at all, 0 to 1.
    pub sentence_score: f32,
}

/// A run of words tagged as one topic.
#[derive(Debug, Clone, PartialEq)]
pub struct Span {
    /// The words, as a byte range of the message.
    pub range: std::ops::Range<usize>,
    pub stance: Stance,
    /// The mean confidence of its words' tags.
    pub confidence: f32,
}

/// The spans of consecutive words tagged for one stance: a beginning tag (or an inside one
/// after an outside word) opens a span, inside tags of the same stance continue it.
pub fn spans(text: &str, words: &[std::ops::Range<usize>], tags: &[(u32, f32)]) -> Vec<Span> {
    let stance_of = |tag: u32| match tag {
        BEGIN_FOR | INSIDE_FOR => Some(Stance::For),
        BEGIN_AGAINST | INSIDE_AGAINST => Some(Stance::Against),
        _ => None,
    };
    let mut found: Vec<Span> = Vec::new();
    let mut open: Option<(usize, usize, Stance, f32)> = None;
    let close = |open: &mut Option<(usize, usize, Stance, f32)>, found: &mut Vec<Span>| {
        if let Some((first, last, stance, sum)) = open.take() {
            found.push(Span {
                range: words[first].start..words[last].end,
                stance,
                confidence: sum / (last - first + 1) as f32,
            });
        }
    };
    for (i, &(tag, confidence)) in tags.iter().enumerate().take(words.len()) {
        let stance = stance_of(tag);
        let continues = matches!(tag, INSIDE_FOR | INSIDE_AGAINST)
            && open.is_some_and(|(_, _, open_stance, _)| Some(open_stance) == stance);
        if continues {
            if let Some((_, last, _, sum)) = open.as_mut() {
                *last = i;
                *sum += confidence;
            }
            continue;
        }
        close(&mut open, &mut found);
        if let Some(stance) = stance {
            open = Some((i, i, stance, confidence));
        }
    }
    close(&mut open, &mut found);
    found.retain(|span| text.get(span.range.clone()).is_some());
    found
}

fn reader_error(e: candle_core::Error) -> ExtractError {
    ExtractError::Rejected(format!("learned reader: {e}"))
}

fn reader_file(bytes: &[u8]) -> Result<VarBuilder<'static>, ExtractError> {
    VarBuilder::from_buffered_safetensors(bytes.to_vec(), DType::F32, &Device::Cpu)
        .map_err(reader_error)
}

/// The low-rank additions to the model's last layer a reader's file holds (a reader trained
/// with [`adapted`]), by product: `(down, up)`, row-major. `None` for a head over the frozen
/// model, or for a reader whose additions change other layers too ([`ReaderAdditions`]).
pub fn last_layer_additions(bytes: &[u8]) -> Result<Option<LayerAdditions>, ExtractError> {
    Ok(match reader_additions_in(&reader_file(bytes)?)? {
        Some(ReaderAdditions::LastLayer(additions)) => Some(additions),
        _ => None,
    })
}

/// The low-rank additions a reader's file holds.
pub enum ReaderAdditions {
    /// To the model's last layer (`adapt.<product>.down`, `.up`): [`adapted`]'s training.
    LastLayer(LayerAdditions),
    /// To every layer from `first` on, by the layer's index in the model
    /// (`adapt.<layer>.<product>.down`, `.up`): `scripts/train-learned-reader`'s training.
    Layers {
        first: usize,
        additions: Vec<LayerAdditions>,
    },
}

/// The most layers a reader's file may name additions for.
const MOST_LAYERS: usize = 64;

fn reader_additions_in(vb: &VarBuilder) -> Result<Option<ReaderAdditions>, ExtractError> {
    if vb.contains_tensor("adapt.query.down") {
        return Ok(Some(ReaderAdditions::LastLayer(layer_additions_in(
            vb, "adapt",
        )?)));
    }
    let layers: Vec<usize> = (0..MOST_LAYERS)
        .filter(|layer| vb.contains_tensor(&format!("adapt.{layer}.query.down")))
        .collect();
    let (Some(&first), Some(&last)) = (layers.first(), layers.last()) else {
        return Ok(None);
    };
    if last - first + 1 != layers.len() {
        return Err(ExtractError::Rejected(format!(
            "learned reader: additions to layers {layers:?}, not to a run of layers"
        )));
    }
    let additions = layers
        .iter()
        .map(|layer| layer_additions_in(vb, &format!("adapt.{layer}")))
        .collect::<Result<_, _>>()?;
    Ok(Some(ReaderAdditions::Layers { first, additions }))
}

/// The additions stored under `prefix` (`<prefix>.<product>.down`, `.up`), one for each of
/// [`adapted::PRODUCTS`].
fn layer_additions_in(vb: &VarBuilder, prefix: &str) -> Result<LayerAdditions, ExtractError> {
    let mut additions = LayerAdditions::new();
    for name in adapted::PRODUCTS {
        let factor = |which: &str| {
            let tensor = vb
                .get_unchecked(&format!("{prefix}.{name}.{which}"))
                .map_err(reader_error)?;
            if tensor.rank() != 2 {
                return Err(ExtractError::Rejected(format!(
                    "learned reader: {prefix}.{name}.{which} is not a matrix"
                )));
            }
            tensor
                .flatten_all()
                .and_then(|t| t.to_vec1::<f32>())
                .map_err(reader_error)
        };
        additions.insert(name.to_string(), (factor("down")?, factor("up")?));
    }
    Ok(additions)
}

/// The model's layers with a reader file's additions merged in (`None` for a head over the
/// frozen model), refused where the additions do not name the model's last layers: what the
/// extractor reads through, and what [`training::calibrate`] chooses thresholds through.
fn changed_layers_in(
    model: &LocalEmbedder,
    file: &VarBuilder,
) -> Result<Option<ChangedLayers>, ExtractError> {
    let merged = |layers: Result<ChangedLayers, EmbedError>| {
        layers.map_err(|e| ExtractError::Rejected(format!("learned reader: {e}")))
    };
    match reader_additions_in(file)? {
        Some(ReaderAdditions::LastLayer(additions)) => {
            if model.layer_count() != Some(adapted::ADAPTED_LAYER + 1) {
                return Err(ExtractError::Rejected(format!(
                    "the learned reader was trained on a {}-layer model's last layer; this model has {:?} (or not the hand-written pass)",
                    adapted::ADAPTED_LAYER + 1,
                    model.layer_count()
                )));
            }
            merged(model.last_layer_with(&additions)).map(Some)
        }
        Some(ReaderAdditions::Layers { first, additions }) => {
            if model.layer_count() != Some(first + additions.len()) {
                return Err(ExtractError::Rejected(format!(
                    "the learned reader changes layers {first} to {} of its model; this model has {:?} layers (or not the hand-written pass)",
                    first + additions.len() - 1,
                    model.layer_count()
                )));
            }
            merged(model.last_layers_with(&additions)).map(Some)
        }
        None => Ok(None),
    }
}

/// Which of its reader's two pairs of thresholds a [`LearnedExtractor`] reads at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reads {
    /// Alone (`extract.kind = "learned"`): the pair with the best F0.5 on the training's
    /// development sixth.
    Alone,
    /// Where the rules found nothing (`rules_then_learned`): the pair with the most recall
    /// that kept the rules' precision on that sixth.
    AfterRules,
}

/// The learned extractor: the shipped reader (its head, and the additions to the model's last
/// layer it was trained with) over the local model.
#[derive(Clone)]
pub struct LearnedExtractor {
    model: Arc<LocalEmbedder>,
    head: Arc<Head>,
    /// The model's layers the reader's additions change, with them merged in, when it has any.
    changed_layers: Option<Arc<ChangedLayers>>,
    max_opinions: usize,
    /// Messages read in batches gathered across concurrent events ([`LearnedExtractor::batched`]);
    /// without it each message is read in a pass of its own.
    readings: Option<Arc<Batcher<Reading>>>,
}

impl LearnedExtractor {
    /// The shipped reader at its own thresholds.
    pub fn new(
        model: Arc<LocalEmbedder>,
        max_opinions: usize,
    ) -> Result<LearnedExtractor, ExtractError> {
        LearnedExtractor::from_file(model, max_opinions, SHIPPED_HEAD, Reads::Alone)
    }

    /// The shipped reader, reading where the rules found nothing.
    pub fn after_rules(
        model: Arc<LocalEmbedder>,
        max_opinions: usize,
    ) -> Result<LearnedExtractor, ExtractError> {
        LearnedExtractor::from_file(model, max_opinions, SHIPPED_HEAD, Reads::AfterRules)
    }

    /// A reader from its file (the training's output): `reads` picks its thresholds; a file
    /// without a pair for after the rules reads at its own there too.
    pub fn from_file(
        model: Arc<LocalEmbedder>,
        max_opinions: usize,
        bytes: &[u8],
        reads: Reads,
    ) -> Result<LearnedExtractor, ExtractError> {
        let file = reader_file(bytes)?;
        let dims = model.hidden_size();
        let trained_over = file
            .get_unchecked_dtype("sentence.weight", DType::F32)
            .map_err(reader_error)?
            .dims()
            .to_vec();
        if trained_over != [1, dims] {
            return Err(ExtractError::Rejected(format!(
                "the learned reader reads {}-wide states, its encoder gives {dims}: a reader \
                 runs over the encoder it was trained over (extract.learned_encoder_dir)",
                trained_over.last().copied().unwrap_or(0)
            )));
        }
        let mut head = Head::from_reader(&file, dims)?;
        if reads == Reads::AfterRules
            && let Some((confidence, sentence)) = Head::after_rules_thresholds_in(&file)?
        {
            head.min_confidence = confidence;
            head.min_sentence_score = sentence;
        }
        let changed_layers = changed_layers_in(&model, &file)?.map(Arc::new);
        Ok(LearnedExtractor {
            head: Arc::new(head),
            changed_layers,
            model,
            max_opinions,
            readings: None,
        })
    }

    /// The same reader, reading messages in batches of up to `max_batch` gathered across
    /// concurrent callers, as the embedder's batcher gathers topics; the readings are the same
    /// bit for bit. On plain chat lines of 12–15 words (benches/ingest.rs, run 7) an event cost
    /// the worker about 12 ms of CPU on this 2-core machine read alone, about 5.3 batched.
    /// Starts the batching task on the current runtime.
    pub fn batched(mut self, max_batch: usize) -> LearnedExtractor {
        let alone = self.clone();
        self.readings = Some(Arc::new(Batcher::new(
            Arc::new(Readings(alone)),
            max_batch,
            std::time::Duration::ZERO,
        )));
        self
    }

    /// The thresholds it reads at (span confidence, sentence score).
    pub fn thresholds(&self) -> (f32, f32) {
        (self.head.min_confidence, self.head.min_sentence_score)
    }

    /// What the reader reads in `message`: in a batch with other callers' messages when
    /// [`LearnedExtractor::batched`], in a pass of its own otherwise.
    pub async fn read(&self, message: &str) -> Result<Reading, ExtractError> {
        let texts = [message.to_string()];
        let mut readings = match &self.readings {
            Some(batcher) => batcher
                .read(&texts)
                .await
                .map_err(|e| ExtractError::Rejected(format!("learned extractor: {e}")))?,
            None => self.read_many(texts.to_vec()).await?,
        };
        readings
            .pop()
            .ok_or_else(|| ExtractError::Rejected("learned extractor: no reading".into()))
    }

    /// What the reader reads in each of `messages`, in one pass of the model (CPU work on the
    /// blocking pool).
    pub async fn read_many(&self, messages: Vec<String>) -> Result<Vec<Reading>, ExtractError> {
        let (model, head, changed_layers) = (
            self.model.clone(),
            self.head.clone(),
            self.changed_layers.clone(),
        );
        let failed = |e: String| ExtractError::Rejected(format!("learned extractor: {e}"));
        tokio::task::spawn_blocking(move || {
            let states = model
                .token_states_many(&messages, changed_layers.as_deref())
                .map_err(|e| failed(e.to_string()))?;
            // The head's tagging of each message, side by side on the model's threads: one
            // after another, it left a core idle after every batch's pass.
            messages
                .par_iter()
                .zip(&states)
                .map(|(text, states)| head.read(text, states).map_err(|e| failed(e.to_string())))
                .collect()
        })
        .await
        .map_err(|e| ExtractError::Rejected(format!("learned extractor task: {e}")))?
    }

    /// The sentence score of each of `texts`, read together in one pass of the model (CPU
    /// work on the blocking pool): what [`CheckedRules`] needs, without the tags.
    pub async fn sentence_scores(&self, texts: Vec<String>) -> Result<Vec<f32>, ExtractError> {
        let (model, head, changed_layers) = (
            self.model.clone(),
            self.head.clone(),
            self.changed_layers.clone(),
        );
        let failed = |e: String| ExtractError::Rejected(format!("learned extractor: {e}"));
        tokio::task::spawn_blocking(move || {
            let means = model
                .mean_states(&texts, changed_layers.as_deref())
                .map_err(|e| failed(e.to_string()))?;
            means
                .iter()
                .map(|mean| head.sentence_score(mean).map_err(|e| failed(e.to_string())))
                .collect()
        })
        .await
        .map_err(|e| ExtractError::Rejected(format!("learned extractor task: {e}")))?
    }

    /// The opinions of a reading ([`Head::opinions`]).
    pub fn opinions(&self, message: &str, reading: &Reading) -> Vec<ExtractedOpinion> {
        self.head.opinions(message, reading, self.max_opinions)
    }

    /// The opinions of a reading at another pair of thresholds ([`Head::opinions_at`]).
    pub fn opinions_at(
        &self,
        message: &str,
        reading: &Reading,
        thresholds: (f32, f32),
    ) -> Vec<ExtractedOpinion> {
        self.head
            .opinions_at(message, reading, self.max_opinions, thresholds)
    }
}

/// The learned reader's readings as batch work (unbatched itself: its own reads go straight to
/// the model).
struct Readings(LearnedExtractor);

impl BatchWork for Readings {
    type Answer = Reading;

    fn read<'a>(&'a self, texts: &'a [String]) -> BoxFuture<'a, Result<Vec<Reading>, EmbedError>> {
        Box::pin(async move {
            self.0
                .read_many(texts.to_vec())
                .await
                .map_err(|e| EmbedError::Model(e.to_string()))
        })
    }
}

/// The opinion a span names: its words as the topic (lower case, punctuation around them and
/// a leading article left out), the sentence it is in as evidence and opinion.
fn opinion_of(message: &str, span: &Span) -> Option<ExtractedOpinion> {
    let words: Vec<String> = message[span.range.clone()]
        .split_whitespace()
        .map(|w| {
            w.trim_matches(|c: char| !c.is_alphanumeric() && c != '\'')
                .to_lowercase()
        })
        .filter(|w| !w.is_empty())
        .collect();
    let words: Vec<String> = match words.split_first() {
        Some((first, rest))
            if ["the", "a", "an", "my"].contains(&first.as_str()) && !rest.is_empty() =>
        {
            rest.to_vec()
        }
        _ => words,
    };
    let topic = words.join(" ");
    if topic.chars().filter(|c| c.is_alphanumeric()).count() < 2 {
        return None;
    }
    let sentence = sentence_around(message, span.range.clone());
    Some(ExtractedOpinion {
        category: super::rules::category_for(&topic).to_string(),
        opinion: sentence.to_string(),
        name: topic,
        stance: span.stance,
        strength: 0.6,
        related_user_ids: Vec::new(),
        evidence: sentence.to_string(),
        found_by: Some("learned".to_string()),
    })
}

/// The sentence of `message` that holds `range`, trimmed: verbatim, so it is evidence.
fn sentence_around(message: &str, range: std::ops::Range<usize>) -> &str {
    let is_end = |c: char| matches!(c, '.' | '!' | '?' | '\n');
    let start = message[..range.start].rfind(is_end).map_or(0, |at| at + 1);
    let end = message[range.end..]
        .find(is_end)
        .map_or(message.len(), |at| range.end + at + 1);
    message[start..end].trim()
}

impl Extractor for LearnedExtractor {
    fn extract<'a>(
        &'a self,
        input: &'a ExtractionInput<'a>,
    ) -> BoxFuture<'a, Result<Vec<ExtractedOpinion>, ExtractError>> {
        Box::pin(async move {
            let reading = self.read(input.persona_message).await?;
            Ok(self.opinions(input.persona_message, &reading))
        })
    }
}

/// The rules' findings, each kept only where the learned reader's sentence score of the
/// sentence it was found in is at least `min_sentence_score`
/// (`extract.rules_min_sentence_score`; 0 keeps them all and reads nothing more). The rules
/// read phrasings; the score reads the whole sentence, trained on which messages hold a view of
/// the speaker's own, so it tells "it was nice meeting you" or "everything canadian is nice"
/// from a view where no phrasing does. Only messages the rules find something in are read, most
/// chat messages not at all.
///
/// Each finding is judged by its own sentence, read alone, not by the message it sits in: in
/// "Writing the code, yes. I love hiking." the score of the whole message is lifted by the
/// second sentence and would keep a find in the first. On the fourth chat tuning set, at the
/// value each way chose (the highest costing at most 0.02 recall), the message's score read
/// 0.853 / 0.386, the sentence's 0.872 / 0.384; on the development set 0.874 / 0.460 and
/// 0.890 / 0.461. A finding whose evidence is the whole message, or is not quoted from it (a
/// view of the addressee rewritten), is judged by the message's score.
///
/// With a word score ([`CheckedRules::with_word_score`], the default from config), a finding
/// whose sentence the word score is sure of is kept without the model: on the fourth chat set
/// the model then read 257 of 443 findings for the same figures, on the persona tuning set 1
/// of 507.
pub struct CheckedRules {
    pub rules: super::rules::RulesExtractor,
    /// Its sentence score is the check (and, after the rules, its own findings are read).
    pub learned: LearnedExtractor,
    /// Set once, by `new`: the batcher exists only when it is above 0.
    min_sentence_score: f32,
    /// The scores, read in batches gathered across concurrent events (none when the check is
    /// off: nothing to read).
    scores: Option<Batcher<f32>>,
    /// Findings whose sentence's word score is at least the value are kept without reading
    /// the model ([`CheckedRules::with_word_score`]).
    words: Option<(word_score::WordScore, f32)>,
    /// Findings judged, and of them those the model read: what the word score saved.
    judged: AtomicUsize,
    read_by_the_model: AtomicUsize,
}

/// How many texts the learned reader reads in one pass of the model (the check's sentences, or
/// whole messages where the rules find nothing), gathered across concurrent events as the
/// embedder's batcher gathers topics (`embed.max_batch`'s default). Read one by one, a short
/// sentence cost the worker about 14 ms of CPU on this 2-core machine, against about 2.6 ms a
/// text in batches of 32 (benches/ingest.rs).
pub const READ_BATCH: usize = 32;

/// The learned sentence score as batch work, so that the check's reads are gathered across
/// concurrent events as embeddings are.
struct SentenceScorer(LearnedExtractor);

impl BatchWork for SentenceScorer {
    type Answer = f32;

    fn read<'a>(&'a self, texts: &'a [String]) -> BoxFuture<'a, Result<Vec<f32>, EmbedError>> {
        Box::pin(async move {
            self.0
                .sentence_scores(texts.to_vec())
                .await
                .map_err(|e| EmbedError::Model(e.to_string()))
        })
    }
}

impl CheckedRules {
    /// The check at `min_sentence_score` (0: none), the model reading every finding. Starts
    /// the check's batching task on the current runtime when the check is on.
    pub fn new(
        rules: super::rules::RulesExtractor,
        learned: LearnedExtractor,
        min_sentence_score: f32,
    ) -> CheckedRules {
        let scores = (min_sentence_score > 0.0).then(|| {
            Batcher::new(
                Arc::new(SentenceScorer(learned.clone())),
                READ_BATCH,
                std::time::Duration::ZERO,
            )
        });
        CheckedRules {
            rules,
            learned,
            min_sentence_score,
            scores,
            words: None,
            judged: AtomicUsize::new(0),
            read_by_the_model: AtomicUsize::new(0),
        }
    }

    /// Keeps a finding whose sentence's word score (`words`) is at least `keeps_at` without
    /// reading the model; the model judges the rest (`extract.rules_check_keeps_at_word_score`;
    /// 1 or more: the model reads every finding).
    pub fn with_word_score(mut self, words: word_score::WordScore, keeps_at: f32) -> CheckedRules {
        self.words = (keeps_at < 1.0).then_some((words, keeps_at));
        self
    }

    /// Findings the check has judged, and how many of them the model read.
    pub fn reads(&self) -> (usize, usize) {
        (
            self.judged.load(Ordering::Relaxed),
            self.read_by_the_model.load(Ordering::Relaxed),
        )
    }

    /// The rules' findings that pass the check.
    async fn checked(
        &self,
        input: &ExtractionInput<'_>,
    ) -> Result<Vec<ExtractedOpinion>, ExtractError> {
        let ruled = self.rules.extract(input).await?;
        let Some(scores) = &self.scores else {
            return Ok(ruled);
        };
        if ruled.is_empty() {
            return Ok(ruled);
        }
        let message = input.persona_message;
        // The text each finding is judged by; several findings often share a sentence, and
        // the batcher reads each distinct text once.
        let judged: Vec<String> = ruled
            .iter()
            .map(|opinion| word_score::judged_text(message, opinion))
            .collect();
        // Findings the word score is sure of are kept as they are; the model reads the rest.
        let sure: Vec<bool> = judged
            .iter()
            .map(|text| {
                self.words
                    .as_ref()
                    .is_some_and(|(words, keeps_at)| words.score(text) >= *keeps_at)
            })
            .collect();
        let unsure: Vec<String> = judged
            .into_iter()
            .zip(&sure)
            .filter(|(_, sure)| !**sure)
            .map(|(text, _)| text)
            .collect();
        self.judged.fetch_add(sure.len(), Ordering::Relaxed);
        self.read_by_the_model
            .fetch_add(unsure.len(), Ordering::Relaxed);
        crate::telemetry::rules_checked(sure.len() - unsure.len(), unsure.len());
        let mut read = if unsure.is_empty() {
            Vec::new()
        } else {
            scores
                .read(&unsure)
                .await
                .map_err(|e| ExtractError::Rejected(format!("the check on the rules: {e}")))?
        }
        .into_iter();
        Ok(ruled
            .into_iter()
            .zip(sure)
            .filter(|(_, sure)| {
                *sure
                    || read
                        .next()
                        .is_some_and(|score| score >= self.min_sentence_score)
            })
            .map(|(opinion, _)| opinion)
            .collect())
    }
}

impl Extractor for CheckedRules {
    fn extract<'a>(
        &'a self,
        input: &'a ExtractionInput<'a>,
    ) -> BoxFuture<'a, Result<Vec<ExtractedOpinion>, ExtractError>> {
        Box::pin(self.checked(input))
    }
}

/// The rules first (checked, when `extract.rules_min_sentence_score` asks), the learned
/// extractor where they find nothing: the rules' precision where they read something, the
/// learned recall where they read nothing. The reader here is the rules' check's.
///
/// Where the rules do find something, the reader's own finds can be kept beside theirs
/// (`beside_rules`, a stricter span confidence than after the rules): a message often voices
/// two views, and the rules read one ("I love the beach, and honestly hiking bores me").
pub struct RulesThenLearned {
    pub rules: CheckedRules,
    /// The least span confidence of a reader's find kept beside the rules' findings; `None`:
    /// where the rules find something, only their findings (`extract.learned_beside_rules_min_confidence`).
    pub beside_rules: Option<f32>,
    /// Where the rules find nothing, the reader reads the message only when the word score of
    /// one of its sentences reaches the value (`extract.learned_word_gate`); `None`: always.
    /// The reader's pass is what a message costs there (about 7 × the rules on real chat),
    /// and the word score costs microseconds.
    pub word_gate: Option<(word_score::WordScore, f32)>,
}

impl RulesThenLearned {
    /// Whether the word gate lets the reader read `message` (always, without a gate).
    pub fn passes_word_gate(&self, message: &str) -> bool {
        let Some((words, min_score)) = &self.word_gate else {
            return true;
        };
        crate::extract::rules::sentences(message)
            .iter()
            .any(|sentence| words.score(sentence) >= *min_score)
    }
}

impl Extractor for RulesThenLearned {
    fn extract<'a>(
        &'a self,
        input: &'a ExtractionInput<'a>,
    ) -> BoxFuture<'a, Result<Vec<ExtractedOpinion>, ExtractError>> {
        Box::pin(async move {
            let ruled = self.rules.checked(input).await?;
            if ruled.is_empty() {
                if !self.passes_word_gate(input.persona_message) {
                    return Ok(Vec::new());
                }
                return self.rules.learned.extract(input).await;
            }
            let Some(min_confidence) = self.beside_rules else {
                return Ok(ruled);
            };
            let learned = &self.rules.learned;
            let reading = learned.read(input.persona_message).await?;
            let (_, min_sentence_score) = learned.thresholds();
            let beside = learned.opinions_at(
                input.persona_message,
                &reading,
                (min_confidence, min_sentence_score),
            );
            Ok(beside_the_rules(ruled, beside, learned.max_opinions))
        })
    }
}

/// The rules' findings, then the reader's finds on topics the rules did not name
/// (`model::topic::overlaps`: "tea" beside "green tea" is one view read twice), at most `max`
/// in all. Pure.
pub fn beside_the_rules(
    ruled: Vec<ExtractedOpinion>,
    learned: Vec<ExtractedOpinion>,
    max: usize,
) -> Vec<ExtractedOpinion> {
    let mut kept = ruled;
    for opinion in learned {
        if kept.len() >= max {
            break;
        }
        let named = kept
            .iter()
            .any(|r| crate::model::topic::overlaps(&r.name, &opinion.name));
        if !named {
            kept.push(opinion);
        }
    }
    kept
}

/// Which persona messages are worth a model's time: those the rules read an opinion in, and
/// those the learned sentence score rates at least `min_score`. Most chat messages hold no
/// opinion, and each model call costs seconds on a local server and money on a hosted one.
pub struct Gate {
    pub rules: super::rules::RulesExtractor,
    pub learned: LearnedExtractor,
    pub min_score: f32,
}

impl Gate {
    /// Whether `input` goes to the model.
    pub async fn passes(&self, input: &ExtractionInput<'_>) -> Result<bool, ExtractError> {
        if !self.rules.extract(input).await?.is_empty() {
            return Ok(true);
        }
        Ok(self
            .learned
            .read(input.persona_message)
            .await?
            .sentence_score
            >= self.min_score)
    }
}

/// An extractor (the LLM) asked only about the messages its [`Gate`] passes.
pub struct Gated {
    pub gate: Gate,
    pub inner: Arc<dyn Extractor>,
}

impl Extractor for Gated {
    fn extract<'a>(
        &'a self,
        input: &'a ExtractionInput<'a>,
    ) -> BoxFuture<'a, Result<Vec<ExtractedOpinion>, ExtractError>> {
        Box::pin(async move {
            let passes = self.gate.passes(input).await?;
            crate::telemetry::extraction_gated(passes);
            if !passes {
                return Ok(Vec::new());
            }
            self.inner.extract(input).await
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(name: &str) -> ExtractedOpinion {
        ExtractedOpinion {
            name: name.into(),
            opinion: String::new(),
            category: String::new(),
            stance: crate::model::Stance::For,
            strength: 0.5,
            related_user_ids: Vec::new(),
            evidence: String::new(),
            found_by: None,
        }
    }

    #[test]
    fn the_readers_finds_beside_the_rules_add_only_topics_the_rules_did_not_name() {
        // (the rules' topics, the reader's, the cap, what is kept)
        type Row = (
            &'static [&'static str],
            &'static [&'static str],
            usize,
            &'static [&'static str],
        );
        let table: [Row; 6] = [
            (&["beach"], &["hiking"], 8, &["beach", "hiking"]),
            // The same topic once normalised, or one named inside the other: one view.
            (&["the beach"], &["Beaches"], 8, &["the beach"]),
            (
                &["green tea"],
                &["tea", "green tea in the morning"],
                8,
                &["green tea"],
            ),
            // The rules' findings come first and are never displaced by the cap.
            (&["a", "b"], &["c", "d"], 3, &["a", "b", "c"]),
            (&["a", "b"], &["c"], 2, &["a", "b"]),
            // Two finds of the reader's on one new topic: the first is kept.
            (&["beach"], &["jazz", "Jazz"], 8, &["beach", "jazz"]),
        ];
        for (ruled, learned, max, kept) in table {
            let got = beside_the_rules(
                ruled.iter().map(|n| found(n)).collect(),
                learned.iter().map(|n| found(n)).collect(),
                max,
            );
            let names: Vec<&str> = got.iter().map(|o| o.name.as_str()).collect();
            assert_eq!(
                names, kept,
                "rules {ruled:?}, reader {learned:?}, at most {max}"
            );
        }
    }

    #[test]
    fn a_words_features_are_its_state_its_neighbours_and_the_mean() {
        // Three words, two dims: word w's state is [w + 1, w + 1]; the mean is [9, 9].
        let states = TokenStates {
            words: vec![0..1, 2..3, 4..5],
            first_token: vec![1, 2, 3],
            states: (0..5).map(|t| vec![t as f32; 2]).collect(),
            mean: vec![9.0, 9.0],
        };
        let rows = word_features(&states);
        let width = WORD_CONTEXT * 2;
        assert_eq!(rows.len(), 3 * width);
        let blocks = |word: usize| -> Vec<f32> {
            rows[word * width..(word + 1) * width]
                .chunks(2)
                .map(|block| block[0])
                .collect()
        };
        // own, -1, +1, -2, +2, mean; zeros past either end.
        assert_eq!(blocks(0), vec![1.0, 0.0, 2.0, 0.0, 3.0, 9.0]);
        assert_eq!(blocks(1), vec![2.0, 1.0, 3.0, 0.0, 0.0, 9.0]);
        assert_eq!(blocks(2), vec![3.0, 2.0, 0.0, 1.0, 0.0, 9.0]);
    }

    #[test]
    fn spans_follow_the_tags_of_consecutive_words() {
        let text = "I really love green tea but hate crowds";
        let words: Vec<std::ops::Range<usize>> = {
            let mut at = 0;
            text.split(' ')
                .map(|w| {
                    let range = at..at + w.len();
                    at += w.len() + 1;
                    range
                })
                .collect()
        };
        let o = (OUTSIDE, 0.9);
        let tags = vec![
            o,
            o,
            o,
            (BEGIN_FOR, 0.8),
            (INSIDE_FOR, 0.6),
            o,
            o,
            (INSIDE_AGAINST, 0.7),
        ];
        let found = spans(text, &words, &tags);
        assert_eq!(found.len(), 2);
        assert_eq!(&text[found[0].range.clone()], "green tea");
        assert_eq!(found[0].stance, Stance::For);
        assert!((found[0].confidence - 0.7).abs() < 1e-6);
        assert_eq!(
            &text[found[1].range.clone()],
            "crowds",
            "an inside tag after outside opens"
        );
        assert_eq!(found[1].stance, Stance::Against);
    }

    #[test]
    fn an_opinion_quotes_its_sentence_and_names_its_words() {
        let message = "Hi there. I think the green tea here is lovely! Bye.";
        let start = message.find("the green").unwrap();
        let span = Span {
            range: start..start + "the green tea".len(),
            stance: Stance::For,
            confidence: 0.9,
        };
        let opinion = opinion_of(message, &span).unwrap();
        assert_eq!(opinion.name, "green tea");
        assert_eq!(opinion.evidence, "I think the green tea here is lovely!");
        assert!(super::super::evidence_in_message(
            &opinion.evidence,
            message
        ));
    }

    #[test]
    fn the_shipped_head_loads_with_its_thresholds() {
        let head = Head::shipped(crate::embed::LOCAL_DIMS).unwrap();
        assert!((0.0..=1.0).contains(&head.min_confidence));
        assert!((0.0..=1.0).contains(&head.min_sentence_score));
    }
}
