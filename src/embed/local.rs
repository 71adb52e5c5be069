//! all-MiniLM-L6-v2 with candle: BERT forward pass, mean pooling over real tokens, L2
//! normalisation. 384 dimensions. CPU-bound work runs on the blocking pool.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

pub use candle_core::DType;
use candle_core::{Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config as BertConfig};
use futures::future::BoxFuture;
use tokenizers::{PaddingParams, PaddingStrategy, Tokenizer, TruncationParams};

use super::fast_bert::{BertError, ChangedLayers, EncoderConfig, FastBert, Precision};
use super::quantized_bert::QuantisedBert;
use super::{EmbedError, Embedder, LOCAL_DIMS, normalise};
use crate::telemetry;
use crate::text::truncate_chars;

/// How the model is loaded. The defaults are what the service runs; the other values are the
/// speed levers `benches/models.rs` measures.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LocalOptions {
    /// Tokens read per text; sentence-transformers used 256 for MiniLM. Only texts longer
    /// than this are affected (batches are padded to their longest text, not to this).
    pub max_tokens: usize,
    /// The weights' and activations' type. F16 and BF16 halve the memory read per matrix
    /// product; whether that is faster on a CPU without native half-precision arithmetic is
    /// for the bench to say.
    pub dtype: DType,
    /// Matrix weights quantised to 8 bits when loaded (`quantized_bert.rs`); `dtype` then
    /// applies to nothing (the rest stays F32).
    pub quantised: bool,
    /// Texts go through the hand-written forward pass (`fast_bert.rs`), each at its own length
    /// with a batch's tokens stacked, instead of through candle in padded batches. Same
    /// vectors; `false` keeps candle, which `benches/models.rs` measures beside it. Only for
    /// F32 weights: the quantised and half-precision levers are candle's.
    pub hand_written: bool,
    /// Threads one text's matrix products may share in the hand-written pass.
    pub threads: usize,
    /// Also keep the dense layers' weights as 8-bit integers (`crates/int8`, 10.5 MB more) for
    /// [`LocalEmbedder::for_queries`]. Hand-written pass only.
    pub int8_queries: bool,
    /// The 8-bit products' kernel (`None`: the fastest this CPU has). All give the same
    /// vectors; `benches/int8_products.rs` sets it to time one against another.
    pub int8_kernel: Option<persona_prefs_int8::Kernel>,
}

impl Default for LocalOptions {
    fn default() -> LocalOptions {
        LocalOptions {
            max_tokens: 256,
            dtype: DType::F32,
            quantised: false,
            hand_written: true,
            threads: std::thread::available_parallelism().map_or(1, |n| n.get().min(4)),
            int8_queries: true,
            int8_kernel: None,
        }
    }
}

pub struct LocalEmbedder {
    inner: Arc<Model>,
    max_input_chars: usize,
    /// The dense layers' arithmetic: F32 for everything stored, 8-bit for search queries.
    precision: Precision,
}

struct Model {
    bert: Network,
    tokenizer: Tokenizer,
    device: Device,
}

/// The BERT that runs: candle's, in the loaded dtype, or the 8-bit one; or the hand-written
/// pass, which reads token ids rather than tensors (`embed_batch` and `token_states` call it
/// directly).
enum Network {
    Full(BertModel),
    Quantised(QuantisedBert),
    HandWritten(FastBert),
}

impl Network {
    fn forward(
        &self,
        input_ids: &Tensor,
        token_type_ids: &Tensor,
        attention_mask: &Tensor,
    ) -> candle_core::Result<Tensor> {
        match self {
            Network::Full(bert) => bert.forward(input_ids, token_type_ids, Some(attention_mask)),
            Network::Quantised(bert) => bert.forward(input_ids, token_type_ids, attention_mask),
            Network::HandWritten(_) => Err(candle_core::Error::Msg(
                "the hand-written pass reads token ids, not tensors".into(),
            )),
        }
    }
}

