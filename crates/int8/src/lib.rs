//! 8-bit integer matrix products for persona-prefs' query-side BERT pass
//! (`src/embed/fast_bert.rs`).
//!
//! Why: a prompt builder that sends text waits for one short sentence to pass the model, and
//! at a dozen tokens that pass is bound by the dense layers' weights: 42 MB in F32, more than
//! this machine's 32 MB cache, read once per layer per text. As bytes with one scale per
//! weight row they are 10.5 MB, and AVX2 multiplies 32 of them per instruction (`maddubs`)
//! against 8 F32 per FMA.
//!
//! The arithmetic: each weight row `j` is `w_j ≈ s_j · q_j` with `q_j` in −127..=127
//! (symmetric, `s_j = max |w_j| / 127`); each input row `i` likewise, `x_i ≈ t_i · p_i`,
//! quantised when the product runs (so its scale follows the token: BERT's hidden states differ
//! in range from token to token). The product `x_i · w_j ≈ t_i · s_j · Σ p_ik q_jk` is summed
//! exactly in 32-bit integers: the AVX2 kernel and the portable one give the same integers (a
//! test holds them equal), so the vectors do not depend on the CPU beyond float rounding in
//! the scales.
//!
//! `maddubs` multiplies unsigned by signed bytes. The input's magnitude is the unsigned side
//! and its sign is moved onto the weight (`sign_epi8`); pairs then sum to at most
//! 2 · 127 · 127 = 32 258, inside the 16-bit lane, so nothing saturates.
//!
//! Measured on the six layers' products at 6 rows (a thread's half of a 12-token query), one
//! core: 1.39 ms with the inputs as the outer loop in blocks of 4 rows, 1.05 with the weights
//! outer and exact-length input blocks (below). 7-bit weights stored as `q + 64` would need no
//! sign step and half the registers per input (0.80 ms), but they cost the labelled injection
//! set 0.023 of recall@5 (`benches/models.rs`, one run), more than the 0.01 allowed.

/// Values per kernel step (one 256-bit register of bytes); rows are padded to a multiple.
const STEP: usize = 32;
/// The largest quantised magnitude, of weights and inputs alike.
const LEVELS: f32 = 127.0;

/// Weight rows, quantised to −127..=127 with one scale per row, zero-padded to a multiple of
/// [`STEP`] (zeros add nothing to a dot product).
pub struct QuantisedWeights {
    values: Vec<i8>,
    scales: Vec<f32>,
    rows: usize,
    stride: usize,
}

impl QuantisedWeights {
    /// `matrix` (`rows × columns`, row-major, one output per row) with one scale per row.
    pub fn quantise(matrix: &[f32], rows: usize, columns: usize) -> QuantisedWeights {
        assert!(columns > 0, "a weight row of no columns");
        assert_eq!(matrix.len(), rows * columns);
        let stride = padded(columns);
        let mut values = vec![0; rows * stride];
        let mut scales = Vec::with_capacity(rows);
        for (row, values) in matrix
            .chunks_exact(columns)
            .zip(values.chunks_exact_mut(stride))
        {
            scales.push(quantise_row(row, values));
        }
        QuantisedWeights {
            values,
            scales,
            rows,
            stride,
        }
    }

    /// How many rows (outputs of a product) there are.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// The scale of row `index`: its values are `scale · q`.
    pub fn scale(&self, index: usize) -> f32 {
        self.scales[index]
    }

    /// The quantised values of row `index`, zero-padded to a multiple of 32.
    pub fn row(&self, index: usize) -> &[i8] {
        &self.values[index * self.stride..(index + 1) * self.stride]
    }
}

/// Input rows, quantised to −127..=127 with one scale per row, zero-padded to a multiple of
/// [`STEP`]; their magnitudes are kept beside them for the kernel's unsigned side.
pub struct QuantisedInputs {
    values: Vec<i8>,
    magnitudes: Vec<u8>,
    scales: Vec<f32>,
    rows: usize,
    columns: usize,
    stride: usize,
}

impl QuantisedInputs {
    /// `matrix` (`rows × columns`, row-major) with one scale per row.
    pub fn quantise(matrix: &[f32], rows: usize, columns: usize) -> QuantisedInputs {
        let mut quantised = QuantisedInputs::empty(columns);
        quantised.requantise(matrix, rows);
        quantised
    }

    /// No rows yet, each `columns` wide: for [`QuantisedInputs::requantise`] to fill.
    pub fn empty(columns: usize) -> QuantisedInputs {
        assert!(columns > 0, "an input row of no columns");
        QuantisedInputs {
            values: Vec::new(),
            magnitudes: Vec::new(),
            scales: Vec::new(),
            rows: 0,
            columns,
            stride: padded(columns),
        }
    }

