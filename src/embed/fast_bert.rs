//! The same BERT as candle's, written out by hand over plain buffers.
//!
//! Why it exists: a prompt builder that sends text waits for the model to embed one short
//! sentence, and through candle that took 14–16 ms for a dozen tokens on this 2-core machine,
//! of which the arithmetic (about 0.25 GFLOP) is a third: the rest was candle's many small
//! tensor operations, each allocating its output, and its thread hand-offs. Here one text is
//! a plain `tokens × 384` buffer: the matrix products go straight to `gemm` (the kernel candle
//! itself calls, optimised in every profile), query, key and value are one product, the bias
//! is the product's starting value, and layer norm, softmax and GELU run in place.
//!
//! Same weights, same operations in the same order as `candle_transformers::models::bert`
//! (post-norm, exact-erf GELU, no padding so no mask): vectors agree with candle's to float
//! rounding (`tests/topic_matching.rs` holds cosine ≥ 0.99999 on the labelled sentences).
//!
//! The same pass reads MPNet (`model_type` "mpnet", all-mpnet-base-v2: an encoder the learned
//! reader may run over): the same post-norm layers, with no token types, positions counted from
//! 2 (after its padding id), and a learned bias added to every head's attention scores by the
//! bucket of the two tokens' relative position (T5's buckets, one table shared by every layer),
//! as `transformers`' `MPNetModel` computes them (`tests/data/tiny_mpnet` holds its states).
//!
//! [`Precision::Int8`] runs the same pass with the dense layers' products in 8-bit integers
//! (`crates/int8`), for search text only (`LocalEmbedder::for_queries`): a short query in
//! less than half the time, its vector within cosine 0.99 of the F32 one.

use std::collections::HashMap;
use std::path::Path;

use candle_core::{DType, Device, Tensor};
use gemm::Parallelism;
use serde::Deserialize;

use persona_prefs_int8::{self as int8, Kernel, QuantisedInputs, QuantisedWeights};

/// The arithmetic of a pass's dense layers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Precision {
    /// F32 throughout: the vectors candle computes.
    Full,
    /// The dense layers' products in 8-bit integers (`crates/int8`); everything else F32.
    Int8,
}

/// What the pass needs of a checkpoint's `config.json` (BERT's or MPNet's).
#[derive(Debug, Clone, Deserialize)]
pub struct EncoderConfig {
    /// `bert` (also MiniLM's) or `mpnet`.
    #[serde(default = "EncoderConfig::bert")]
    pub model_type: String,
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub intermediate_size: usize,
    pub max_position_embeddings: usize,
    /// BERT's segment types (MPNet has none).
    #[serde(default)]
    pub type_vocab_size: usize,
    pub layer_norm_eps: f64,
    /// The activation between the two dense products: only the exact-erf GELU is written here.
    #[serde(default = "EncoderConfig::gelu")]
    pub hidden_act: String,
    /// MPNet's relative-position buckets.
    #[serde(default = "EncoderConfig::buckets")]
    pub relative_attention_num_buckets: usize,
}

impl EncoderConfig {
    fn bert() -> String {
        "bert".into()
    }

    fn gelu() -> String {
        "gelu".into()
    }

    fn buckets() -> usize {
        MPNET_BUCKETS
    }

    /// Whether this is MPNet (relative-position bias, positions from 2, no token types).
    pub fn is_mpnet(&self) -> bool {
        self.model_type == "mpnet"
    }
}

/// MPNet's positions start after its padding id (1): the first token's is 2.
const MPNET_FIRST_POSITION: usize = 2;
/// How many relative-position buckets MPNet has (`transformers` fixes it).
const MPNET_BUCKETS: usize = 32;
/// The farthest relative position MPNet's buckets tell apart (`transformers`' default, which
/// all-mpnet-base-v2 uses); farther ones share the last bucket.
const MPNET_MAX_DISTANCE: usize = 128;

/// A learned bias on the attention scores by the two tokens' relative position (MPNet).
struct RelativeBias {
    /// `buckets × heads`, row-major: the checkpoint's `encoder.relative_attention_bias`.
    table: Vec<f32>,
    /// The bucket of each relative position `key − query`, from `−(longest − 1)` at index 0.
    bucket_of: Vec<usize>,
    /// The longest text the buckets were worked out for (the position table's length).
    longest: usize,
}

impl RelativeBias {
    fn new(table: Vec<f32>, buckets: usize, longest: usize) -> RelativeBias {
        let bucket_of = (0..(2 * longest).saturating_sub(1))
            .map(|index| relative_bucket(index as i64 - (longest as i64 - 1), buckets))
            .collect();
        RelativeBias {
            table,
            bucket_of,
            longest,
        }
    }

    /// The bias of `head` for the query at `query` and the key at `key`.
    fn at(&self, heads: usize, head: usize, query: usize, key: usize) -> f32 {
        let bucket = self.bucket_of[key + self.longest - 1 - query];
        self.table[bucket * heads + head]
    }
}

/// T5's bidirectional bucket of a relative position (`key − query`), as `transformers`' MPNet
/// computes it: half the buckets for keys before the query, half for those after; within each,
/// one bucket a distance up to a quarter of the buckets, then buckets logarithmically wider up
/// to [`MPNET_MAX_DISTANCE`]. Computed in F32 as torch computes it, so the truncation lands on
/// the same bucket at every distance (checked against `transformers` in the tests).
fn relative_bucket(relative: i64, buckets: usize) -> usize {
    let half = buckets / 2;
    let distance = -relative;
    let side = if distance < 0 { half } else { 0 };
    let distance = distance.unsigned_abs() as usize;
    let exact = half / 2;
    if distance < exact {
        return side + distance;
    }
    let spread = ((distance as f32 / exact as f32).ln()
        / ((MPNET_MAX_DISTANCE as f64 / exact as f64).ln() as f32)
        * (half - exact) as f32) as usize;
    side + (exact + spread).min(half - 1)
}

/// A dense layer. `weight` is stored transposed, `inputs × outputs` row-major (the checkpoint
/// stores `outputs × inputs`). `gemm` packs the weight into panels on every product; from the
/// checkpoint's layout that was a gather across rows and took about a sixth of a batch's CPU
/// (stop 67's profile: 18.6 % of the model's samples against 55 % in its kernel), from this
/// one it is a contiguous copy. The products are the same, in the same order: the vectors are
/// the same bit for bit. [`Linear::checkpoint_weight`] gives the checkpoint's layout back.
struct Linear {
    weight: Vec<f32>,
    bias: Vec<f32>,
    inputs: usize,
    outputs: usize,
    /// The weight quantised, when the model was loaded for 8-bit passes too.
    quantised: Option<QuantisedWeights>,
}

impl Linear {
    /// A layer from its weight in the checkpoint's layout (`outputs × inputs`), stored
    /// transposed.
    fn new(weight: &[f32], bias: Vec<f32>, inputs: usize, outputs: usize) -> Linear {
        Linear {
            weight: transposed(weight, outputs, inputs),
            bias,
            inputs,
            outputs,
            quantised: None,
        }
    }

    /// The weight in the checkpoint's layout (`outputs × inputs`), as the 8-bit copy and a
    /// changed layer take it.
    fn checkpoint_weight(&self) -> Vec<f32> {
        transposed(&self.weight, self.inputs, self.outputs)
    }
}

#[derive(Clone)]
struct LayerNorm {
    weight: Vec<f32>,
    bias: Vec<f32>,
}

struct Layer {
    /// Query, key and value stacked: one product instead of three.
    query_key_value: Linear,
    attention_output: Linear,
    attention_norm: LayerNorm,
    intermediate: Linear,
    output: Linear,
    output_norm: LayerNorm,
}

/// A copy of a model's last layers with changed weights ([`FastBert::changed_last_layers`]): it
/// takes the place of as many layers at the end of the model as it holds.
pub struct ChangedLayers(Vec<Layer>);

pub struct FastBert {
    word_embeddings: Vec<f32>,
    position_embeddings: Vec<f32>,
    /// Every token is of type 0 (one segment), so only that row is kept.
    token_type_embedding: Vec<f32>,
    embeddings_norm: LayerNorm,
    layers: Vec<Layer>,
    /// MPNet's bias on the attention scores (`None` for BERT).
    relative_bias: Option<RelativeBias>,
    /// The position of a text's first token (0 for BERT, 2 for MPNet).
    first_position: usize,
    hidden: usize,
    heads: usize,
    vocabulary: usize,
    /// The most tokens a text may have: the position table's rows from `first_position` on.
    max_positions: usize,
    norm_epsilon: f32,
    parallelism: Parallelism,
    threads: usize,
    /// Where 8-bit passes run, their tokens split between its two threads (`None`: one
    /// thread, the caller's).
    int8_pool: Option<rayon::ThreadPool>,
    /// The 8-bit products' kernel; `None`: the fastest this CPU has (`int8::product`).
    int8_kernel: Option<Kernel>,
}

/// Why a checkpoint could not be read as the BERT this module runs, or a text not run.
#[derive(Debug)]
pub struct BertError(pub String);

impl std::fmt::Display for BertError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

struct Checkpoint(HashMap<String, Tensor>);

impl Checkpoint {
    /// The tensor `name` (with or without the `bert.` or `mpnet.` prefix some exports carry),
    /// as F32, checked against the `shape` the config implies.
    fn take(&mut self, name: &str, shape: &[usize]) -> Result<Vec<f32>, BertError> {
        let tensor = self
            .0
            .remove(name)
            .or_else(|| self.0.remove(&format!("bert.{name}")))
            .or_else(|| self.0.remove(&format!("mpnet.{name}")))
            .ok_or_else(|| BertError(format!("model.safetensors has no tensor {name}")))?;
        if tensor.dims() != shape {
            return Err(BertError(format!(
                "{name} is {:?}, the config implies {shape:?}",
                tensor.dims()
            )));
        }
        tensor
            .to_dtype(DType::F32)
            .and_then(|t| t.flatten_all())
            .and_then(|t| t.to_vec1::<f32>())
            .map_err(|e| BertError(format!("{name}: {e}")))
    }

    /// A dense layer's weight (`outputs × inputs`, the checkpoint's layout) and bias.
    fn dense(
        &mut self,
        prefix: &str,
        inputs: usize,
        outputs: usize,
    ) -> Result<(Vec<f32>, Vec<f32>), BertError> {
        Ok((
            self.take(&format!("{prefix}.weight"), &[outputs, inputs])?,
            self.take(&format!("{prefix}.bias"), &[outputs])?,
        ))
    }

    fn linear(&mut self, prefix: &str, inputs: usize, outputs: usize) -> Result<Linear, BertError> {
        let (weight, bias) = self.dense(prefix, inputs, outputs)?;
        Ok(Linear::new(&weight, bias, inputs, outputs))
    }

    fn layer_norm(&mut self, prefix: &str, size: usize) -> Result<LayerNorm, BertError> {
        Ok(LayerNorm {
            weight: self.take(&format!("{prefix}.weight"), &[size])?,
            bias: self.take(&format!("{prefix}.bias"), &[size])?,
        })
    }
}