impl LocalEmbedder {
    /// Loads `config.json`, `tokenizer.json` and `model.safetensors` from `dir`.
    pub fn load(dir: &Path, max_input_chars: usize) -> Result<LocalEmbedder, EmbedError> {
        LocalEmbedder::load_with(dir, max_input_chars, LocalOptions::default())
    }

    /// [`LocalEmbedder::load`] with other [`LocalOptions`].
    pub fn load_with(
        dir: &Path,
        max_input_chars: usize,
        options: LocalOptions,
    ) -> Result<LocalEmbedder, EmbedError> {
        let file = |name: &str| {
            let path = dir.join(name);
            if path.is_file() {
                Ok(path)
            } else {
                Err(EmbedError::Model(format!(
                    "{} not found (set embed.model_dir or PERSONA_PREFS_MODEL_DIR; scripts/services fetch unpacks the model)",
                    path.display()
                )))
            }
        };
        let config_text = std::fs::read_to_string(file("config.json")?)
            .map_err(|e| EmbedError::Model(e.to_string()))?;
        let encoder: EncoderConfig = serde_json::from_str(&config_text)
            .map_err(|e| EmbedError::Model(format!("config.json: {e}")))?;
        let mut tokenizer = Tokenizer::from_file(file("tokenizer.json")?)
            .map_err(|e| EmbedError::Model(format!("tokenizer.json: {e}")))?;
        tokenizer.with_padding(Some(PaddingParams {
            strategy: PaddingStrategy::BatchLongest,
            ..Default::default()
        }));
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: options.max_tokens,
                ..Default::default()
            }))
            .map_err(|e| EmbedError::Model(format!("tokenizer truncation: {e}")))?;
        let device = Device::Cpu;
        let weights = file("model.safetensors")?;
        if options.hand_written && !options.quantised && options.dtype == DType::F32 {
            let mut bert = FastBert::load(&weights, &encoder, options.threads)
                .map_err(|e| EmbedError::Model(format!("loading BERT: {e}")))?;
            if options.int8_queries {
                bert = bert
                    .with_int8(options.int8_kernel)
                    .map_err(|e| EmbedError::Model(format!("loading BERT: {e}")))?;
            }
            return Ok(LocalEmbedder {
                inner: Arc::new(Model {
                    bert: Network::HandWritten(bert),
                    tokenizer,
                    device,
                }),
                max_input_chars,
                precision: Precision::Full,
            });
        }
        if encoder.is_mpnet() {
            return Err(EmbedError::Model(
                "MPNet runs only through the hand-written F32 pass (the default load)".into(),
            ));
        }
        let config: BertConfig = serde_json::from_str(&config_text)
            .map_err(|e| EmbedError::Model(format!("config.json: {e}")))?;
        // SAFETY: the weights file is memory-mapped read-only; nothing in this process writes it.
        let dtype = if options.quantised {
            DType::F32
        } else {
            options.dtype
        };
        let vb = unsafe { VarBuilder::from_mmaped_safetensors(&[weights], dtype, &device) }
            .map_err(|e| EmbedError::Model(format!("model.safetensors: {e}")))?;
        let bert = if options.quantised {
            Network::Quantised(
                QuantisedBert::load(vb, &config)
                    .map_err(|e| EmbedError::Model(format!("quantising BERT: {e}")))?,
            )
        } else {
            Network::Full(
                BertModel::load(vb, &config)
                    .map_err(|e| EmbedError::Model(format!("loading BERT: {e}")))?,
            )
        };
        Ok(LocalEmbedder {
            inner: Arc::new(Model {
                bert,
                tokenizer,
                device,
            }),
            max_input_chars,
            precision: Precision::Full,
        })
    }

    /// The same model for search queries (injection and search text): the dense layers in
    /// 8-bit integers when it was loaded with them (`LocalOptions.int8_queries`), which
    /// embeds a short text about twice as fast. Never for anything stored: preferences'
    /// vectors, and the find_conflicts queries that compare against them, stay F32, so what
    /// memory holds does not depend on this. A query vector is within cosine 0.99 of the F32
    /// one (`tests/topic_matching.rs`), and the injection set's recall is unchanged
    /// (`benches/models.rs`). Without the 8-bit weights this is the F32 model.
    pub fn for_queries(&self) -> LocalEmbedder {
        let quantised = matches!(&self.inner.bert, Network::HandWritten(bert) if bert.has_int8());
        LocalEmbedder {
            inner: self.inner.clone(),
            max_input_chars: self.max_input_chars,
            precision: if quantised {
                Precision::Int8
            } else {
                Precision::Full
            },
        }
    }
}

/// One text read by the model, token by token: what a tagger over its words needs.
#[derive(Debug, Clone)]
pub struct TokenStates {
    /// The words the tokenizer split the text into, as byte ranges of the text.
    pub words: Vec<std::ops::Range<usize>>,
    /// For each word, the row of `states` of its first token.
    pub first_token: Vec<usize>,
    /// The model's last hidden state of every token (special tokens included), `dims` each.
    pub states: Vec<Vec<f32>>,
    /// The mean of the states over every token: the text's embedding before normalising.
    pub mean: Vec<f32>,
}

impl LocalEmbedder {
    /// `text` read by the model token by token (synchronous: CPU work; call it from a blocking
    /// task). Long texts are cut as the embedder cuts them.
    pub fn token_states(&self, text: &str) -> Result<TokenStates, EmbedError> {
        self.inner
            .token_states(&truncate_chars(text, self.max_input_chars), Pass::Every)
    }

    /// The model's last layer with low-rank additions merged into its dense weights:
    /// [`LocalEmbedder::last_layers_with`] for one layer.
    pub fn last_layer_with(&self, additions: &LayerAdditions) -> Result<ChangedLayers, EmbedError> {
        self.last_layers_with(std::slice::from_ref(additions))
    }

    /// The model's last `additions.len()` layers with low-rank additions merged into their
    /// dense weights, one map a layer in the model's order: each maps a product's name
    /// ([`FastBert::changed_last_layers`]) to its two factors, `down` (`rank × inputs`) and `up`
    /// (`outputs × rank`), row-major; the weight becomes `W + up · down`. Needs the
    /// hand-written pass, which the default load gives.
    pub fn last_layers_with(
        &self,
        additions: &[LayerAdditions],
    ) -> Result<ChangedLayers, EmbedError> {
        let Network::HandWritten(bert) = &self.inner.bert else {
            return Err(EmbedError::Model(
                "changed layers need the hand-written pass (the default load)".into(),
            ));
        };
        let first = bert
            .layer_count()
            .checked_sub(additions.len())
            .ok_or_else(|| {
                EmbedError::Model(format!(
                    "additions for {} layers; the model has {}",
                    additions.len(),
                    bert.layer_count()
                ))
            })?;
        // Only a view that reads in 8 bits gets (and pays for) the changed layers' 8-bit copy.
        bert.changed_last_layers(
            additions.len(),
            self.precision,
            |layer, name, weight, outputs, inputs| {
                let (down, up) = additions[layer - first]
                    .get(name)
                    .ok_or_else(|| BertError(format!("no addition for layer {layer}'s {name}")))?;
                if inputs == 0 || down.len() % inputs != 0 {
                    return Err(BertError(format!(
                        "{name}: its down factor is not rank × {inputs}"
                    )));
                }
                let rank = down.len() / inputs;
                if up.len() != outputs * rank {
                    return Err(BertError(format!(
                        "{name}: its up factor is not {outputs} × {rank}"
                    )));
                }
                for (row, weights) in weight.chunks_exact_mut(inputs).enumerate() {
                    let up_row = &up[row * rank..(row + 1) * rank];
                    for (r, &u) in up_row.iter().enumerate() {
                        let down_row = &down[r * inputs..(r + 1) * inputs];
                        for (w, &d) in weights.iter_mut().zip(down_row) {
                            *w += u * d;
                        }
                    }
                }
                Ok(())
            },
        )
        .map_err(|e| EmbedError::Model(format!("changing the last layers: {e}")))
    }

    /// [`LocalEmbedder::token_states`] with `last` in place of the model's last layers.
    pub fn token_states_with_last(
        &self,
        text: &str,
        last: &ChangedLayers,
    ) -> Result<TokenStates, EmbedError> {
        self.inner.token_states(
            &truncate_chars(text, self.max_input_chars),
            Pass::WithLast(last),
        )
    }