    /// Refills these inputs with `matrix`'s `rows` rows, reusing the buffers.
    pub fn requantise(&mut self, matrix: &[f32], rows: usize) {
        assert_eq!(matrix.len(), rows * self.columns);
        self.rows = rows;
        self.values.clear();
        self.values.resize(rows * self.stride, 0);
        self.scales.clear();
        for (row, values) in matrix
            .chunks_exact(self.columns)
            .zip(self.values.chunks_exact_mut(self.stride))
        {
            self.scales.push(quantise_row(row, values));
        }
        self.magnitudes.clear();
        self.magnitudes
            .extend(self.values.iter().map(|q| q.unsigned_abs()));
    }

    /// The scale of row `index`: its values are `scale · p`.
    pub fn scale(&self, index: usize) -> f32 {
        self.scales[index]
    }

    /// The quantised values of row `index`, zero-padded to a multiple of 32.
    pub fn row(&self, index: usize) -> &[i8] {
        &self.values[index * self.stride..(index + 1) * self.stride]
    }

    fn magnitudes(&self, index: usize) -> &[u8] {
        &self.magnitudes[index * self.stride..(index + 1) * self.stride]
    }
}

fn padded(columns: usize) -> usize {
    columns.div_ceil(STEP) * STEP
}

/// Writes `row` quantised to −127..=127 (symmetric: scale = largest magnitude / 127) into the
/// front of `out`, and returns the scale.
fn quantise_row(row: &[f32], out: &mut [i8]) -> f32 {
    let largest = row.iter().fold(0f32, |m, x| m.max(x.abs()));
    // An all-zero row quantises to zeros whatever its scale; 1 keeps the division finite.
    let scale = if largest > 0.0 { largest / LEVELS } else { 1.0 };
    let inverse = 1.0 / scale;
    for (value, x) in out.iter_mut().zip(row) {
        // Rounding half away from zero, as `f32::round`, but as an add and a truncating
        // conversion, which vectorise (`round` is a library call per value here).
        let scaled = (x * inverse).clamp(-LEVELS, LEVELS);
        *value = (scaled + 0.5f32.copysign(scaled)) as i8;
    }
    scale
}

/// `output = input · weightsᵀ + bias` (`input.rows × weights.rows`, row-major), on the
/// calling thread: the AVX2 kernel where the CPU has it, [`portable_product`] otherwise.
pub fn product(
    input: &QuantisedInputs,
    weights: &QuantisedWeights,
    bias: &[f32],
    output: &mut [f32],
) {
    assert_eq!(input.stride, weights.stride);
    assert_eq!(bias.len(), weights.rows);
    assert_eq!(output.len(), input.rows * weights.rows);
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: AVX2 is present (checked above); the kernel reads rows through the slices'
        // bounds-checked accessors and writes only `output`, whose size is asserted above.
        unsafe { avx2::product(input, weights, bias, output) };
        return;
    }
    portable_product(input, weights, bias, output);
}

/// [`product`]'s arithmetic in plain Rust: what the AVX2 kernel is held to, integer for
/// integer, and what runs on CPUs without AVX2.
pub fn portable_product(
    input: &QuantisedInputs,
    weights: &QuantisedWeights,
    bias: &[f32],
    output: &mut [f32],
) {
    assert_eq!(input.stride, weights.stride);
    assert_eq!(output.len(), input.rows * weights.rows);
    for (i, line) in output.chunks_exact_mut(weights.rows.max(1)).enumerate() {
        let x = input.row(i);
        for (j, out) in line.iter_mut().enumerate() {
            let sum = x
                .iter()
                .zip(weights.row(j))
                .map(|(&p, &q)| p as i32 * q as i32)
                .sum();
            *out = finish(sum, input.scales[i], weights.scales[j], bias[j]);
        }
    }
}

