//! 8-bit integer matrix products for persona-prefs' query-side BERT pass
//! (`src/embed/fast_bert.rs`).
//!
//! Why: a prompt builder that sends text waits for one short sentence to pass the model, and
//! at a dozen tokens that pass is bound by the dense layers' weights: 42 MB in F32, more than
//! this machine's 32 MB cache, read once per layer per text. As bytes with one scale per
//! weight row they are 10.5 MB.
//!
//! The arithmetic: each weight row `j` is `w_j ≈ s_j · q_j` with `q_j` in −127..=127
//! (symmetric, `s_j = max |w_j| / 127`); each input row `i` likewise, `x_i ≈ t_i · p_i`,
//! quantised when the product runs (so its scale follows the token: BERT's hidden states differ
//! in range from token to token). The product `x_i · w_j ≈ t_i · s_j · Σ p_ik q_jk` is summed
//! exactly in 32-bit integers, and the floats finished in one order, so every kernel gives
//! the same floats to the bit (a test holds each to the portable one): the vectors do not
//! depend on the CPU.
//!
//! Three kernels, the fastest the CPU has chosen at each call ([`product`]):
//! - **AVX-512 VNNI** (`vnni`): `vpdpbusd` sums four byte products straight into each of
//!   sixteen 32-bit lanes, one lane an output. Measured on this machine's Xeon (Ice Lake
//!   class), one query's six layers of products, one thread (`benches/int8_products.rs`,
//!   alternated with AVX2): 6 rows 1.32 against 2.18 ms, 12 rows 1.71 against 3.55; at 6 rows
//!   it is within 1.1–1.4 × reading the weights once. The whole query pass: 2.50 against
//!   4.23 ms p50.
//! - **AVX2**: `maddubs` multiplies unsigned by signed bytes; the input's magnitude is the
//!   unsigned side and its sign is moved onto the weight (`sign_epi8`); pairs then sum to at
//!   most 2 · 127 · 127 = 32 258, inside the 16-bit lane, so nothing saturates. Measured on
//!   the six layers' products at 6 rows, one core: 1.39 ms with the inputs as the outer loop
//!   in blocks of 4 rows, 1.05 with the weights outer and exact-length input blocks (below).
//!   7-bit weights stored as `q + 64` would need no sign step and half the registers per
//!   input (0.80 ms), but they cost the labelled injection set 0.023 of recall@5
//!   (`benches/models.rs`, one run), more than the 0.01 allowed.
//! - **Portable**: plain Rust, what the others are held to.

/// Values per AVX2 kernel step (one 256-bit register of bytes).
const STEP: usize = 32;
/// Rows are zero-padded to a multiple of this: one 512-bit register of bytes, the VNNI
/// kernel's step, itself a multiple of [`STEP`].
const PADDING: usize = 64;
/// What the VNNI kernel adds to every weight to make it the unsigned side (see `vnni`).
const WEIGHT_OFFSET: i32 = 128;
/// Outputs the VNNI kernel computes together: four registers of sixteen 32-bit sums.
const VNNI_OUTPUTS: usize = 64;
/// The largest quantised magnitude, of weights and inputs alike.
const LEVELS: f32 = 127.0;