    /// [`LocalEmbedder::token_states`] (through `last` in place of the last layer when given)
    /// for several texts in one pass, as [`Embedder::embed`] batches them: the same states as
    /// each text read alone, bit for bit, at a batch's cost a text. On a
    /// [`LocalEmbedder::for_queries`] view of a model loaded with its 8-bit weights, the pass
    /// runs in 8 bits, through `last` too when it was changed from that view (a reader's own
    /// encoder, `extract.learned_int8`).
    pub fn token_states_many(
        &self,
        texts: &[String],
        last: Option<&ChangedLayers>,
    ) -> Result<Vec<TokenStates>, EmbedError> {
        let texts: Vec<String> = texts
            .iter()
            .map(|text| truncate_chars(text, self.max_input_chars))
            .collect();
        let Network::HandWritten(bert) = &self.inner.bert else {
            // The candle network reads one text at a time.
            let pass = last.map_or(Pass::Every, Pass::WithLast);
            return texts
                .iter()
                .map(|text| self.inner.token_states(text, pass))
                .collect();
        };
        let encodings = texts
            .iter()
            .map(|text| self.inner.tokenizer.encode(text.as_str(), true))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| EmbedError::Model(format!("tokenizing: {e}")))?;
        let ids: Vec<&[u32]> = encodings.iter().map(|e| e.get_ids()).collect();
        let states = match last {
            Some(last) => bert.forward_many_with_last_in(&ids, last, self.precision),
            None => bert.forward_many_in(&ids, self.precision),
        }
        .map_err(|e| EmbedError::Model(e.to_string()))?;
        Ok(encodings
            .iter()
            .zip(states)
            .map(|(encoding, flat)| token_states_of(encoding, &flat, bert.hidden()))
            .collect())
    }

    /// The mean of the last hidden states of each text (`TokenStates::mean`, unnormalised),
    /// through `last` in place of the last layer when given: several texts in one pass, as
    /// [`Embedder::embed`] batches them, for readers that need only the mean. (The token states
    /// it drops cost a copy of each text's rows, nothing beside the pass.)
    pub fn mean_states(
        &self,
        texts: &[String],
        last: Option<&ChangedLayers>,
    ) -> Result<Vec<Vec<f32>>, EmbedError> {
        Ok(self
            .token_states_many(texts, last)?
            .into_iter()
            .map(|states| states.mean)
            .collect())
    }

    /// [`LocalEmbedder::token_states`] after the first `layers` layers only (the hand-written
    /// pass, which the default load gives): what a copy of the later layers reads.
    pub fn token_states_through(
        &self,
        text: &str,
        layers: usize,
    ) -> Result<TokenStates, EmbedError> {
        self.inner.token_states(
            &truncate_chars(text, self.max_input_chars),
            Pass::Through(layers),
        )
    }

    /// The width of each token's state (the hand-written pass's; the candle networks are
    /// MiniLM's).
    pub fn hidden_size(&self) -> usize {
        match &self.inner.bert {
            Network::HandWritten(bert) => bert.hidden(),
            _ => LOCAL_DIMS,
        }
    }

    /// The most characters of a text the model reads (longer ones are cut).
    pub fn max_input_chars(&self) -> usize {
        self.max_input_chars
    }

    /// How many layers the model has (the hand-written pass; `None` for the others).
    pub fn layer_count(&self) -> Option<usize> {
        match &self.inner.bert {
            Network::HandWritten(bert) => Some(bert.layer_count()),
            _ => None,
        }
    }
}

/// The token states of one text from the hand-written pass's rows (`flat`, `hidden` wide).
fn token_states_of(encoding: &tokenizers::Encoding, flat: &[f32], hidden: usize) -> TokenStates {
    let (words, first_token) = words_of(encoding);
    TokenStates {
        words,
        first_token,
        states: flat.chunks_exact(hidden).map(<[f32]>::to_vec).collect(),
        mean: mean_of_rows(flat, hidden),
    }
}

