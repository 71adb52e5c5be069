/work/main/crates/int8/target/release/deps/persona_prefs_int8-b1cd3121f0ac14f5.d: src/lib.rs

/work/main/crates/int8/target/release/deps/libpersona_prefs_int8-b1cd3121f0ac14f5.rlib: src/lib.rs

/work/main/crates/int8/target/release/deps/libpersona_prefs_int8-b1cd3121f0ac14f5.rmeta: src/lib.rs

src/lib.rs:
