//! The local model's BERT with its matrix weights quantised to 8 bits (GGML Q8_0: blocks of 32
//! weights sharing one scale) when it is loaded, for the request path: a prompt builder that
//! sends text waits for one forward pass of a short sentence, and at a dozen tokens that pass
//! is bound by reading the weights (22 M of them: 88 MB in F32, 23 MB in Q8_0) more than by
//! arithmetic. Embeddings, layer norms, biases and attention stay in F32. `benches/models.rs`
//! measures its time and its quality beside the F32 model. Measured on 2026-11-26: the same
//! quality (pairs, recall@5; every vector within cosine 0.9994), 15 % faster for one message
//! (16.6 against 19.5 ms) and 2.8× slower in batches of 32, so the service does not load it:
//! the time of one short text goes to candle's small tensor operations more than to reading
//! weights.
//!
//! The layout and arithmetic are candle-transformers' `bert.rs` (the Hugging Face BERT),
//! inference only: no dropout, absolute positions, GELU (erf).

use candle_core::quantized::{GgmlDType, QMatMul, QTensor};
use candle_core::{D, DType, Module, Result, Tensor};
use candle_nn::{Embedding, LayerNorm, VarBuilder, embedding, layer_norm};
use candle_transformers::models::bert::Config as BertConfig;

/// A linear layer whose weight is quantised: `x·Wᵀ + b`.
struct QuantisedLinear {
    weight: QMatMul,
    bias: Tensor,
}

impl QuantisedLinear {
    fn load(inputs: usize, outputs: usize, vb: VarBuilder) -> Result<QuantisedLinear> {
        let weight = vb.get((outputs, inputs), "weight")?;
        let weight = QMatMul::from_qtensor(QTensor::quantize(&weight, GgmlDType::Q8_0)?)?;
        let bias = vb.get(outputs, "bias")?;
        Ok(QuantisedLinear { weight, bias })
    }

    fn forward(&self, xs: &Tensor) -> Result<Tensor> {
        self.weight.forward(xs)?.broadcast_add(&self.bias)
    }
}

struct Layer {
    query: QuantisedLinear,
    key: QuantisedLinear,
    value: QuantisedLinear,
    attention_output: QuantisedLinear,
    attention_norm: LayerNorm,
    intermediate: QuantisedLinear,
    output: QuantisedLinear,
    output_norm: LayerNorm,
}

pub struct QuantisedBert {
    word_embeddings: Embedding,
    position_embeddings: Embedding,
    token_type_embeddings: Embedding,
    embeddings_norm: LayerNorm,
    layers: Vec<Layer>,
    heads: usize,
    head_size: usize,
}

impl QuantisedBert {
    pub fn load(vb: VarBuilder, config: &BertConfig) -> Result<QuantisedBert> {
        let vb = if vb.contains_tensor("bert.embeddings.word_embeddings.weight") {
            vb.pp("bert")
        } else {
            vb
        };
        let hidden = config.hidden_size;
        let embeddings = vb.pp("embeddings");
        let word_embeddings =
            embedding(config.vocab_size, hidden, embeddings.pp("word_embeddings"))?;
        let position_embeddings = embedding(
            config.max_position_embeddings,
            hidden,
            embeddings.pp("position_embeddings"),
        )?;
        let token_type_embeddings = embedding(
            config.type_vocab_size,
            hidden,
            embeddings.pp("token_type_embeddings"),
        )?;
        let embeddings_norm =
            layer_norm(hidden, config.layer_norm_eps, embeddings.pp("LayerNorm"))?;
        let layers = (0..config.num_hidden_layers)
            .map(|index| {
                let vb = vb.pp(format!("encoder.layer.{index}"));
                let attention = vb.pp("attention");
                Ok(Layer {
                    query: QuantisedLinear::load(hidden, hidden, attention.pp("self.query"))?,
                    key: QuantisedLinear::load(hidden, hidden, attention.pp("self.key"))?,
                    value: QuantisedLinear::load(hidden, hidden, attention.pp("self.value"))?,
                    attention_output: QuantisedLinear::load(
                        hidden,
                        hidden,
                        attention.pp("output.dense"),
                    )?,
                    attention_norm: layer_norm(
                        hidden,
                        config.layer_norm_eps,
                        attention.pp("output.LayerNorm"),
                    )?,
                    intermediate: QuantisedLinear::load(
                        hidden,
                        config.intermediate_size,
                        vb.pp("intermediate.dense"),
                    )?,
                    output: QuantisedLinear::load(
                        config.intermediate_size,
                        hidden,
                        vb.pp("output.dense"),
                    )?,
                    output_norm: layer_norm(
                        hidden,
                        config.layer_norm_eps,
                        vb.pp("output.LayerNorm"),
                    )?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(QuantisedBert {
            word_embeddings,
            position_embeddings,
            token_type_embeddings,
            embeddings_norm,
            layers,
            heads: config.num_attention_heads,
            head_size: hidden / config.num_attention_heads,
        })
    }

    /// The last hidden state, (batch, tokens, hidden), as `BertModel::forward` returns it.
    pub fn forward(
        &self,
        input_ids: &Tensor,
        token_type_ids: &Tensor,
        attention_mask: &Tensor,
    ) -> Result<Tensor> {
        let (_, tokens) = input_ids.dims2()?;
        let positions = Tensor::arange(0u32, tokens as u32, input_ids.device())?;
        let embedded = (self.word_embeddings.forward(input_ids)?
            + self.token_type_embeddings.forward(token_type_ids)?)?
        .broadcast_add(&self.position_embeddings.forward(&positions)?)?;
        let mut hidden = self.embeddings_norm.forward(&embedded)?;
        // 0 where a token is real, the most negative float where it is padding.
        let mask = attention_mask
            .to_dtype(DType::F32)?
            .unsqueeze(1)?
            .unsqueeze(1)?;
        let mask = ((mask.ones_like()? - &mask)? * f64::from(f32::MIN))?;
        for layer in &self.layers {
            hidden = self.layer(layer, &hidden, &mask)?;
        }
        Ok(hidden)
    }

    fn layer(&self, layer: &Layer, hidden: &Tensor, mask: &Tensor) -> Result<Tensor> {
        let heads = |xs: Tensor| -> Result<Tensor> {
            let (batch, tokens, _) = xs.dims3()?;
            xs.reshape((batch, tokens, self.heads, self.head_size))?
                .transpose(1, 2)?
                .contiguous()
        };
        let query = heads(layer.query.forward(hidden)?)?;
        let key = heads(layer.key.forward(hidden)?)?;
        let value = heads(layer.value.forward(hidden)?)?;
        let scores = (query.matmul(&key.t()?)? / (self.head_size as f64).sqrt())?;
        let probabilities = candle_nn::ops::softmax(&scores.broadcast_add(mask)?, D::Minus1)?;
        let context = probabilities
            .matmul(&value)?
            .transpose(1, 2)?
            .contiguous()?
            .flatten_from(D::Minus2)?;
        let attended = layer
            .attention_norm
            .forward(&(layer.attention_output.forward(&context)? + hidden)?)?;
        let intermediate = layer.intermediate.forward(&attended)?.gelu_erf()?;
        layer
            .output_norm
            .forward(&(layer.output.forward(&intermediate)? + &attended)?)
    }
}