/// The words of an encoding as byte ranges of its text, and the token each word starts at.
fn words_of(encoding: &tokenizers::Encoding) -> (Vec<std::ops::Range<usize>>, Vec<usize>) {
    let mut words: Vec<std::ops::Range<usize>> = Vec::new();
    let mut first_token = Vec::new();
    let mut last_word = None;
    for (token, (word, offsets)) in encoding
        .get_word_ids()
        .iter()
        .zip(encoding.get_offsets())
        .enumerate()
    {
        let Some(word) = word else { continue };
        if last_word == Some(*word) {
            if let Some(range) = words.last_mut() {
                range.end = offsets.1;
            }
        } else {
            words.push(offsets.0..offsets.1);
            first_token.push(token);
            last_word = Some(*word);
        }
    }
    (words, first_token)
}

/// Low-rank additions to a layer's dense products, by product name: `(down, up)`, row-major
/// (`LocalEmbedder::last_layers_with`).
pub type LayerAdditions = std::collections::HashMap<String, (Vec<f32>, Vec<f32>)>;

/// Which layers a reading of token states runs.
#[derive(Clone, Copy)]
enum Pass<'a> {
    Every,
    /// The first this many only.
    Through(usize),
    /// Every one but the last few, then these in their place.
    WithLast(&'a ChangedLayers),
}

impl Model {
    /// The mean last state of each text through the hand-written pass `run`: each text at its
    /// own length, the batch's tokens stacked, so no padding is computed.
    fn mean_states_by_hand(
        &self,
        bert: &FastBert,
        texts: &[String],
        run: impl FnOnce(&[&[u32]]) -> Result<Vec<Vec<f32>>, BertError>,
    ) -> Result<Vec<Vec<f32>>, EmbedError> {
        let encodings = texts
            .iter()
            .map(|text| self.tokenizer.encode(text.as_str(), true))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| EmbedError::Model(format!("tokenizing: {e}")))?;
        let ids: Vec<&[u32]> = encodings.iter().map(|e| e.get_ids()).collect();
        let states = run(&ids).map_err(|e| EmbedError::Model(e.to_string()))?;
        Ok(states
            .iter()
            .map(|text| mean_of_rows(text, bert.hidden()))
            .collect())
    }

    fn token_states(&self, text: &str, pass: Pass) -> Result<TokenStates, EmbedError> {
        let model_error = |e: candle_core::Error| EmbedError::Model(e.to_string());
        let encoding = self
            .tokenizer
            .encode(text, true)
            .map_err(|e| EmbedError::Model(format!("tokenizing: {e}")))?;
        let ids = encoding.get_ids().to_vec();
        if let Network::HandWritten(bert) = &self.bert {
            let flat = match pass {
                Pass::Every => bert.forward(&ids),
                Pass::Through(layers) => bert.forward_through(&ids, layers),
                Pass::WithLast(last) => bert.forward_with_last(&ids, last),
            }
            .map_err(|e| EmbedError::Model(e.to_string()))?;
            return Ok(token_states_of(&encoding, &flat, bert.hidden()));
        }
        if !matches!(pass, Pass::Every) {
            return Err(EmbedError::Model(
                "states after some layers, or through a changed one, only come from the hand-written pass".into(),
            ));
        }
        let columns = ids.len();
        let input_ids = Tensor::from_vec(ids, (1, columns), &self.device).map_err(model_error)?;
        let token_types = input_ids.zeros_like().map_err(model_error)?;
        let attention = input_ids.ones_like().map_err(model_error)?;
        let hidden = self
            .bert
            .forward(&input_ids, &token_types, &attention)
            .map_err(model_error)?
            .to_dtype(DType::F32)
            .map_err(model_error)?
            .squeeze(0)
            .map_err(model_error)?;
        let states = hidden.to_vec2::<f32>().map_err(model_error)?;
        let mean = hidden
            .mean(0)
            .map_err(model_error)?
            .to_vec1::<f32>()
            .map_err(model_error)?;
        let (words, first_token) = words_of(&encoding);
        Ok(TokenStates {
            words,
            first_token,
            states,
            mean,
        })
    }

    fn embed_batch(
        &self,
        texts: Vec<String>,
        precision: Precision,
    ) -> Result<Vec<Vec<f32>>, EmbedError> {
        if let Network::HandWritten(bert) = &self.bert {
            let means =
                self.mean_states_by_hand(bert, &texts, |ids| bert.forward_many_in(ids, precision))?;
            return Ok(means.into_iter().map(normalise).collect());
        }
        let model_error = |e: candle_core::Error| EmbedError::Model(e.to_string());
        let encodings = self
            .tokenizer
            .encode_batch(texts, true)
            .map_err(|e| EmbedError::Model(format!("tokenizing: {e}")))?;
        let rows = encodings.len();
        let columns = encodings.first().map(|e| e.get_ids().len()).unwrap_or(0);
        let mut ids = Vec::with_capacity(rows * columns);
        let mut mask = Vec::with_capacity(rows * columns);
        for encoding in &encodings {
            ids.extend(encoding.get_ids().iter().copied());
            mask.extend(encoding.get_attention_mask().iter().copied());
        }
        let input_ids =
            Tensor::from_vec(ids, (rows, columns), &self.device).map_err(model_error)?;
        let attention =
            Tensor::from_vec(mask, (rows, columns), &self.device).map_err(model_error)?;
        let token_types = input_ids.zeros_like().map_err(model_error)?;
        let hidden = self
            .bert
            .forward(&input_ids, &token_types, &attention)
            .map_err(model_error)?
            // Pooling and normalisation in F32 whatever the model ran in.
            .to_dtype(DType::F32)
            .map_err(model_error)?;
        // Mean over real tokens only: padding must not pull short texts toward each other.
        let mask = attention
            .to_dtype(DType::F32)
            .map_err(model_error)?
            .unsqueeze(2)
            .map_err(model_error)?;
        let summed = hidden
            .broadcast_mul(&mask)
            .map_err(model_error)?
            .sum(1)
            .map_err(model_error)?;
        let counts = mask
            .sum(1)
            .map_err(model_error)?
            .clamp(1e-9, f32::MAX)
            .map_err(model_error)?;
        let mean = summed.broadcast_div(&counts).map_err(model_error)?;
        let norms = mean
            .sqr()
            .map_err(model_error)?
            .sum_keepdim(1)
            .map_err(model_error)?
            .sqrt()
            .map_err(model_error)?;
        let normalised = mean
            .broadcast_div(&norms.clamp(1e-12, f32::MAX).map_err(model_error)?)
            .map_err(model_error)?;
        normalised.to_vec2::<f32>().map_err(model_error)
    }
}