/// Weight rows, quantised to −127..=127 with one scale per row, zero-padded to a multiple of
/// 64 bytes (`PADDING`) (zeros add nothing to a dot product).
pub struct QuantisedWeights {
    values: Vec<i8>,
    /// The same values plus `WEIGHT_OFFSET` (128), as unsigned bytes laid out for the VNNI
    /// kernel (`vnni::pack`); kept only where the CPU has it (10.5 MB for the model's dense
    /// layers).
    packed: Option<Vec<u8>>,
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
        #[cfg(target_arch = "x86_64")]
        let packed = Kernel::Vnni
            .is_available()
            .then(|| vnni::pack(&values, rows, stride));
        #[cfg(not(target_arch = "x86_64"))]
        let packed = None;
        QuantisedWeights {
            values,
            packed,
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

    /// The quantised values of row `index`, zero-padded to a multiple of 64.
    pub fn row(&self, index: usize) -> &[i8] {
        &self.values[index * self.stride..(index + 1) * self.stride]
    }
}

/// Input rows, quantised to −127..=127 with one scale per row, zero-padded to a multiple of
/// 64 bytes (`PADDING`); their magnitudes are kept beside them for the AVX2 kernel's unsigned side,
/// and each row's sum for the VNNI kernel's correction.
#[derive(Debug, PartialEq)]
pub struct QuantisedInputs {
    values: Vec<i8>,
    magnitudes: Vec<u8>,
    sums: Vec<i32>,
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
            sums: Vec::new(),
            scales: Vec::new(),
            rows: 0,
            columns,
            stride: padded(columns),
        }
    }

    /// Refills these inputs with `matrix`'s `rows` rows, reusing the buffers.
    pub fn requantise(&mut self, matrix: &[f32], rows: usize) {
        #[cfg(target_arch = "x86_64")]
        if Kernel::Avx2.is_available() {
            assert_eq!(matrix.len(), rows * self.columns);
            self.clear_for(rows);
            for (i, row) in matrix.chunks_exact(self.columns).enumerate() {
                let span = i * self.stride..(i + 1) * self.stride;
                // SAFETY: AVX2 is present; the slices are one row each.
                let (scale, sum) = unsafe {
                    quantise_avx2::quantise_row(
                        row,
                        &mut self.values[span.clone()],
                        &mut self.magnitudes[span],
                    )
                };
                self.scales.push(scale);
                self.sums.push(sum);
            }
            return;
        }
        self.requantise_portable(matrix, rows);
    }

    /// [`QuantisedInputs::requantise`] in plain Rust, whatever the CPU: what the AVX2
    /// quantiser is held to, value for value (`tests/int8_products.rs`).
    pub fn requantise_portable(&mut self, matrix: &[f32], rows: usize) {
        assert_eq!(matrix.len(), rows * self.columns);
        self.clear_for(rows);
        for (i, row) in matrix.chunks_exact(self.columns).enumerate() {
            let span = i * self.stride..(i + 1) * self.stride;
            let values = &mut self.values[span.clone()];
            self.scales.push(quantise_row(row, values));
            self.sums
                .push(values.iter().map(|&p| p as i32).sum::<i32>());
            // Kept rather than taken per load in the AVX2 kernel: `_mm256_abs_epi8` there
            // was slower at 12 rows in every one of four alternated runs (2.92-4.40 against
            // 2.75-3.02 ms for 18 products), presumably as a load folds into the multiply
            // where the extra instruction cannot.
            for (magnitude, q) in self.magnitudes[span].iter_mut().zip(values.iter()) {
                *magnitude = q.unsigned_abs();
            }
        }
    }

    /// `rows` rows of zeros (padding included), no scales or sums yet.
    fn clear_for(&mut self, rows: usize) {
        self.rows = rows;
        self.values.clear();
        self.values.resize(rows * self.stride, 0);
        self.magnitudes.clear();
        self.magnitudes.resize(rows * self.stride, 0);
        self.scales.clear();
        self.sums.clear();
    }

    /// The scale of row `index`: its values are `scale · p`.
    pub fn scale(&self, index: usize) -> f32 {
        self.scales[index]
    }

    /// The quantised values of row `index`, zero-padded to a multiple of 64.
    pub fn row(&self, index: usize) -> &[i8] {
        &self.values[index * self.stride..(index + 1) * self.stride]
    }

    fn magnitudes(&self, index: usize) -> &[u8] {
        &self.magnitudes[index * self.stride..(index + 1) * self.stride]
    }
}

fn padded(columns: usize) -> usize {
    columns.div_ceil(PADDING) * PADDING
}

/// Writes `row` quantised to −127..=127 (symmetric: scale = largest magnitude / 127) into the
/// front of `out`, and returns the scale.
fn quantise_row(row: &[f32], out: &mut [i8]) -> f32 {
    let scale = scale_for(largest_magnitude(row));
    let inverse = 1.0 / scale;
    for (value, &x) in out.iter_mut().zip(row) {
        *value = quantise_value(x, inverse);
    }
    scale
}