impl FastBert {
    /// Reads the checkpoint at `weights` for the BERT or MPNet `config` describes. `threads`
    /// is how many threads one text's matrix products may share (1: the calling thread only).
    pub fn load(
        weights: &Path,
        config: &EncoderConfig,
        threads: usize,
    ) -> Result<FastBert, BertError> {
        // With the weights stored transposed, `gemm` may read them in place, which it does for
        // products of up to 48 tokens: slower than packing them first, now that packing is a
        // contiguous copy (a lone text's F32 pass 11.2 -> 9.2 ms here, alternated; batches of
        // 32 texts 9-11 % less CPU a text). Always packing changes no value: the same products
        // in the same order. Process-wide, so candle's products pack the same way.
        gemm::set_lhs_packing_threshold_single_thread(0);
        gemm::set_lhs_packing_threshold_multi_thread(0);
        if config.hidden_act != "gelu" {
            return Err(BertError(format!(
                "hidden_act {:?}: only the exact-erf \"gelu\" is written here",
                config.hidden_act
            )));
        }
        let mpnet = config.is_mpnet();
        if !mpnet && config.model_type != "bert" {
            return Err(BertError(format!(
                "model_type {:?}: this pass reads \"bert\" and \"mpnet\"",
                config.model_type
            )));
        }
        let tensors = candle_core::safetensors::load(weights, &Device::Cpu)
            .map_err(|e| BertError(format!("model.safetensors: {e}")))?;
        let mut checkpoint = Checkpoint(tensors);
        let hidden = config.hidden_size;
        let heads = config.num_attention_heads;
        if heads == 0 || !hidden.is_multiple_of(heads) {
            return Err(BertError(format!(
                "hidden_size {hidden} is not a multiple of num_attention_heads {heads}"
            )));
        }
        let intermediate = config.intermediate_size;
        // MPNet has no segment types: adding zero leaves every value as it was.
        let token_type_embedding = if mpnet {
            vec![0.0; hidden]
        } else {
            checkpoint.take(
                "embeddings.token_type_embeddings.weight",
                &[config.type_vocab_size, hidden],
            )?[..hidden]
                .to_vec()
        };
        // The same products under each architecture's names.
        let names = |index: usize| {
            let prefix = format!("encoder.layer.{index}");
            let [query, key, value, attention_output, attention_norm] = if mpnet {
                ["attn.q", "attn.k", "attn.v", "attn.o", "LayerNorm"]
            } else {
                [
                    "self.query",
                    "self.key",
                    "self.value",
                    "output.dense",
                    "output.LayerNorm",
                ]
            }
            .map(|name| format!("{prefix}.attention.{name}"));
            (
                [query, key, value, attention_output, attention_norm],
                prefix,
            )
        };
        let mut layers = Vec::with_capacity(config.num_hidden_layers);
        for index in 0..config.num_hidden_layers {
            let ([query, key, value, attention_output, attention_norm], prefix) = names(index);
            let (query, query_bias) = checkpoint.dense(&query, hidden, hidden)?;
            let (key, key_bias) = checkpoint.dense(&key, hidden, hidden)?;
            let (value, value_bias) = checkpoint.dense(&value, hidden, hidden)?;
            layers.push(Layer {
                // Stacked by outputs (rows of the checkpoint's layout).
                query_key_value: Linear::new(
                    &[query, key, value].concat(),
                    [query_bias, key_bias, value_bias].concat(),
                    hidden,
                    3 * hidden,
                ),
                attention_output: checkpoint.linear(&attention_output, hidden, hidden)?,
                attention_norm: checkpoint.layer_norm(&attention_norm, hidden)?,
                intermediate: checkpoint.linear(
                    &format!("{prefix}.intermediate.dense"),
                    hidden,
                    intermediate,
                )?,
                output: checkpoint.linear(
                    &format!("{prefix}.output.dense"),
                    intermediate,
                    hidden,
                )?,
                output_norm: checkpoint
                    .layer_norm(&format!("{prefix}.output.LayerNorm"), hidden)?,
            });
        }
        let first_position = if mpnet { MPNET_FIRST_POSITION } else { 0 };
        let max_positions = config
            .max_position_embeddings
            .checked_sub(first_position)
            .filter(|&longest| longest > 0)
            .ok_or_else(|| {
                BertError(format!(
                    "max_position_embeddings {} leaves no position for a token",
                    config.max_position_embeddings
                ))
            })?;
        let relative_bias = if mpnet {
            // `transformers` buckets by 32 whatever the config says; another count would be a
            // model this pass cannot reproduce.
            let buckets = config.relative_attention_num_buckets;
            if buckets != MPNET_BUCKETS {
                return Err(BertError(format!(
                    "relative_attention_num_buckets {buckets}: MPNet's are {MPNET_BUCKETS}"
                )));
            }
            Some(RelativeBias::new(
                checkpoint.take("encoder.relative_attention_bias.weight", &[buckets, heads])?,
                buckets,
                max_positions,
            ))
        } else {
            None
        };
        Ok(FastBert {
            word_embeddings: checkpoint.take(
                "embeddings.word_embeddings.weight",
                &[config.vocab_size, hidden],
            )?,
            position_embeddings: checkpoint.take(
                "embeddings.position_embeddings.weight",
                &[config.max_position_embeddings, hidden],
            )?,
            token_type_embedding,
            embeddings_norm: checkpoint.layer_norm("embeddings.LayerNorm", hidden)?,
            layers,
            relative_bias,
            first_position,
            hidden,
            heads,
            vocabulary: config.vocab_size,
            max_positions,
            norm_epsilon: config.layer_norm_eps as f32,
            parallelism: if threads > 1 {
                Parallelism::Rayon(threads)
            } else {
                Parallelism::None
            },
            threads,
            int8_pool: None,
            int8_kernel: None,
        })
    }

    /// Keeps an 8-bit copy of every dense layer's weight beside the F32 one (10.5 MB more for
    /// MiniLM-L6, twice that where the VNNI kernel's packed copy is kept too), so
    /// [`Precision::Int8`] passes can run, with `kernel` (`None`: the fastest this CPU has;
    /// every kernel gives the same floats, so this only says how fast).
    pub fn with_int8(mut self, kernel: Option<Kernel>) -> Result<FastBert, BertError> {
        if let Some(kernel) = kernel.filter(|kernel| !kernel.is_available()) {
            return Err(BertError(format!(
                "the 8-bit kernel {kernel:?} needs instructions this CPU lacks"
            )));
        }
        self.int8_kernel = kernel;
        if self.threads > 1 {
            self.int8_pool = Some(
                rayon::ThreadPoolBuilder::new()
                    .num_threads(self.threads)
                    .thread_name(|index| format!("int8-pass-{index}"))
                    .build()
                    .map_err(|e| BertError(format!("starting the 8-bit pass's threads: {e}")))?,
            );
        }
        for layer in &mut self.layers {
            for linear in [
                &mut layer.query_key_value,
                &mut layer.attention_output,
                &mut layer.intermediate,
                &mut layer.output,
            ] {
                linear.quantised = Some(QuantisedWeights::quantise(
                    &linear.checkpoint_weight(),
                    linear.outputs,
                    linear.inputs,
                ));
            }
        }
        Ok(self)
    }

    /// Whether [`Precision::Int8`] passes can run (see [`FastBert::with_int8`]).
    pub fn has_int8(&self) -> bool {
        self.layers
            .iter()
            .all(|layer| layer.query_key_value.quantised.is_some())
    }

    /// The width of each token's state.
    pub fn hidden(&self) -> usize {
        self.hidden
    }

    /// The last hidden state of each token of one text (no padding): `ids.len() × hidden`,
    /// row-major.
    pub fn forward(&self, ids: &[u32]) -> Result<Vec<f32>, BertError> {
        Ok(self.forward_many(&[ids])?.pop().unwrap_or_default())
    }

    /// [`FastBert::forward_many`] in F32.
    pub fn forward_many(&self, texts: &[&[u32]]) -> Result<Vec<Vec<f32>>, BertError> {
        self.forward_many_in(texts, Precision::Full)
    }

    /// [`FastBert::forward`] for several texts at once, in `precision`. Their tokens are
    /// stacked into one matrix for the dense layers (a batch without padding: no row computed
    /// for nothing) and only attention runs text by text. Ids past the vocabulary and texts past the position
    /// table are refused rather than read out of bounds.
    pub fn forward_many_in(
        &self,
        texts: &[&[u32]],
        precision: Precision,
    ) -> Result<Vec<Vec<f32>>, BertError> {
        if precision == Precision::Int8 {
            let layers: Vec<&Layer> = self.layers.iter().collect();
            return self.run_quantised_in_pool(texts, &layers);
        }
        self.run_full(texts, self.layers.len())
    }

    /// The 8-bit pass through `layers` on the 8-bit pass's threads, refused unless every
    /// layer has its 8-bit weights.
    fn run_quantised_in_pool(
        &self,
        texts: &[&[u32]],
        layers: &[&Layer],
    ) -> Result<Vec<Vec<f32>>, BertError> {
        if !layers
            .iter()
            .all(|layer| layer.query_key_value.quantised.is_some())
        {
            return Err(BertError(
                "an 8-bit pass needs the model loaded with its 8-bit weights".into(),
            ));
        }
        match &self.int8_pool {
            Some(pool) => pool.install(|| self.run_quantised(texts, layers)),
            None => self.run_quantised(texts, layers),
        }
    }

    /// Each token's state after the first `layers` layers only (F32, one text): the input of
    /// a later layer that something else runs, such as the learned extractor's own copy of
    /// the last one.
    pub fn forward_through(&self, ids: &[u32], layers: usize) -> Result<Vec<f32>, BertError> {
        if layers > self.layers.len() {
            return Err(BertError(format!(
                "{layers} layers asked for, the model has {}",
                self.layers.len()
            )));
        }
        Ok(self.run_full(&[ids], layers)?.pop().unwrap_or_default())
    }

    /// How many layers the model has.
    pub fn layer_count(&self) -> usize {
        self.layers.len()
    }

    /// A copy of the model's last `count` layers with each of their dense products changed by
    /// `change`, which gets the layer's index in the model, the product's name (`query`, `key`,
    /// `value`, `attention_output`, `intermediate`, `output`), its `outputs × inputs` weight
    /// (row-major) and those two sizes. For a reader trained with low-rank additions to those
    /// layers: merged into the weights once, the layers cost what the shipped ones do. With
    /// `precision` [`Precision::Int8`] (the model loaded with its 8-bit weights) each changed
    /// weight also gets its own 8-bit copy, quantised after the change, for 8-bit passes.
    pub fn changed_last_layers(
        &self,
        count: usize,
        precision: Precision,
        mut change: impl FnMut(usize, &str, &mut [f32], usize, usize) -> Result<(), BertError>,
    ) -> Result<ChangedLayers, BertError> {
        if count == 0 || count > self.layers.len() {
            return Err(BertError(format!(
                "{count} layers to change; the model has {}",
                self.layers.len()
            )));
        }
        let quantised = precision == Precision::Int8;
        if quantised && !self.has_int8() {
            return Err(BertError(
                "8-bit changed layers need the model loaded with its 8-bit weights".into(),
            ));
        }
        let first = self.layers.len() - count;
        let mut changed_layers = Vec::with_capacity(count);
        for (index, layer) in self.layers.iter().enumerate().skip(first) {
            // Each changed in the checkpoint's layout; for 8-bit passes, with its own 8-bit
            // copy quantised from the weights after the change (the model's is of before).
            let mut changed = |names: &[&str], linear: &Linear| -> Result<Linear, BertError> {
                let mut weight = linear.checkpoint_weight();
                // Query, key and value are stacked by outputs: each its own block of rows.
                let block = weight.len() / names.len();
                for (name, rows) in names.iter().zip(weight.chunks_exact_mut(block)) {
                    change(
                        index,
                        name,
                        rows,
                        linear.outputs / names.len(),
                        linear.inputs,
                    )?;
                }
                let mut changed =
                    Linear::new(&weight, linear.bias.clone(), linear.inputs, linear.outputs);
                if quantised {
                    changed.quantised = Some(QuantisedWeights::quantise(
                        &weight,
                        linear.outputs,
                        linear.inputs,
                    ));
                }
                Ok(changed)
            };
            changed_layers.push(Layer {
                query_key_value: changed(&["query", "key", "value"], &layer.query_key_value)?,
                attention_output: changed(&["attention_output"], &layer.attention_output)?,
                attention_norm: layer.attention_norm.clone(),
                intermediate: changed(&["intermediate"], &layer.intermediate)?,
                output: changed(&["output"], &layer.output)?,
                output_norm: layer.output_norm.clone(),
            });
        }
        Ok(ChangedLayers(changed_layers))
    }

    /// Each token's state (F32, one text) through the model with `last` in place of its last
    /// layers.
    pub fn forward_with_last(
        &self,
        ids: &[u32],
        last: &ChangedLayers,
    ) -> Result<Vec<f32>, BertError> {
        Ok(self
            .forward_many_with_last(&[ids], last)?
            .pop()
            .unwrap_or_default())
    }

    /// [`FastBert::forward_with_last`] for several texts at once, stacked as
    /// [`FastBert::forward_many_in`] stacks them.
    pub fn forward_many_with_last(
        &self,
        texts: &[&[u32]],
        last: &ChangedLayers,
    ) -> Result<Vec<Vec<f32>>, BertError> {
        self.forward_many_with_last_in(texts, last, Precision::Full)
    }

    /// [`FastBert::forward_many_with_last`] in `precision`: in 8 bits when the model and the
    /// changed layers were made with their 8-bit weights ([`FastBert::with_int8`] before
    /// [`FastBert::changed_last_layers`]).
    pub fn forward_many_with_last_in(
        &self,
        texts: &[&[u32]],
        last: &ChangedLayers,
        precision: Precision,
    ) -> Result<Vec<Vec<f32>>, BertError> {
        let Some(kept) = self.layers.len().checked_sub(last.0.len()) else {
            return Err(BertError(format!(
                "{} changed layers for a model of {}",
                last.0.len(),
                self.layers.len()
            )));
        };
        let layers: Vec<&Layer> = self.layers[..kept].iter().chain(&last.0).collect();
        if precision == Precision::Int8 {
            return self.run_quantised_in_pool(texts, &layers);
        }
        self.run_layers(texts, &layers)
    }

    /// Each token's input to the first layer (word, position and type embeddings, normalised),
    /// stacked: `tokens × hidden`.
    fn embed_tokens(&self, texts: &[&[u32]]) -> Result<Vec<f32>, BertError> {
        let hidden = self.hidden;
        let tokens: usize = texts.iter().map(|ids| ids.len()).sum();
        let longest = texts.iter().map(|ids| ids.len()).max().unwrap_or(0);
        if longest > self.max_positions {
            return Err(BertError(format!(
                "{longest} tokens, the model reads at most {}",
                self.max_positions
            )));
        }
        let mut states = vec![0f32; tokens * hidden];
        let mut rows = states.chunks_exact_mut(hidden);
        for ids in texts {
            for (position, (&id, row)) in ids.iter().zip(&mut rows).enumerate() {
                let id = id as usize;
                if id >= self.vocabulary {
                    return Err(BertError(format!("token id {id} is past the vocabulary")));
                }
                let word = &self.word_embeddings[id * hidden..(id + 1) * hidden];
                let position = position + self.first_position;
                let place = &self.position_embeddings[position * hidden..(position + 1) * hidden];
                for (((value, w), p), t) in row
                    .iter_mut()
                    .zip(word)
                    .zip(place)
                    .zip(&self.token_type_embedding)
                {
                    // candle adds word and type first, then the position: the same rounding.
                    *value = (w + t) + p;
                }
            }
        }
        self.layer_norm(&mut states, &self.embeddings_norm);
        Ok(states)
    }

    /// The F32 pass: each layer's products over every token at once (through `gemm`, which
    /// may split them between threads), attention text by text.
    fn run_full(&self, texts: &[&[u32]], layers: usize) -> Result<Vec<Vec<f32>>, BertError> {
        let layers: Vec<&Layer> = self.layers[..layers].iter().collect();
        self.run_layers(texts, &layers)
    }

    /// The F32 pass through `layers`, in order. A batch of several texts is cut into one
    /// group of texts a thread, of about equal tokens, and each group runs the whole pass on
    /// its thread alone: attention, layer norms and activations are per text, so the groups
    /// never meet, where a product split between the threads left one core idle through
    /// everything but the products (the cores were about 82% busy under ingest's batches).
    /// One text keeps its products split between the threads, for a lone query's latency.
    /// Each value is computed in the same order either way, so the vectors are the same.
    fn run_layers(&self, texts: &[&[u32]], layers: &[&Layer]) -> Result<Vec<Vec<f32>>, BertError> {
        if self.threads > 1 && texts.len() > 1 {
            return self.run_layers_in_groups(texts, layers);
        }
        self.run_layers_with(texts, layers, self.parallelism)
    }

    /// [`FastBert::run_layers`] for a batch: one group of texts for each of the threads (as
    /// many as there are texts at most), of about equal tokens, each on a thread of rayon's
    /// pool.
    fn run_layers_in_groups(
        &self,
        texts: &[&[u32]],
        layers: &[&Layer],
    ) -> Result<Vec<Vec<f32>>, BertError> {
        use rayon::prelude::*;
        let groups = balanced_groups(texts, self.threads);
        let states: Vec<Result<Vec<Vec<f32>>, BertError>> = groups
            .into_par_iter()
            .map(|group| self.run_layers_with(&texts[group], layers, Parallelism::None))
            .collect();
        let mut all = Vec::with_capacity(texts.len());
        for group in states {
            all.extend(group?);
        }
        Ok(all)
    }

    /// The F32 pass through `layers`, its products run with `parallelism`.
    fn run_layers_with(
        &self,
        texts: &[&[u32]],
        layers: &[&Layer],
        parallelism: Parallelism,
    ) -> Result<Vec<Vec<f32>>, BertError> {
        let hidden = self.hidden;
        let tokens: usize = texts.iter().map(|ids| ids.len()).sum();
        let longest = texts.iter().map(|ids| ids.len()).max().unwrap_or(0);
        let mut states = self.embed_tokens(texts)?;

        let mut query_key_value = vec![0f32; tokens * 3 * hidden];
        let mut context = vec![0f32; tokens * hidden];
        let mut scores = vec![0f32; longest * longest];
        let mut projected = vec![0f32; tokens * hidden];
        let intermediate_size = layers.first().map_or(0, |l| l.intermediate.outputs);
        let mut intermediate = vec![0f32; tokens * intermediate_size];
        for layer in layers {
            self.linear(
                &states,
                tokens,
                &layer.query_key_value,
                &mut query_key_value,
                parallelism,
            );
            let mut first = 0;
            for ids in texts {
                let length = ids.len();
                self.attention(
                    &query_key_value[first * 3 * hidden..(first + length) * 3 * hidden],
                    length,
                    &mut scores[..length * length],
                    &mut context[first * hidden..(first + length) * hidden],
                );
                first += length;
            }
            self.linear(
                &context,
                tokens,
                &layer.attention_output,
                &mut projected,
                parallelism,
            );
            add_into(&mut states, &projected);
            self.layer_norm(&mut states, &layer.attention_norm);

            self.linear(
                &states,
                tokens,
                &layer.intermediate,
                &mut intermediate,
                parallelism,
            );
            intermediate.iter_mut().for_each(|x| *x = gelu_erf(*x));
            self.linear(
                &intermediate,
                tokens,
                &layer.output,
                &mut projected,
                parallelism,
            );
            add_into(&mut states, &projected);
            self.layer_norm(&mut states, &layer.output_norm);
        }
        Ok(self.per_text(texts, &states))
    }

    /// `states` (stacked) cut back into one `length × hidden` matrix per text.
    fn per_text(&self, texts: &[&[u32]], states: &[f32]) -> Vec<Vec<f32>> {
        let hidden = self.hidden;
        let mut first = 0;
        texts
            .iter()
            .map(|ids| {
                let text = states[first * hidden..(first + ids.len()) * hidden].to_vec();
                first += ids.len();
                text
            })
            .collect()
    }

    /// The 8-bit pass. Everything in a layer but attention is row by row, and attention needs
    /// every row's query, key and value only once they exist: so with two threads each takes
    /// half the tokens and runs, for its own rows, attention (reading all rows' projections
    /// of the layer), the layer's dense part, and the next layer's projections (into a second
    /// buffer, as the other thread may still be reading the first). The threads meet once a
    /// layer: splitting each product instead met 24 times a pass, and those hand-offs were a
    /// fifth of it. With one thread the same code runs on all rows.
    fn run_quantised(
        &self,
        texts: &[&[u32]],
        layers: &[&Layer],
    ) -> Result<Vec<Vec<f32>>, BertError> {
        let hidden = self.hidden;
        let mut states = self.embed_tokens(texts)?;
        let tokens = states.len() / hidden;
        let Some(first_layer) = layers.first() else {
            return Ok(self.per_text(texts, &states));
        };
        // For each row: the rows of its text (attention stays within a text).
        let mut text_of_row = Vec::with_capacity(tokens);
        let mut first = 0;
        for ids in texts {
            text_of_row.extend(std::iter::repeat_n(first..first + ids.len(), ids.len()));
            first += ids.len();
        }
        // Rows of the first thread's part; all of them when there is one thread.
        let split = match self.int8_pool {
            Some(_) if tokens >= 2 => tokens / 2,
            _ => tokens,
        };
        let width = 3 * hidden;
        let mut current = vec![0f32; tokens * width];
        let mut next = vec![0f32; tokens * width];
        self.in_parts(
            split,
            &mut states,
            &mut current,
            width,
            |_, states, projections| {
                self.linear_quantised(states, &first_layer.query_key_value, projections)
            },
        );
        for (index, layer) in layers.iter().enumerate() {
            let following = layers.get(index + 1).copied();
            let projections = &current;
            let rows = &text_of_row;
            self.in_parts(
                split,
                &mut states,
                &mut next,
                width,
                |first, states, next| {
                    self.layer_rows(layer, following, projections, rows, first, states, next)
                },
            );
            std::mem::swap(&mut current, &mut next);
        }
        Ok(self.per_text(texts, &states))
    }

    /// Runs `work(first row, its states, its output rows)` on rows `..split` and `split..`
    /// side by side, or once on all rows when `split` is all of them.
    fn in_parts(
        &self,
        split: usize,
        states: &mut [f32],
        output: &mut [f32],
        output_width: usize,
        work: impl Fn(usize, &mut [f32], &mut [f32]) + Sync,
    ) {
        if split * self.hidden >= states.len() {
            return work(0, states, output);
        }
        let (states_a, states_b) = states.split_at_mut(split * self.hidden);
        let (output_a, output_b) = output.split_at_mut(split * output_width);
        rayon::join(
            || work(0, states_a, output_a),
            || work(split, states_b, output_b),
        );
    }

    /// One layer for the rows from `first` (`states`, updated in place): attention over
    /// `projections` (every row's query, key and value), the dense part, and `following`'s
    /// projections of the result into `next`.
    #[allow(clippy::too_many_arguments)]
    fn layer_rows(
        &self,
        layer: &Layer,
        following: Option<&Layer>,
        projections: &[f32],
        text_of_row: &[std::ops::Range<usize>],
        first: usize,
        states: &mut [f32],
        next: &mut [f32],
    ) {
        let hidden = self.hidden;
        let width = 3 * hidden;
        let rows = states.len() / hidden;
        let head_size = hidden / self.heads;
        let scale = 1.0 / (head_size as f32).sqrt();
        let mut context = vec![0f32; rows * hidden];
        let mut scores = Vec::new();
        for (offset, context_row) in context.chunks_exact_mut(hidden).enumerate() {
            let row = first + offset;
            let keys = text_of_row[row].clone();
            let query = &projections[row * width..row * width + hidden];
            for head in 0..self.heads {
                let columns = head * head_size..(head + 1) * head_size;
                scores.clear();
                scores.extend(keys.clone().map(|key| {
                    let bias = self.relative_bias.as_ref().map_or(0.0, |bias| {
                        bias.at(self.heads, head, row - keys.start, key - keys.start)
                    });
                    let key = &projections[key * width + hidden..key * width + 2 * hidden];
                    bias + dot(&query[columns.clone()], &key[columns.clone()]) * scale
                }));
                softmax(&mut scores);
                let out = &mut context_row[columns.clone()];
                out.fill(0.0);
                for (weight, key) in scores.iter().zip(keys.clone()) {
                    let value = &projections[key * width + 2 * hidden..(key + 1) * width];
                    for (o, v) in out.iter_mut().zip(&value[columns.clone()]) {
                        *o += weight * v;
                    }
                }
            }
        }
        let mut projected = vec![0f32; rows * hidden];
        self.linear_quantised(&context, &layer.attention_output, &mut projected);
        add_into(states, &projected);
        self.layer_norm(states, &layer.attention_norm);
        let mut intermediate = vec![0f32; rows * layer.intermediate.outputs];
        self.linear_quantised(states, &layer.intermediate, &mut intermediate);
        intermediate.iter_mut().for_each(|x| *x = gelu_erf(*x));
        self.linear_quantised(&intermediate, &layer.output, &mut projected);
        add_into(states, &projected);
        self.layer_norm(states, &layer.output_norm);
        if let Some(following) = following {
            self.linear_quantised(states, &following.query_key_value, next);
        }
    }

    /// `output = input · weightᵀ + bias` in 8-bit integers, on the calling thread.
    fn linear_quantised(&self, input: &[f32], layer: &Linear, output: &mut [f32]) {
        let rows = input.len() / layer.inputs;
        let weight = layer
            .quantised
            .as_ref()
            .expect("8-bit passes run only with the 8-bit weights loaded");
        let input = QuantisedInputs::quantise(input, rows, layer.inputs);
        match self.int8_kernel {
            Some(kernel) => int8::product_with(kernel, &input, weight, &layer.bias, output),
            None => int8::product(&input, weight, &layer.bias, output),
        }
    }

    /// Self-attention of one text: `query_key_value` is its `length × 3·hidden` projections,
    /// `context` receives `length × hidden`, `scores` is `length × length` scratch.
    fn attention(
        &self,
        query_key_value: &[f32],
        length: usize,
        scores: &mut [f32],
        context: &mut [f32],
    ) {
        let hidden = self.hidden;
        let row = 3 * hidden;
        assert_eq!(query_key_value.len(), length * row);
        assert_eq!(scores.len(), length * length);
        assert_eq!(context.len(), length * hidden);
        let head_size = hidden / self.heads;
        let scale = 1.0 / (head_size as f32).sqrt();
        for head in 0..self.heads {
            let offset = head * head_size;
            // MPNet's bias by relative position is the products' starting value, which the
            // product then adds to (`gemm` reads `scores` when told to, weighing it by 1).
            let has_bias = self.relative_bias.is_some();
            if let Some(bias) = &self.relative_bias {
                for (query, line) in scores.chunks_exact_mut(length).enumerate() {
                    for (key, score) in line.iter_mut().enumerate() {
                        *score = bias.at(self.heads, head, query, key);
                    }
                }
            }
            // scores = Q_h · K_hᵀ, scaled (added to the bias where there is one).
            // SAFETY: the asserts above: Q_h and K_h are `length × head_size` windows of
            // `query_key_value` (row stride 3·hidden, column offsets below hidden and
            // 2·hidden), `scores` is length × length.
            unsafe {
                gemm::gemm(
                    length,
                    length,
                    head_size,
                    scores.as_mut_ptr(),
                    1,
                    length as isize,
                    has_bias,
                    query_key_value.as_ptr().add(offset),
                    1,
                    row as isize,
                    query_key_value.as_ptr().add(hidden + offset),
                    row as isize,
                    1,
                    1.0,
                    scale,
                    false,
                    false,
                    false,
                    Parallelism::None,
                );
            }
            for line in scores.chunks_exact_mut(length) {
                softmax(line);
            }
            // context_h = P · V_h, into the head's columns of `context`.
            // SAFETY: V_h is a `length × head_size` window of `query_key_value` at column
            // 2·hidden + offset (row stride 3·hidden); the destination is the head's
            // `length × head_size` window of `context` (row stride hidden).
            unsafe {
                gemm::gemm(
                    length,
                    head_size,
                    length,
                    context.as_mut_ptr().add(offset),
                    1,
                    hidden as isize,
                    false,
                    scores.as_ptr(),
                    1,
                    length as isize,
                    query_key_value.as_ptr().add(2 * hidden + offset),
                    1,
                    row as isize,
                    0.0,
                    1.0,
                    false,
                    false,
                    false,
                    Parallelism::None,
                );
            }
        }
    }

    /// `output = input · weightᵀ + bias` for `rows` rows, in F32.
    fn linear(
        &self,
        input: &[f32],
        rows: usize,
        layer: &Linear,
        output: &mut [f32],
        parallelism: Parallelism,
    ) {
        assert_eq!(input.len(), rows * layer.inputs);
        assert_eq!(output.len(), rows * layer.outputs);
        assert_eq!(layer.weight.len(), layer.inputs * layer.outputs);
        for line in output.chunks_exact_mut(layer.outputs) {
            line.copy_from_slice(&layer.bias);
        }
        // SAFETY: the asserts above: `input` is rows × inputs, `output` rows × outputs, and
        // the weight, stored transposed, inputs × outputs (row stride `outputs`).
        unsafe {
            gemm::gemm(
                rows,
                layer.outputs,
                layer.inputs,
                output.as_mut_ptr(),
                1,
                layer.outputs as isize,
                true,
                input.as_ptr(),
                1,
                layer.inputs as isize,
                layer.weight.as_ptr(),
                1,
                layer.outputs as isize,
                1.0,
                1.0,
                false,
                false,
                false,
                parallelism,
            );
        }
    }

    fn layer_norm(&self, states: &mut [f32], norm: &LayerNorm) {
        let size = self.hidden as f32;
        for row in states.chunks_exact_mut(self.hidden) {
            let mean = sum(row) / size;
            row.iter_mut().for_each(|x| *x -= mean);
            let variance = dot(row, row) / size;
            let inverse = 1.0 / (variance + self.norm_epsilon).sqrt();
            for ((x, w), b) in row.iter_mut().zip(&norm.weight).zip(&norm.bias) {
                *x = *x * inverse * w + b;
            }
        }
    }
}

/// `texts` cut into `groups` runs of consecutive texts (fewer where there are fewer texts),
/// each cut placed where the tokens before it come nearest their share of the whole; every
/// run holds at least one text.
fn balanced_groups(texts: &[&[u32]], groups: usize) -> Vec<std::ops::Range<usize>> {
    let groups = groups.clamp(1, texts.len().max(1));
    let total: usize = texts.iter().map(|ids| ids.len()).sum();
    // before[i]: the tokens of texts[..i].
    let before: Vec<usize> = std::iter::once(0)
        .chain(texts.iter().scan(0, |sum, ids| {
            *sum += ids.len();
            Some(*sum)
        }))
        .collect();
    let mut cuts = vec![0];
    for group in 1..groups {
        let share = total * group / groups;
        let previous = *cuts.last().unwrap_or(&0);
        // Room for one text in this run and in each run still to come.
        let candidates = previous + 1..=texts.len() - (groups - group);
        let cut = candidates
            .min_by_key(|&cut| before[cut].abs_diff(share))
            .unwrap_or(previous + 1);
        cuts.push(cut);
    }
    cuts.push(texts.len());
    cuts.windows(2).map(|pair| pair[0]..pair[1]).collect()
}

/// Running sums a reduction keeps apart: one running float sum is a chain of dependent
/// adds, a few cycles a value, which the compiler may not reorder; sixteen apart vectorise.
/// Measured on attention's dot products and the layer norms (2026-12-03, the 8-bit query
/// pass on new short texts, alternated call by call in three runs): 0.90–0.91 × the time and
/// 0.86 × the CPU of one chain each.
const SUMS: usize = 16;

/// `Σ a·b`, over [`SUMS`] running sums added pairwise at the end. Within float rounding of
/// the sum in order, and always the same for the same values.
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut sums = [0f32; SUMS];
    let (pairs_a, pairs_b) = (a.chunks_exact(SUMS), b.chunks_exact(SUMS));
    let mut tail = 0f32;
    for (x, y) in pairs_a.remainder().iter().zip(pairs_b.remainder()) {
        tail += x * y;
    }
    for (x, y) in pairs_a.zip(pairs_b) {
        for ((sum, x), y) in sums.iter_mut().zip(x).zip(y) {
            *sum += x * y;
        }
    }
    pairwise(sums) + tail
}

/// `Σ a`, as [`dot`] sums.
fn sum(a: &[f32]) -> f32 {
    let mut sums = [0f32; SUMS];
    let chunks = a.chunks_exact(SUMS);
    let tail: f32 = chunks.remainder().iter().sum();
    for chunk in chunks {
        for (sum, x) in sums.iter_mut().zip(chunk) {
            *sum += x;
        }
    }
    pairwise(sums) + tail
}

fn pairwise(mut sums: [f32; SUMS]) -> f32 {
    let mut width = SUMS;
    while width > 1 {
        width /= 2;
        for i in 0..width {
            sums[i] += sums[i + width];
        }
    }
    sums[0]
}

fn add_into(target: &mut [f32], addend: &[f32]) {
    target.iter_mut().zip(addend).for_each(|(t, a)| *t += a);
}

fn softmax(line: &mut [f32]) {
    let max = line.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut sum = 0.0;
    for x in line.iter_mut() {
        *x = (*x - max).exp();
        sum += *x;
    }
    line.iter_mut().for_each(|x| *x /= sum);
}

/// GELU with the error function, as BERT's "gelu" (not the tanh approximation).
fn gelu_erf(x: f32) -> f32 {
    0.5 * x * (1.0 + erf(x * std::f32::consts::FRAC_1_SQRT_2))
}

/// erf as a rational polynomial on [-4, 4] (Eigen's `generic_fast_erf_float`, also
/// XNNPACK's): within a few float ulps of the exact function and, unlike a library call,
/// plain arithmetic the compiler vectorises. A library erf took 1.4 of 8.7 ms for a dozen
/// tokens (110 000 calls); this takes a tenth of that.
fn erf(x: f32) -> f32 {
    let x = x.clamp(-4.0, 4.0);
    let x2 = x * x;
    let mut p = -2.726_142_3e-10_f32;
    p = p * x2 + 2.770_681_4e-8;
    p = p * x2 - 2.101_024e-6;
    p = p * x2 - 5.692_506_4e-5;
    p = p * x2 - 7.349_906_3e-4;
    p = p * x2 - 2.954_600_1e-3;
    p = p * x2 - 1.609_603_3e-2;
    let mut q = -1.456_607_2e-5_f32;
    q = q * x2 - 2.133_740_6e-4;
    q = q * x2 - 1.682_827e-3;
    q = q * x2 - 7.373_329_2e-3;
    q = q * x2 - 1.426_474e-2;
    x * p / q
}

/// `matrix` (`rows × columns`, row-major) transposed: `columns × rows`, row-major.
fn transposed(matrix: &[f32], rows: usize, columns: usize) -> Vec<f32> {
    debug_assert_eq!(matrix.len(), rows * columns);
    let mut out = vec![0f32; matrix.len()];
    for (row, line) in matrix.chunks_exact(columns).enumerate() {
        for (column, &value) in line.iter().enumerate() {
            out[column * rows + row] = value;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tiny MPNet with random weights and what `transformers`' MPNetModel computes with it
    /// (`scripts/python/tiny_mpnet.py`).
    fn tiny_mpnet(threads: usize) -> (FastBert, serde_json::Value) {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/tiny_mpnet");
        let config: EncoderConfig =
            serde_json::from_str(&std::fs::read_to_string(dir.join("config.json")).unwrap())
                .unwrap();
        assert!(config.is_mpnet());
        let model = FastBert::load(&dir.join("model.safetensors"), &config, threads).unwrap();
        let expected =
            serde_json::from_str(&std::fs::read_to_string(dir.join("expected.json")).unwrap())
                .unwrap();
        (model, expected)
    }

    fn ids_and_states(expected: &serde_json::Value) -> Vec<(Vec<u32>, Vec<f32>)> {
        let inputs = expected["inputs"].as_array().unwrap();
        let states = expected["states"].as_array().unwrap();
        inputs
            .iter()
            .zip(states)
            .map(|(ids, rows)| {
                let ids = ids.as_array().unwrap().iter();
                let rows = rows.as_array().unwrap().iter();
                (
                    ids.map(|id| id.as_u64().unwrap() as u32).collect(),
                    rows.flat_map(|row| row.as_array().unwrap().iter())
                        .map(|value| value.as_f64().unwrap() as f32)
                        .collect(),
                )
            })
            .collect()
    }

    #[test]
    fn mpnets_relative_position_buckets_are_transformers_at_every_distance() {
        let (_, expected) = tiny_mpnet(1);
        let from = expected["buckets"]["from"].as_i64().unwrap();
        let buckets = expected["buckets"]["values"].as_array().unwrap();
        assert_eq!(buckets.len(), 399);
        for (offset, bucket) in buckets.iter().enumerate() {
            let relative = from + offset as i64;
            assert_eq!(
                relative_bucket(relative, MPNET_BUCKETS),
                bucket.as_u64().unwrap() as usize,
                "relative position {relative}"
            );
        }
    }

    #[test]
    fn an_mpnet_reads_as_transformers_reads_it_alone_in_a_batch_and_split_between_threads() {
        for threads in [1, 2] {
            let (model, expected) = tiny_mpnet(threads);
            let cases = ids_and_states(&expected);
            // 150 tokens: past the buckets' largest distance (128), so every kind of bucket.
            assert!(cases.iter().any(|(ids, _)| ids.len() > MPNET_MAX_DISTANCE));
            let texts: Vec<&[u32]> = cases.iter().map(|(ids, _)| ids.as_slice()).collect();
            let batch = model.forward_many(&texts).unwrap();
            for ((ids, want), batched) in cases.iter().zip(&batch) {
                let alone = model.forward(ids).unwrap();
                assert_eq!(&alone, batched, "a batch reads each text as it reads alone");
                assert_eq!(alone.len(), want.len());
                let worst = alone
                    .iter()
                    .zip(want)
                    .map(|(got, want)| (got - want).abs())
                    .fold(0f32, f32::max);
                assert!(
                    worst < 1e-4,
                    "{} tokens on {threads} threads: off by {worst}",
                    ids.len()
                );
            }
        }
    }

    #[test]
    fn an_mpnets_eight_bit_pass_keeps_the_bias_by_relative_position() {
        let (model, expected) = tiny_mpnet(2);
        let model = model.with_int8(None).unwrap();
        for (ids, want) in ids_and_states(&expected) {
            let got = &model.forward_many_in(&[&ids], Precision::Int8).unwrap()[0];
            for (got, want) in got.chunks_exact(32).zip(want.chunks_exact(32)) {
                let cosine = dot(got, want) / (dot(got, got) * dot(want, want)).sqrt();
                assert!(
                    cosine > 0.99,
                    "{} tokens: a row at cosine {cosine}",
                    ids.len()
                );
            }
        }
    }

    #[test]
    fn a_text_longer_than_an_mpnets_positions_after_the_first_two_is_refused() {
        let (model, _) = tiny_mpnet(1);
        // 200 rows in the position table, the first two before any token's.
        assert!(model.forward(&[5; 198]).is_ok());
        let refused = model.forward(&[5; 199]).unwrap_err().to_string();
        assert!(refused.contains("at most 198"), "{refused}");
    }

    #[test]
    fn the_fast_erf_is_the_library_erf_to_float_rounding() {
        let worst = (-60_000..=60_000)
            .map(|i| i as f32 / 10_000.0)
            .map(|x| (erf(x) - libm::erff(x)).abs())
            .fold(0f32, f32::max);
        assert!(worst < 1e-6, "worst difference {worst}");
        assert_eq!(erf(0.0), 0.0);
        assert!((erf(10.0) - 1.0).abs() < 1e-6 && (erf(-10.0) + 1.0).abs() < 1e-6);
    }

    #[test]
    fn a_batch_is_cut_into_runs_of_about_equal_tokens() {
        let cut = |lengths: &[usize], groups: usize| {
            let texts: Vec<Vec<u32>> = lengths.iter().map(|&n| vec![0; n]).collect();
            let texts: Vec<&[u32]> = texts.iter().map(Vec::as_slice).collect();
            balanced_groups(&texts, groups)
        };
        for (lengths, groups, expected) in [
            (&[5, 5][..], 2, vec![0..1, 1..2]),
            (&[8, 8, 8, 8], 2, vec![0..2, 2..4]),
            (&[30, 2, 2, 2], 2, vec![0..1, 1..4]),
            (&[2, 2, 2, 30], 2, vec![0..3, 3..4]),
            (&[1, 9, 1, 9, 1, 9], 2, vec![0..3, 3..6]),
            (&[8, 8, 8, 8], 4, vec![0..1, 1..2, 2..3, 3..4]),
            (&[6, 6, 6, 6, 6, 6], 3, vec![0..2, 2..4, 4..6]),
            // Every run keeps a text, even when one text holds most of the tokens.
            (&[30, 1, 1], 3, vec![0..1, 1..2, 2..3]),
            (&[1, 1, 30], 3, vec![0..1, 1..2, 2..3]),
            // Fewer texts than threads: a run a text.
            (&[4, 4], 4, vec![0..1, 1..2]),
            (&[4, 4, 4], 1, std::iter::once(0..3).collect()),
        ] {
            assert_eq!(cut(lengths, groups), expected, "{lengths:?} in {groups}");
        }
    }

    #[test]
    fn a_transposed_matrix_reads_back_as_the_original() {
        // 2 × 3: rows [1 2 3] and [4 5 6].
        let matrix = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
        let flipped = transposed(&matrix, 2, 3);
        assert_eq!(flipped, [1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
        assert_eq!(transposed(&flipped, 3, 2), matrix);
    }

    #[test]
    fn sums_over_running_sums_agree_with_the_sum_in_order_at_every_length() {
        // Lengths below, at and past the sixteen running sums, and the model's widths.
        for length in [0, 1, 5, 15, 16, 17, 31, 32, 33, 384, 1536] {
            let a: Vec<f32> = (0..length)
                .map(|i| ((i * 37 % 101) as f32 - 50.0) / 7.0)
                .collect();
            let b: Vec<f32> = (0..length)
                .map(|i| ((i * 53 % 89) as f32 - 44.0) / 3.0)
                .collect();
            let in_order: f64 = a.iter().zip(&b).map(|(x, y)| *x as f64 * *y as f64).sum();
            let magnitude: f64 = a
                .iter()
                .zip(&b)
                .map(|(x, y)| (*x as f64 * *y as f64).abs())
                .sum();
            assert!(
                (dot(&a, &b) as f64 - in_order).abs() <= 1e-6 * magnitude.max(1.0),
                "dot at {length}"
            );
            let in_order: f64 = a.iter().map(|x| *x as f64).sum();
            let magnitude: f64 = a.iter().map(|x| x.abs() as f64).sum();
            assert!(
                (sum(&a) as f64 - in_order).abs() <= 1e-6 * magnitude.max(1.0),
                "sum at {length}"
            );
        }
        // Every element counts once: a one in each place in turn.
        for length in [1, 16, 17, 40] {
            for place in 0..length {
                let mut a = vec![0f32; length];
                a[place] = 1.0;
                assert_eq!(sum(&a), 1.0, "{place} of {length}");
                assert_eq!(dot(&a, &a), 1.0, "{place} of {length}");
            }
        }
    }

    #[test]
    fn softmax_sums_to_one_and_survives_large_scores() {
        let mut line = [1000.0, 1000.0, -1000.0];
        softmax(&mut line);
        assert!((line.iter().sum::<f32>() - 1.0).abs() < 1e-6);
        assert!((line[0] - 0.5).abs() < 1e-6 && line[2] == 0.0);
    }
}