/// The mean of `rows`-wide rows of `flat`.
pub(crate) fn mean_of_rows(flat: &[f32], width: usize) -> Vec<f32> {
    let mut mean = vec![0f32; width];
    let rows = flat.len() / width;
    for row in flat.chunks_exact(width) {
        mean.iter_mut().zip(row).for_each(|(m, x)| *m += x);
    }
    mean.iter_mut().for_each(|m| *m /= rows.max(1) as f32);
    mean
}

impl Embedder for LocalEmbedder {
    fn dims(&self) -> usize {
        LOCAL_DIMS
    }

    fn embed<'a>(
        &'a self,
        texts: &'a [String],
    ) -> BoxFuture<'a, Result<Vec<Vec<f32>>, EmbedError>> {
        Box::pin(async move {
            if texts.is_empty() {
                return Ok(Vec::new());
            }
            let texts: Vec<String> = texts
                .iter()
                .map(|t| truncate_chars(t, self.max_input_chars))
                .collect();
            let model = self.inner.clone();
            let size = texts.len();
            let started = Instant::now();
            let precision = self.precision;
            let vectors = tokio::task::spawn_blocking(move || model.embed_batch(texts, precision))
                .await
                .map_err(|e| EmbedError::Model(format!("embedding task failed: {e}")))??;
            telemetry::embed_batch(size, started.elapsed());
            Ok(vectors)
        })
    }
}