/// The scale of a row whose largest magnitude is `largest`. An all-zero row quantises to
/// zeros whatever its scale; 1 keeps the division finite.
fn scale_for(largest: f32) -> f32 {
    if largest > 0.0 { largest / LEVELS } else { 1.0 }
}

/// One value quantised: `x / scale` rounded half away from zero (as `f32::round`, but as an
/// add and a truncating conversion, not a library call), within ±127; NaN gives 0.
fn quantise_value(x: f32, inverse: f32) -> i8 {
    let scaled = (x * inverse).clamp(-LEVELS, LEVELS);
    (scaled + 0.5f32.copysign(scaled)) as i8
}

/// The largest `|x|` of `row`, NaNs ignored (as `f32::max` does).
fn largest_magnitude(row: &[f32]) -> f32 {
    row.iter().fold(0f32, |m, x| m.max(x.abs()))
}

/// [`quantise_row`] eight values at a time, for AVX2. The baseline build converts floats to
/// integers one value at a time, with a NaN check each (`as` saturates), and quantising a
/// query's inputs took 2.1 ns a value: 0.2 ms of a thread's half of a 12-token pass. Here
/// 0.41 ns, and the whole query pass 0.88–0.91 × the time with the portable quantiser (three
/// alternated runs, `benches/int8_products`). Every step is `quantise_row`'s, so the integers
/// are the same, NaN and ±0 included (`tests/int8_products.rs`).
#[cfg(target_arch = "x86_64")]
mod quantise_avx2 {
    use std::arch::x86_64::*;

    use super::{LEVELS, largest_magnitude, quantise_value, scale_for};

    /// Quantises `row` into the front of `values` and its magnitudes into the front of
    /// `magnitudes`; returns the scale and the values' sum.
    ///
    /// # Safety
    /// AVX2 must be present.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn quantise_row(
        row: &[f32],
        values: &mut [i8],
        magnitudes: &mut [u8],
    ) -> (f32, i32) {
        assert!(values.len() >= row.len() && magnitudes.len() >= row.len());
        let sign = _mm256_set1_ps(-0.0);
        // The largest magnitude: `max_ps` returns its second operand when the first is NaN,
        // so a NaN is skipped as `f32::max` skips it; the maximum is exact in any order.
        let mut largest = _mm256_setzero_ps();
        let eights = row.chunks_exact(8);
        let rest = eights.remainder();
        for eight in eights {
            // SAFETY: `eight` is 8 floats.
            let x = _mm256_andnot_ps(sign, unsafe { _mm256_loadu_ps(eight.as_ptr()) });
            largest = _mm256_max_ps(x, largest);
        }
        let mut lanes = [0f32; 8];
        // SAFETY: `lanes` is 8 floats.
        unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), largest) };
        let scale = scale_for(largest_magnitude(&lanes).max(largest_magnitude(rest)));
        let inverse = 1.0 / scale;

        let (inverse_v, low, high, half) = (
            _mm256_set1_ps(inverse),
            _mm256_set1_ps(-LEVELS),
            _mm256_set1_ps(LEVELS),
            _mm256_set1_ps(0.5),
        );
        // packs_epi32 then packs_epi16 leave four-byte groups in the order a0 b0 c0 d0 | a1
        // b1 c1 d1 (one group per 128-bit lane of each register); this puts them back.
        let order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
        let mut sums = _mm256_setzero_si256();
        let whole = row.len() / 32 * 32;
        for start in (0..whole).step_by(32) {
            let mut quarters = [_mm256_setzero_si256(); 4];
            for (q, quarter) in quarters.iter_mut().enumerate() {
                // SAFETY: start + 32 <= row.len().
                let x = unsafe { _mm256_loadu_ps(row.as_ptr().add(start + 8 * q)) };
                let scaled = _mm256_mul_ps(x, inverse_v);
                // `clamp` keeps a NaN; max/min would turn it into a bound, so NaN lanes are
                // zeroed after the conversion, as `as i8` gives 0 for NaN.
                let ordered = _mm256_cmp_ps::<_CMP_ORD_Q>(scaled, scaled);
                let clamped = _mm256_min_ps(_mm256_max_ps(scaled, low), high);
                let nudge = _mm256_or_ps(_mm256_and_ps(clamped, sign), half);
                let truncated = _mm256_cvttps_epi32(_mm256_add_ps(clamped, nudge));
                *quarter = _mm256_and_si256(truncated, _mm256_castps_si256(ordered));
                sums = _mm256_add_epi32(sums, *quarter);
            }
            let bytes = _mm256_permutevar8x32_epi32(
                _mm256_packs_epi16(
                    _mm256_packs_epi32(quarters[0], quarters[1]),
                    _mm256_packs_epi32(quarters[2], quarters[3]),
                ),
                order,
            );
            // SAFETY: start + 32 <= row.len() <= both slices' lengths (asserted above).
            unsafe {
                _mm256_storeu_si256(values.as_mut_ptr().add(start).cast(), bytes);
                _mm256_storeu_si256(
                    magnitudes.as_mut_ptr().add(start).cast(),
                    _mm256_abs_epi8(bytes),
                );
            }
        }
        let mut lanes = [0i32; 8];
        // SAFETY: `lanes` is 8 integers.
        unsafe { _mm256_storeu_si256(lanes.as_mut_ptr().cast(), sums) };
        let mut sum: i32 = lanes.iter().sum();
        for ((value, magnitude), &x) in values[whole..]
            .iter_mut()
            .zip(&mut magnitudes[whole..])
            .zip(&row[whole..])
        {
            *value = quantise_value(x, inverse);
            *magnitude = value.unsigned_abs();
            sum += *value as i32;
        }
        (scale, sum)
    }
}

/// One way of summing the products; [`product`] takes the fastest the CPU has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kernel {
    /// AVX-512 VNNI (`vpdpbusd`): 64 byte products summed into 32 bits per instruction.
    Vnni,
    /// AVX2 (`vpmaddubsw`, `vpmaddwd`): 32 byte products per three instructions.
    Avx2,
    /// [`portable_product`]: plain Rust, every CPU.
    Portable,
}

impl Kernel {
    /// The kernels this CPU runs, fastest first ([`Kernel::Portable`] always last).
    pub fn available() -> Vec<Kernel> {
        [Kernel::Vnni, Kernel::Avx2, Kernel::Portable]
            .into_iter()
            .filter(|kernel| kernel.is_available())
            .collect()
    }

    /// Whether this CPU has the kernel's instructions.
    pub fn is_available(self) -> bool {
        match self {
            #[cfg(target_arch = "x86_64")]
            Kernel::Vnni => {
                std::arch::is_x86_feature_detected!("avx512f")
                    && std::arch::is_x86_feature_detected!("avx512bw")
                    && std::arch::is_x86_feature_detected!("avx512vnni")
            }
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx2 => std::arch::is_x86_feature_detected!("avx2"),
            #[cfg(not(target_arch = "x86_64"))]
            Kernel::Vnni | Kernel::Avx2 => false,
            Kernel::Portable => true,
        }
    }
}

/// `output = input · weightsᵀ + bias` (`input.rows × weights.rows`, row-major), on the
/// calling thread, with the fastest kernel the CPU has. Every kernel sums the same integers,
/// so the result does not depend on which ran.
pub fn product(
    input: &QuantisedInputs,
    weights: &QuantisedWeights,
    bias: &[f32],
    output: &mut [f32],
) {
    let kernel = if weights.packed.is_some() {
        Kernel::Vnni
    } else if Kernel::Avx2.is_available() {
        Kernel::Avx2
    } else {
        Kernel::Portable
    };
    product_with(kernel, input, weights, bias, output);
}

/// [`product`] with a chosen kernel: what the tests hold each kernel to.
///
/// # Panics
/// When the CPU lacks the kernel's instructions ([`Kernel::is_available`]), or the shapes
/// disagree.
pub fn product_with(
    kernel: Kernel,
    input: &QuantisedInputs,
    weights: &QuantisedWeights,
    bias: &[f32],
    output: &mut [f32],
) {
    assert!(
        kernel.is_available(),
        "{kernel:?} needs instructions this CPU lacks"
    );
    assert_eq!(input.stride, weights.stride);
    assert_eq!(bias.len(), weights.rows);
    assert_eq!(output.len(), input.rows * weights.rows);
    match kernel {
        #[cfg(target_arch = "x86_64")]
        Kernel::Vnni => {
            let packed = weights
                .packed
                .as_deref()
                .expect("weights quantised where VNNI is present keep their packed copy");
            // SAFETY: AVX-512 F, BW and VNNI are present (asserted above); the shapes are
            // asserted above and the packed copy is `vnni::pack`'s for these weights.
            unsafe { vnni::product(input, weights, packed, bias, output) }
        }
        #[cfg(target_arch = "x86_64")]
        // SAFETY: AVX2 is present (asserted above); the kernel reads rows through the
        // slices' bounds-checked accessors and writes only `output`, asserted above.
        Kernel::Avx2 => unsafe { avx2::product(input, weights, bias, output) },
        _ => portable_product(input, weights, bias, output),
    }
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

/// The AVX-512 VNNI kernel.
///
/// `vpdpbusd` multiplies unsigned by signed bytes, four pairs at a time summed straight into a
/// 32-bit lane: nothing passes through a 16-bit lane, so nothing saturates and no sign step
/// is needed. The weights take the unsigned side as `q + 128` (0..=255) and the inputs stay
/// signed, so a lane sums `Σ (q + 128) · p`, and the exact `Σ q · p` is that less `128 · Σ p`,
/// the input row's sum kept when it was quantised. At most 255 · 127 a pair and 1 536 pairs:
/// 50 M, well inside 32 bits.
///
/// The lanes of a register are sixteen outputs, not sixteen pieces of one dot product: the
/// weights are packed so that one 64-byte load holds four consecutive inputs' weights for
/// each of sixteen outputs, and an input row's four bytes are broadcast against it. So no sum
/// is reduced across lanes (at 384 inputs a row, that reduction cost as much as the products
/// in a first kernel that kept one dot product a register), and results leave sixteen at a
/// time.
#[cfg(target_arch = "x86_64")]
mod vnni {
    use std::arch::x86_64::*;

    use super::{QuantisedInputs, QuantisedWeights, VNNI_OUTPUTS, WEIGHT_OFFSET};

    const LANES: usize = 16;
    const REGISTERS: usize = VNNI_OUTPUTS / LANES;
    /// Input rows per tile: 6 × 4 accumulators, 4 weights and a broadcast input take 29 of
    /// AVX-512's 32 registers, and a thread's half of a 12-token query is one tile.
    const INPUT_BLOCK: usize = 6;

    /// `values` (`rows × stride`, signed) as the kernel reads them: for each block of 64
    /// outputs and each group of four inputs, 256 bytes: four registers, each sixteen outputs'
    /// four weights plus 128. Rows past `rows` (the last block's padding) are weights of 0.
    pub(super) fn pack(values: &[i8], rows: usize, stride: usize) -> Vec<u8> {
        let groups = stride / 4;
        let blocks = rows.div_ceil(VNNI_OUTPUTS);
        let mut packed = vec![WEIGHT_OFFSET as u8; blocks * groups * VNNI_OUTPUTS * 4];
        for j in 0..rows {
            let (block, within) = (j / VNNI_OUTPUTS, j % VNNI_OUTPUTS);
            let (register, lane) = (within / LANES, within % LANES);
            for g in 0..groups {
                let at = (((block * groups + g) * REGISTERS + register) * LANES + lane) * 4;
                for t in 0..4 {
                    packed[at + t] = (values[j * stride + 4 * g + t] as i32 + WEIGHT_OFFSET) as u8;
                }
            }
        }
        packed
    }

    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    pub(super) unsafe fn product(
        input: &QuantisedInputs,
        weights: &QuantisedWeights,
        packed: &[u8],
        bias: &[f32],
        output: &mut [f32],
    ) {
        let groups = weights.stride / 4;
        assert_eq!(
            packed.len(),
            weights.rows.div_ceil(VNNI_OUTPUTS) * groups * VNNI_OUTPUTS * 4
        );
        let tile = Tile {
            input,
            weights,
            packed,
            bias,
            groups,
        };
        for block in 0..weights.rows.div_ceil(VNNI_OUTPUTS) {
            let mut i = 0;
            while i < input.rows {
                // SAFETY: the features are enabled here; the tile reads input rows
                // i..i + its length, which exist, and this block's packed weights.
                unsafe {
                    match input.rows - i {
                        1 => tile.rows::<1>(i, block, output),
                        2 => tile.rows::<2>(i, block, output),
                        3 => tile.rows::<3>(i, block, output),
                        4 => tile.rows::<4>(i, block, output),
                        5 => tile.rows::<5>(i, block, output),
                        _ => tile.rows::<INPUT_BLOCK>(i, block, output),
                    }
                }
                i += INPUT_BLOCK;
            }
        }
    }

    struct Tile<'a> {
        input: &'a QuantisedInputs,
        weights: &'a QuantisedWeights,
        packed: &'a [u8],
        bias: &'a [f32],
        groups: usize,
    }

    impl Tile<'_> {
        /// Input rows `first..first + ROWS` against the 64 outputs of `block`.
        #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
        unsafe fn rows<const ROWS: usize>(&self, first: usize, block: usize, output: &mut [f32]) {
            let (input, weights) = (self.input, self.weights);
            let width = weights.rows;
            let block_bytes = self.groups * VNNI_OUTPUTS * 4;
            let weights_of_block = &self.packed[block * block_bytes..(block + 1) * block_bytes];
            // Loops, not `array::from_fn` (see the AVX2 kernel: closures lose the features).
            let mut rows = [input.row(first); ROWS];
            for (a, row) in rows.iter_mut().enumerate().skip(1) {
                *row = input.row(first + a);
            }
            let mut sums = [[_mm512_setzero_si512(); REGISTERS]; ROWS];
            for (g, group) in weights_of_block.chunks_exact(VNNI_OUTPUTS * 4).enumerate() {
                let mut w = [_mm512_setzero_si512(); REGISTERS];
                for (r, w) in w.iter_mut().enumerate() {
                    // SAFETY: `group` is 256 bytes; register r is bytes 64r..64r + 64.
                    *w = unsafe { _mm512_loadu_si512(group.as_ptr().add(r * 64).cast()) };
                }
                for (sums, row) in sums.iter_mut().zip(&rows) {
                    // SAFETY: a row is `stride` = 4 · groups bytes, so bytes 4g..4g + 4 exist.
                    let four = unsafe { row.as_ptr().add(4 * g).cast::<i32>().read_unaligned() };
                    let x = _mm512_set1_epi32(four);
                    for (sum, &w) in sums.iter_mut().zip(&w) {
                        *sum = _mm512_dpbusd_epi32(*sum, w, x);
                    }
                }
            }
            for (a, sums) in sums.iter().enumerate() {
                let i = first + a;
                let correction = _mm512_set1_epi32(WEIGHT_OFFSET * input.sums[i]);
                let input_scale = _mm512_set1_ps(input.scales[i]);
                for (r, &v) in sums.iter().enumerate() {
                    let j = block * VNNI_OUTPUTS + r * LANES;
                    if j >= width {
                        break;
                    }
                    let valid = (width - j).min(LANES);
                    let mask: __mmask16 = if valid == LANES { !0 } else { (1 << valid) - 1 };
                    // `finish`'s arithmetic, lane by lane and in its order (a product of the
                    // scales, then the sum times it, then the bias: no fused multiply-add), so
                    // the floats are the portable kernel's to the bit.
                    // SAFETY: lanes past `valid` are masked off: reads stay inside
                    // `scales` and `bias` (`width` long), the write inside row i of `output`.
                    unsafe {
                        let scales = _mm512_maskz_loadu_ps(mask, weights.scales.as_ptr().add(j));
                        let bias = _mm512_maskz_loadu_ps(mask, self.bias.as_ptr().add(j));
                        let sum = _mm512_cvtepi32_ps(_mm512_sub_epi32(v, correction));
                        let scaled = _mm512_mul_ps(sum, _mm512_mul_ps(input_scale, scales));
                        _mm512_mask_storeu_ps(
                            output.as_mut_ptr().add(i * width + j),
                            mask,
                            _mm512_add_ps(scaled, bias),
                        );
                    }
                }
            }
        }
    }
}
