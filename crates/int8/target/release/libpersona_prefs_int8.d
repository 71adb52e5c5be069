/work/main/crates/int8/target/release/libpersona_prefs_int8.rlib: /work/main/crates/int8/src/lib.rs
