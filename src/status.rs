//! `persona-prefs status`: the whole deployment at a glance, from the outside. Where a
//! process's `/readyz` says whether that process can work, this asks the shared parts: is the
//! index sound, is the event backlog draining, are dead letters waiting, how many service
//! replicas answer.

use std::time::Duration;

use futures::StreamExt;
use serde::Serialize;

use crate::app::connect_nats;
use crate::config::Config;
use crate::ingest::dead_letters::DeadLetters;
use crate::store::{PreferenceStore, index};

#[derive(Debug, Clone, Serialize)]
pub struct Status {
    /// True when nothing in `problems`.
    pub healthy: bool,
    /// What stops the service from working as configured.
    pub problems: Vec<String>,
    /// What an operator should look at, though the service works.
    pub warnings: Vec<String>,
    pub redis: Option<RedisStatus>,
    pub nats: Option<NatsStatus>,
}

#[derive(Debug, Clone, Serialize)]
pub struct RedisStatus {
    pub index: String,
    /// Whether this deployment keeps a full-text index (`redis.text_index`, single node);
    /// without one, `exists` speaks for the memory the service reads instead.
    pub text_index: bool,
    pub exists: bool,
    pub documents: u64,
    pub percent_indexed: f64,
    pub indexing_failures: u64,
    pub schema_problems: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct NatsStatus {
    /// Messages in the events stream (`None`: the stream does not exist).
    pub events_stored: Option<u64>,
    /// Events the worker consumer has not yet taken, and taken but not yet acked.
    pub consumer_pending: Option<u64>,
    pub consumer_ack_pending: Option<u64>,
    pub dead_letters: Option<u64>,
    /// Service replicas that answered `$SRV.PING` (their instance ids and versions).
    pub replicas: Vec<Replica>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Replica {
    pub id: String,
    pub version: String,
}

/// Collects the status; waits `listen` for service replicas to answer the ping.
pub async fn collect(config: &Config, listen: Duration) -> Status {
    let mut problems = Vec::new();
    let mut warnings = Vec::new();
    let redis = redis_status(config, &mut problems, &mut warnings).await;
    let nats = nats_status(config, listen, &mut problems, &mut warnings).await;
    Status {
        healthy: problems.is_empty(),
        problems,
        warnings,
        redis,
        nats,
    }
}

/// The problem an index of another schema is: what differs, and what to run.
fn unfit_index(name: &str, problems: &[String]) -> String {
    format!(
        "index {name} does not fit this build: {} (`persona-prefs index migrate`)",
        problems.join("; ")
    )
}

async fn redis_status(
    config: &Config,
    problems: &mut Vec<String>,
    warnings: &mut Vec<String>,
) -> Option<RedisStatus> {
    let store = match PreferenceStore::connect(&config.redis, &config.store).await {
        Ok(store) => store,
        Err(error) => {
            problems.push(format!("redis unreachable: {error}"));
            return None;
        }
    };
    warnings.extend(store.memory_settings_advice().await);
    if !store.has_text_index() {
        // No index is wanted; one left behind is either an earlier layout's (refused at
        // start-up) or this build's from when it was on (unused, indexing every write).
        match store.existing_index().await {
            Ok(Some(info)) => {
                let problems_found = index::mismatches(&info, &store.hash_prefix());
                if problems_found.is_empty() {
                    warnings.push(format!(
                        "index {} exists but redis.text_index is off: it is not used and \
                         indexes every write (`persona-prefs index migrate` drops it)",
                        info.name
                    ));
                } else {
                    problems.push(unfit_index(&info.name, &problems_found));
                }
            }
            Ok(None) => {}
            Err(error) => {
                problems.push(format!("redis: {error}"));
                return None;
            }
        }
        return Some(RedisStatus {
            index: config.redis.index_name.clone(),
            text_index: false,
            exists: false,
            documents: 0,
            percent_indexed: 1.0,
            indexing_failures: 0,
            schema_problems: Vec::new(),
        });
    }
    let info = match store.index_info().await {
        Ok(info) => info,
        Err(error) => {
            problems.push(format!("redis: {error}"));
            return None;
        }
    };
    let Some(info) = info else {
        problems.push(format!(
            "index {} does not exist (a worker creates it at start, or `persona-prefs index ensure`)",
            config.redis.index_name
        ));
        return Some(RedisStatus {
            index: config.redis.index_name.clone(),
            text_index: true,
            exists: false,
            documents: 0,
            percent_indexed: 0.0,
            indexing_failures: 0,
            schema_problems: Vec::new(),
        });
    };
    let schema_problems = index::mismatches(&info, &store.hash_prefix());
    if !schema_problems.is_empty() {
        problems.push(unfit_index(&info.name, &schema_problems));
    }
    if info.hash_indexing_failures > 0 {
        warnings.push(format!(
            "{} preference hashes could not be indexed, so no search finds them (vectors of another size? `persona-prefs index migrate --dry-run`)",
            info.hash_indexing_failures
        ));
    }
    if info.percent_indexed < 1.0 {
        warnings.push(format!(
            "the index is still reading existing hashes ({:.0}% done)",
            info.percent_indexed * 100.0
        ));
    }
    Some(RedisStatus {
        index: info.name.clone(),
        text_index: true,
        exists: true,
        documents: info.num_docs,
        percent_indexed: info.percent_indexed,
        indexing_failures: info.hash_indexing_failures,
        schema_problems,
    })
}

async fn nats_status(
    config: &Config,
    listen: Duration,
    problems: &mut Vec<String>,
    warnings: &mut Vec<String>,
) -> Option<NatsStatus> {
    let client = match connect_nats(config).await {
        Ok(client) => client,
        Err(error) => {
            problems.push(error.to_string());
            return None;
        }
    };
    let js = async_nats::jetstream::new(client.clone());
    let ingest = &config.ingest;
    let mut status = NatsStatus {
        events_stored: None,
        consumer_pending: None,
        consumer_ack_pending: None,
        dead_letters: None,
        replicas: Vec::new(),
    };
    match js.get_stream(&ingest.stream).await {
        Ok(mut stream) => {
            if let Ok(info) = stream.info().await {
                status.events_stored = Some(info.state.messages);
            }
            match stream
                .get_consumer::<async_nats::jetstream::consumer::pull::Config>(&ingest.consumer)
                .await
            {
                Ok(mut consumer) => {
                    if let Ok(info) = consumer.info().await {
                        status.consumer_pending = Some(info.num_pending);
                        status.consumer_ack_pending = Some(info.num_ack_pending as u64);
                    }
                }
                Err(_) => problems.push(format!(
                    "consumer {} does not exist: no worker has run (`persona-prefs serve`)",
                    ingest.consumer
                )),
            }
        }
        Err(_) => problems.push(format!(
            "events stream {} does not exist: no worker has run (`persona-prefs serve`)",
            ingest.stream
        )),
    }
    // A missing dead-letter stream is not a problem of its own: it comes with the events one.
    if let Ok(stored) = DeadLetters::new(js, ingest.clone()).stored().await {
        status.dead_letters = Some(stored);
        if stored > 0 {
            warnings.push(format!(
                "{stored} dead letters wait for an operator (`persona-prefs dlq list`)"
            ));
        }
    }
    status.replicas = ping_replicas(&client, &config.serve.service_name, listen).await;
    if status.replicas.is_empty() {
        problems.push(format!(
            "no replica of service {} answered $SRV.PING within {} ms: injection requests go unanswered",
            config.serve.service_name,
            listen.as_millis()
        ));
    }
    Some(status)
}

/// Every answer to `$SRV.PING.<name>` within `listen`.
async fn ping_replicas(client: &async_nats::Client, name: &str, listen: Duration) -> Vec<Replica> {
    let inbox = client.new_inbox();
    let Ok(mut answers) = client.subscribe(inbox.clone()).await else {
        return Vec::new();
    };
    if client
        .publish_with_reply(format!("$SRV.PING.{name}"), inbox, "".into())
        .await
        .is_err()
    {
        return Vec::new();
    }
    let mut replicas = Vec::new();
    let deadline = tokio::time::Instant::now() + listen;
    while let Ok(Some(message)) = tokio::time::timeout_at(deadline, answers.next()).await {
        let Ok(body) = serde_json::from_slice::<serde_json::Value>(&message.payload) else {
            continue;
        };
        replicas.push(Replica {
            id: body["id"].as_str().unwrap_or_default().to_string(),
            version: body["version"].as_str().unwrap_or_default().to_string(),
        });
    }
    replicas
}
