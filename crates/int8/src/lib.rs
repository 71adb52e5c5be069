//! 8-bit integer matrix products for persona-prefs' query-side BERT pass
//! (`src/embed/fast_bert.rs`).
//!
//! Why: a prompt builder that sends text waits for one short sentence to pass the model, and
//! at a dozen tokens that pass is bound by the dense layers' weights: 42 MB in F32, more than
//! this machine's 32 MB cache, read once per layer per text. As 8-bit integers with one scale
//! per weight row they are 10.5 MB, and AVX2 multiplies 32 of them per instruction
//! (`maddubs`) against 8 F32 per FMA. Measured on the six layers' products at 12 tokens, one
//! core: 3.6 ms against `gemm`'s 8.8 (a microbench; `benches/models.rs` times the whole pass).
//!
//! The arithmetic: each weight row `j` is `w_j ≈ s_j · q_j` with `q_j` in −127..=127 (symmetric,
//! `s_j = max |w_j| / 127`); each input row `i` likewise, quantised when the product runs (so
//! its scale follows the token: BERT's hidden states differ in range from token to token). The
//! product `x_i · w_j ≈ s_i · s_j · Σ q_ik q_jk` is summed exactly in 32-bit integers: the
//! AVX2 kernel and the portable one give the same integers (a test holds them equal), so the
//! vectors do not depend on the CPU beyond float rounding in the scales.
//!
//! `maddubs` multiplies unsigned by signed bytes. The input's magnitude is the unsigned side
//! and its sign is moved onto the weight (`sign_epi8`); pairs then sum to at most
//! 2 · 127 · 127 = 32 258, inside the 16-bit lane, so nothing saturates.

/// Values per kernel step (one 256-bit register of bytes); rows are padded to a multiple.
const STEP: usize = 32;

/// A matrix of `rows × columns` quantised row by row; each row padded with zeros to a
/// multiple of [`STEP`] (zeros add nothing to a dot product).
pub struct QuantisedRows {
    values: Vec<i8>,
    /// `|values|`, kept beside them for the kernel's unsigned side (inputs only).
    magnitudes: Vec<u8>,
    scales: Vec<f32>,
    rows: usize,
    columns: usize,
    stride: usize,
}

impl QuantisedRows {
    /// `matrix` (`rows × columns`, row-major) with one symmetric scale per row.
    pub fn quantise(matrix: &[f32], rows: usize, columns: usize) -> QuantisedRows {
        let mut quantised = QuantisedRows::empty(columns);
        quantised.requantise(matrix, rows);
        quantised
    }

    /// An empty matrix of `columns`-wide rows, for [`QuantisedRows::requantise`] to fill.
    pub fn empty(columns: usize) -> QuantisedRows {
        QuantisedRows {
            values: Vec::new(),
            magnitudes: Vec::new(),
            scales: Vec::new(),
            rows: 0,
            columns,
            stride: columns.div_ceil(STEP) * STEP,
        }
    }

    /// Refills this matrix with `matrix`'s `rows` rows, reusing its buffers.
    pub fn requantise(&mut self, matrix: &[f32], rows: usize) {
        assert_eq!(matrix.len(), rows * self.columns);
        self.rows = rows;
        self.values.clear();
        self.values.resize(rows * self.stride, 0);
        self.magnitudes.clear();
        self.magnitudes.resize(rows * self.stride, 0);
        self.scales.clear();
        for (row, (values, magnitudes)) in matrix.chunks_exact(self.columns).zip(
            self.values
                .chunks_exact_mut(self.stride)
                .zip(self.magnitudes.chunks_exact_mut(self.stride)),
        ) {
            let largest = row.iter().fold(0f32, |m, x| m.max(x.abs()));
            // An all-zero row quantises to zeros whatever its scale; 1 keeps the division finite.
            let scale = if largest > 0.0 { largest / 127.0 } else { 1.0 };
            let inverse = 1.0 / scale;
            for ((value, magnitude), x) in values.iter_mut().zip(magnitudes.iter_mut()).zip(row) {
                // Rounding half away from zero, as `f32::round`, but as an add and a truncating
                // conversion, which vectorise (`round` is a library call per value here).
                let scaled = (x * inverse).clamp(-127.0, 127.0);
                let q = (scaled + 0.5f32.copysign(scaled)) as i8;
                *value = q;
                *magnitude = q.unsigned_abs();
            }
            self.scales.push(scale);
        }
    }

    /// The scale of row `index`: its values are `scale · q` for its quantised `q`.
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

/// `output = input · weightᵀ + bias` (`input.rows × weight.rows`, row-major). With
/// `threads` above 1 the weight's rows are split in two halves computed side by side in the
/// current rayon pool (the machine this was measured on has two cores; more bands untried).
pub fn product(
    input: &QuantisedRows,
    weight: &QuantisedRows,
    bias: &[f32],
    threads: usize,
    output: &mut [f32],
) {
    let width = weight.rows;
    assert_eq!(output.len(), input.rows * width);
    if threads <= 1 || width < 2 * threads {
        product_into(input, weight, bias, 0..width, output);
        return;
    }
    // Each band into a buffer of its own (no two threads write one slice), then into place:
    // the copy is a few microseconds beside a product's hundreds.
    let half = width / 2;
    let (mut left, mut right) = (
        vec![0f32; input.rows * half],
        vec![0f32; input.rows * (width - half)],
    );
    rayon::join(
        || product_into(input, weight, bias, 0..half, &mut left),
        || product_into(input, weight, bias, half..width, &mut right),
    );
    for ((row, left), right) in output
        .chunks_exact_mut(width)
        .zip(left.chunks_exact(half))
        .zip(right.chunks_exact(width - half))
    {
        row[..half].copy_from_slice(left);
        row[half..].copy_from_slice(right);
    }
}

/// `output[i][j - outputs.start] = bias[j] + input_i · weight_j` for every input row `i` and
/// the weight rows `outputs`; `output` is `input.rows × outputs.len()`, row-major. The AVX2
/// kernel where the CPU has it, [`portable_product_into`] otherwise.
pub fn product_into(
    input: &QuantisedRows,
    weight: &QuantisedRows,
    bias: &[f32],
    outputs: std::ops::Range<usize>,
    output: &mut [f32],
) {
    assert_eq!(input.stride, weight.stride);
    assert_eq!(bias.len(), weight.rows);
    assert!(outputs.start <= outputs.end && outputs.end <= weight.rows);
    assert_eq!(output.len(), input.rows * outputs.len());
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: AVX2 is present (checked above); the kernel reads rows through the slices'
        // bounds-checked accessors and writes only `output`, whose size is asserted above.
        unsafe { avx2::product_into(input, weight, bias, outputs, output) };
        return;
    }
    portable_product_into(input, weight, bias, outputs, output);
}

/// [`product`]'s arithmetic in plain Rust, one band (`outputs`) into `output`
/// (`input.rows × outputs.len()`): what the AVX2 kernel is held to, integer for integer, and
/// what runs on CPUs without AVX2.
pub fn portable_product_into(
    input: &QuantisedRows,
    weight: &QuantisedRows,
    bias: &[f32],
    outputs: std::ops::Range<usize>,
    output: &mut [f32],
) {
    let width = outputs.len();
    for i in 0..input.rows {
        let x = input.row(i);
        for j in outputs.clone() {
            output[i * width + j - outputs.start] = finish(
                dot(x, weight.row(j)),
                input.scales[i],
                weight.scales[j],
                bias[j],
            );
        }
    }
}

fn dot(x: &[i8], w: &[i8]) -> i32 {
    x.iter().zip(w).map(|(&a, &b)| a as i32 * b as i32).sum()
}

/// The float result of one exact integer dot product.
fn finish(sum: i32, input_scale: f32, weight_scale: f32, bias: f32) -> f32 {
    sum as f32 * (input_scale * weight_scale) + bias
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::*;

    use super::{QuantisedRows, STEP, finish};

    /// Input rows per block and weight rows per block: 4 × 3 accumulators of 8 lanes, 3 weight
    /// and 2 input registers and the constant of ones are two more than AVX2's 16 registers,
    /// which the compiler spills; other block shapes were not tried.
    const INPUT_BLOCK: usize = 4;
    const WEIGHT_BLOCK: usize = 3;

    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn product_into(
        input: &QuantisedRows,
        weight: &QuantisedRows,
        bias: &[f32],
        outputs: std::ops::Range<usize>,
        output: &mut [f32],
    ) {
        let width = outputs.len();
        let stride = weight.stride;
        let ones = _mm256_set1_epi16(1);
        let mut i = 0;
        while i < input.rows {
            let inputs = (input.rows - i).min(INPUT_BLOCK);
            let mut j = outputs.start;
            while j < outputs.end {
                let weights = (outputs.end - j).min(WEIGHT_BLOCK);
                let mut sums = [[_mm256_setzero_si256(); WEIGHT_BLOCK]; INPUT_BLOCK];
                // Rows past the block's end repeat its last row: read, never written back.
                let mut weight_rows = [weight.row(j).as_ptr(); WEIGHT_BLOCK];
                for (b, row) in weight_rows.iter_mut().enumerate() {
                    *row = weight.row(j + b.min(weights - 1)).as_ptr();
                }
                let mut sign_rows = [input.row(i).as_ptr(); INPUT_BLOCK];
                let mut magnitude_rows = [input.magnitudes(i).as_ptr(); INPUT_BLOCK];
                for a in 0..INPUT_BLOCK {
                    sign_rows[a] = input.row(i + a.min(inputs - 1)).as_ptr();
                    magnitude_rows[a] = input.magnitudes(i + a.min(inputs - 1)).as_ptr();
                }
                let mut k = 0;
                while k < stride {
                    let mut w = [_mm256_setzero_si256(); WEIGHT_BLOCK];
                    for b in 0..weights {
                        // SAFETY: every row is `stride` bytes and k + STEP <= stride.
                        w[b] = unsafe { _mm256_loadu_si256(weight_rows[b].add(k).cast()) };
                    }
                    for a in 0..inputs {
                        // SAFETY: as above.
                        let (x, m) = unsafe {
                            (
                                _mm256_loadu_si256(sign_rows[a].add(k).cast()),
                                _mm256_loadu_si256(magnitude_rows[a].add(k).cast()),
                            )
                        };
                        for b in 0..weights {
                            let signed = _mm256_sign_epi8(w[b], x);
                            let pairs = _mm256_maddubs_epi16(m, signed);
                            sums[a][b] =
                                _mm256_add_epi32(sums[a][b], _mm256_madd_epi16(pairs, ones));
                        }
                    }
                    k += STEP;
                }
                for a in 0..inputs {
                    for b in 0..weights {
                        let v = sums[a][b];
                        let s = _mm_add_epi32(
                            _mm256_castsi256_si128(v),
                            _mm256_extracti128_si256(v, 1),
                        );
                        let s = _mm_hadd_epi32(s, s);
                        let s = _mm_hadd_epi32(s, s);
                        output[(i + a) * width + j + b - outputs.start] = finish(
                            _mm_cvtsi128_si32(s),
                            input.scales[i + a],
                            weight.scales[j + b],
                            bias[j + b],
                        );
                    }
                }
                j += weights;
            }
            i += inputs;
        }
    }
}
