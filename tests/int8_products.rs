//! The 8-bit products of the query-side BERT pass (`crates/int8`, used by
//! `src/embed/fast_bert.rs`): the AVX2 kernel sums the same integers as the plain-Rust one,
//! the result is the float product to quantisation error, and splitting a product between
//! threads changes nothing.
#![cfg(feature = "local-embedder")]

use persona_prefs_int8::{QuantisedRows, portable_product_into, product, product_into};

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

#[test]
fn the_vector_kernel_sums_the_same_integers_as_the_portable_one() {
    // Shapes that leave partial blocks on both sides and a padded tail (columns not a
    // multiple of 32), with outliers that take the full −127..=127 range.
    for (rows, outputs, columns) in [(1, 1, 5), (5, 7, 70), (12, 384, 384), (4, 3, 32)] {
        let mut input = pseudo_random(rows * columns, 7 + rows as u64);
        input[0] = 40.0;
        let weight = pseudo_random(outputs * columns, 11 + outputs as u64);
        let bias = pseudo_random(outputs, 3);
        let input = QuantisedRows::quantise(&input, rows, columns);
        let weight = QuantisedRows::quantise(&weight, outputs, columns);
        let mut fast = vec![0f32; rows * outputs];
        let mut portable = vec![0f32; rows * outputs];
        product_into(&input, &weight, &bias, 0..outputs, &mut fast);
        portable_product_into(&input, &weight, &bias, 0..outputs, &mut portable);
        assert_eq!(fast, portable, "{rows} × {outputs} × {columns}");
    }
}

#[test]
fn the_product_is_the_float_product_to_quantisation_error() {
    let (rows, outputs, columns) = (6, 50, 384);
    let input = pseudo_random(rows * columns, 5);
    let weight = pseudo_random(outputs * columns, 9);
    let bias = vec![0.25; outputs];
    let mut product = vec![0f32; rows * outputs];
    product_into(
        &QuantisedRows::quantise(&input, rows, columns),
        &QuantisedRows::quantise(&weight, outputs, columns),
        &bias,
        0..outputs,
        &mut product,
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
                (product[i * outputs + j] - exact).abs() < 0.05,
                "[{i}][{j}] {} against {exact}",
                product[i * outputs + j]
            );
        }
    }
}

#[test]
fn products_split_between_threads_are_the_one_thread_product() {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(2)
        .build()
        .unwrap();
    for (rows, outputs) in [(1, 4), (3, 7), (12, 1152)] {
        let input = QuantisedRows::quantise(&pseudo_random(rows * 96, 1), rows, 96);
        let weight = QuantisedRows::quantise(&pseudo_random(outputs * 96, 2), outputs, 96);
        let bias = pseudo_random(outputs, 4);
        let mut alone = vec![0f32; rows * outputs];
        let mut shared = vec![f32::NAN; rows * outputs];
        product(&input, &weight, &bias, 1, &mut alone);
        pool.install(|| product(&input, &weight, &bias, 2, &mut shared));
        assert_eq!(alone, shared, "{rows} × {outputs}");
    }
}

#[test]
fn a_zero_row_quantises_to_zeros() {
    let rows = QuantisedRows::quantise(&[0.0; 8], 1, 8);
    assert!(rows.row(0).iter().all(|&q| q == 0));
    assert_eq!(rows.scale(0), 1.0);
}
