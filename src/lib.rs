//! persona-prefs: a durable memory of an LLM persona's own opinions, preferences and ideals.
//!
//! Stages, one module each (see ARCHITECTURE.md): [`ingest`] consumes conversation turns from
//! JetStream, [`extract`] mines the persona's messages for opinions, [`embed`] turns text into
//! vectors, [`store`] keeps preferences in Redis + RediSearch, [`serve`] answers injection and
//! administration requests over NATS.

pub mod app;
pub mod calibrate;
pub mod client;
pub mod config;
pub mod embed;
pub mod erasure;
pub mod extract;
pub mod ingest;
pub mod json_lines;
pub mod mcp;
pub mod migrate;
pub mod model;
pub mod openai_http;
pub mod otlp;
pub mod retry;
pub mod serve;
pub mod settings;
pub mod status;
pub mod store;
pub mod subjects;
pub mod telemetry;
pub mod text;
pub mod timestamp;
pub mod trace_context;
pub mod ui;