/// The float result of one exact integer dot product.
fn finish(sum: i32, input_scale: f32, weight_scale: f32, bias: f32) -> f32 {
    sum as f32 * (input_scale * weight_scale) + bias
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::*;

    use super::{QuantisedInputs, QuantisedWeights, STEP, finish};

    /// Weight rows per block. The weights are the outer loop, so each block of them is read
    /// from memory once and meets every input row while in the first-level cache (an input
    /// row is at most 1.5 KB); with the inputs outer, a query's 10.5 MB of weights were read
    /// once per block of inputs.
    const WEIGHT_BLOCK: usize = 2;
    /// Input rows per block: 4 × 2 accumulators, 2 weights, an input and its magnitudes, a
    /// product and the constant of ones fit AVX2's 16 registers (6 × 2 spilled and was a third
    /// slower). A last, shorter block runs a kernel of its own length rather than repeating
    /// rows. Measured (six layers' products, one core): 4 × 2, 3 × 2 and 2 × 3 within 2 %.
    const INPUT_BLOCK: usize = 4;

    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn product(
        input: &QuantisedInputs,
        weights: &QuantisedWeights,
        bias: &[f32],
        output: &mut [f32],
    ) {
        let mut j = 0;
        while j < weights.rows {
            let block = Block {
                input,
                weights,
                bias,
                first_weight: j,
                weight_rows: (weights.rows - j).min(WEIGHT_BLOCK),
            };
            let mut i = 0;
            while input.rows - i >= INPUT_BLOCK {
                // SAFETY: AVX2 is enabled here; `block` reads rows i..i+4, which exist.
                unsafe { block.rows::<INPUT_BLOCK>(i, output) };
                i += INPUT_BLOCK;
            }
            // SAFETY: as above, for the rows left (fewer than four).
            unsafe {
                match input.rows - i {
                    0 => {}
                    1 => block.rows::<1>(i, output),
                    2 => block.rows::<2>(i, output),
                    _ => block.rows::<3>(i, output),
                }
            }
            j += WEIGHT_BLOCK;
        }
    }

    struct Block<'a> {
        input: &'a QuantisedInputs,
        weights: &'a QuantisedWeights,
        bias: &'a [f32],
        first_weight: usize,
        /// 1..=WEIGHT_BLOCK: the last block may be short; its missing rows repeat its last,
        /// computed and never written.
        weight_rows: usize,
    }

    impl Block<'_> {
        /// The products of input rows `first..first + ROWS` with this block's weight rows.
        #[target_feature(enable = "avx2")]
        unsafe fn rows<const ROWS: usize>(&self, first: usize, output: &mut [f32]) {
            let (input, weights) = (self.input, self.weights);
            let width = weights.rows;
            let ones = _mm256_set1_epi16(1);
            // Loops, not `array::from_fn`, here and below: a closure does not inherit
            // `target_feature`, is not inlined, and its vectors go through memory (measured:
            // with them this kernel gained nothing on the old one in the whole pass).
            let mut weight_rows = [weights.row(self.first_weight); WEIGHT_BLOCK];
            for (b, row) in weight_rows.iter_mut().enumerate() {
                *row = weights.row(self.first_weight + b.min(self.weight_rows - 1));
            }
            let mut signs = [input.row(first); ROWS];
            let mut magnitudes = [input.magnitudes(first); ROWS];
            for a in 1..ROWS {
                signs[a] = input.row(first + a);
                magnitudes[a] = input.magnitudes(first + a);
            }
            let mut sums = [[_mm256_setzero_si256(); WEIGHT_BLOCK]; ROWS];
            let mut k = 0;
            while k < weights.stride {
                let mut w = [_mm256_setzero_si256(); WEIGHT_BLOCK];
                for (w, row) in w.iter_mut().zip(&weight_rows) {
                    // SAFETY: every row is `stride` bytes and k + STEP <= stride.
                    *w = unsafe { _mm256_loadu_si256(row.as_ptr().add(k).cast()) };
                }
                for a in 0..ROWS {
                    // SAFETY: as above.
                    let (x, m) = unsafe {
                        (
                            _mm256_loadu_si256(signs[a].as_ptr().add(k).cast()),
                            _mm256_loadu_si256(magnitudes[a].as_ptr().add(k).cast()),
                        )
                    };
                    for b in 0..WEIGHT_BLOCK {
                        let pairs = _mm256_maddubs_epi16(m, _mm256_sign_epi8(w[b], x));
                        sums[a][b] = _mm256_add_epi32(sums[a][b], _mm256_madd_epi16(pairs, ones));
                    }
                }
                k += STEP;
            }
            for (a, sums) in sums.iter().enumerate() {
                let i = first + a;
                for (b, &v) in sums.iter().enumerate().take(self.weight_rows) {
                    let j = self.first_weight + b;
                    let s =
                        _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
                    let s = _mm_hadd_epi32(s, s);
                    let s = _mm_hadd_epi32(s, s);
                    output[i * width + j] = finish(
                        _mm_cvtsi128_si32(s),
                        input.scales[i],
                        weights.scales[j],
                        self.bias[j],
                    );
                }
            }
        }
    }
}
