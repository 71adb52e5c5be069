//! The 8-bit products of the query-side BERT pass (`crates/int8`, used by
//! `src/embed/fast_bert.rs`): every vector kernel this CPU has (AVX-512 VNNI, AVX2) gives the
//! plain-Rust one's floats to the bit, the result is the float product to quantisation error,
//! and a row's result does not depend on which block of rows it was computed in.
#![cfg(feature = "local-embedder")]

use persona_prefs_int8::{
    Kernel, QuantisedInputs, QuantisedWeights, portable_product, product, product_with,
};

fn pseudo_random(count: usize, seed: u64) -> Vec<f32> {
    let mut state = seed;
    (0..count)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 40) as f32 / (1u64 << 24) as f32 - 0.5
        })
        .collect()
}

/// Where AVX2 is present, inputs are quantised eight values at a time. Every value, sum,
/// magnitude and scale is the plain-Rust quantiser's, at widths that leave a tail past the
/// vector steps, and on the edges: exact halves (which round away from zero), NaN (which
/// quantises to 0), an infinity, −0, a row of zeros; and when buffers are reused for fewer rows.
#[test]
fn inputs_quantise_as_the_portable_quantiser_does_whatever_the_cpu() {
    for columns in [1, 7, 31, 32, 33, 70, 384, 1536] {
        let mut rows: Vec<Vec<f32>> = (0..4)
            .map(|seed| pseudo_random(columns, 50 + seed + columns as u64))
            .collect();
        // Largest magnitude 127: scale 1, so these land exactly on halves.
        let mut halves = vec![0.25f32; columns];
        for (x, edge) in halves
            .iter_mut()
            .zip([127.0, 0.5, -0.5, 1.5, -2.5, 63.5, -63.5, -0.0, 126.5])
        {
            *x = edge;
        }
        rows.push(halves);
        rows[1][columns / 2] = f32::NAN;
        rows[2][columns - 1] = f32::NEG_INFINITY;
        rows.push(vec![0.0; columns]);
        rows.push(vec![-0.0; columns]);
        let matrix: Vec<f32> = rows.concat();
        let count = rows.len();
        let mut portable = QuantisedInputs::empty(columns);
        portable.requantise_portable(&matrix, count);
        let chosen = QuantisedInputs::quantise(&matrix, count, columns);
        assert_eq!(chosen, portable, "{count} rows × {columns}");
        if columns >= 9 {
            // The halves' row: 0.5 → 1, −0.5 → −1, 1.5 → 2, −2.5 → −3, 63.5 → 64.
            assert_eq!(&chosen.row(4)[..7], &[127, 1, -1, 2, -3, 64, -64]);
        }
        let mut reused = QuantisedInputs::quantise(&matrix, count, columns);
        reused.requantise(&matrix[..2 * columns], 2);
        portable.requantise_portable(&matrix[..2 * columns], 2);
        assert_eq!(reused, portable, "reused for 2 rows × {columns}");
    }
}

#[test]
fn every_vector_kernel_gives_the_portable_kernels_floats_to_the_bit() {
    let kernels = Kernel::available();
    println!("kernels on this CPU: {kernels:?}");
    assert_eq!(kernels.last(), Some(&Kernel::Portable));
    // Shapes that leave partial blocks on every side (input rows against the AVX2 kernel's 4
    // and the VNNI kernel's 6; outputs against their 2 and 64) and a padded tail (columns not
    // a multiple of 64), with outliers that take the full −127..=127 range.
    for (rows, outputs, columns) in [
        (1, 1, 5),
        (5, 7, 70),
        (12, 384, 384),
        (4, 3, 32),
        (7, 5, 1536),
        (3, 2, 40),
        (13, 130, 200),
        (6, 1152, 384),
        (11, 64, 1536),
    ] {
        let mut input = pseudo_random(rows * columns, 7 + rows as u64);
        input[0] = 40.0;
        let weight = pseudo_random(outputs * columns, 11 + outputs as u64);
        let bias = pseudo_random(outputs, 3);
        let input = QuantisedInputs::quantise(&input, rows, columns);
        let weight = QuantisedWeights::quantise(&weight, outputs, columns);
        let mut portable = vec![0f32; rows * outputs];
        portable_product(&input, &weight, &bias, &mut portable);
        for &kernel in &kernels {
            let mut fast = vec![f32::NAN; rows * outputs];
            product_with(kernel, &input, &weight, &bias, &mut fast);
            assert_eq!(fast, portable, "{kernel:?}: {rows} × {outputs} × {columns}");
        }
        let mut chosen = vec![f32::NAN; rows * outputs];
        product(&input, &weight, &bias, &mut chosen);
        assert_eq!(
            chosen, portable,
            "the chosen kernel: {rows} × {outputs} × {columns}"
        );
    }
}

#[test]
fn the_product_is_the_float_product_to_quantisation_error() {
    let (rows, outputs, columns) = (6, 50, 384);
    let input = pseudo_random(rows * columns, 5);
    let weight = pseudo_random(outputs * columns, 9);
    let bias = vec![0.25; outputs];
    let mut result = vec![0f32; rows * outputs];
    product(
        &QuantisedInputs::quantise(&input, rows, columns),
        &QuantisedWeights::quantise(&weight, outputs, columns),
        &bias,
        &mut result,
    );
    for i in 0..rows {
        for j in 0..outputs {
            let exact: f32 = (0..columns)
                .map(|k| input[i * columns + k] * weight[j * columns + k])
                .sum::<f32>()
                + 0.25;
            // Each factor is off by at most half a step (0.5/127 of its row's largest);
            // over 384 uniform products that is about 0.03 here.
            assert!(
                (result[i * outputs + j] - exact).abs() < 0.05,
                "[{i}][{j}] {} against {exact}",
                result[i * outputs + j]
            );
        }
    }
}

#[test]
fn a_row_comes_out_the_same_whichever_block_it_is_computed_in() {
    // The kernels take input rows four (AVX2) or six (VNNI) at a time and the rest in a
    // shorter block: each row alone must give what it gives among the others.
    let (rows, outputs, columns) = (11, 9, 96);
    let input = pseudo_random(rows * columns, 1);
    let weight = QuantisedWeights::quantise(&pseudo_random(outputs * columns, 2), outputs, columns);
    let bias = pseudo_random(outputs, 4);
    let quantised = QuantisedInputs::quantise(&input, rows, columns);
    for kernel in Kernel::available() {
        let mut together = vec![f32::NAN; rows * outputs];
        product_with(kernel, &quantised, &weight, &bias, &mut together);
        for (i, expected) in together.chunks_exact(outputs).enumerate() {
            let alone_input =
                QuantisedInputs::quantise(&input[i * columns..(i + 1) * columns], 1, columns);
            let mut alone = vec![f32::NAN; outputs];
            product_with(kernel, &alone_input, &weight, &bias, &mut alone);
            assert_eq!(alone, expected, "{kernel:?}: row {i}");
        }
    }
}

#[test]
fn a_zero_row_quantises_to_zeros() {
    let inputs = QuantisedInputs::quantise(&[0.0; 8], 1, 8);
    assert!(inputs.row(0).iter().all(|&q| q == 0));
    assert_eq!(inputs.scale(0), 1.0);
    let weights = QuantisedWeights::quantise(&[0.0; 8], 1, 8);
    assert!(weights.row(0).iter().all(|&q| q == 0));
    assert_eq!(weights.scale(0), 1.0);
}
