//! The RediSearch index over preference hashes: its schema, creation and verification.

use redis::Value;

use super::error::StoreError;
use super::query::value_to_string;
use super::record::field;

/// What `FT.INFO` tells about an index, reduced to what must match the configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct IndexInfo {
    pub name: String,
    pub prefixes: Vec<String>,
    /// (attribute name, type) for every field, e.g. ("persona_id", "TAG").
    pub attributes: Vec<(String, String)>,
    pub vector_dims: Option<usize>,
    pub vector_metric: Option<String>,
    pub vector_type: Option<String>,
    /// TAG attributes declared CASESENSITIVE.
    pub case_sensitive: Vec<String>,
    pub num_docs: u64,
    /// Share of the existing hashes indexed so far (1.0 once a new index has caught up).
    pub percent_indexed: f64,
    /// Hashes under the prefix that could not be indexed (e.g. a vector of another size).
    pub hash_indexing_failures: u64,
}

impl IndexInfo {
    /// What stands for the index where there is none (a Redis Cluster, or `redis.text_index`
    /// off; see `PreferenceStore::ensure_index`): the schema this build would use, no
    /// documents.
    pub fn placeholder(name: &str) -> IndexInfo {
        IndexInfo {
            name: name.to_string(),
            prefixes: Vec::new(),
            attributes: SCHEMA
                .iter()
                .map(|(name, kind)| (name.to_string(), kind.to_string()))
                .collect(),
            vector_dims: None,
            vector_metric: None,
            vector_type: None,
            case_sensitive: CASE_SENSITIVE.iter().map(|n| n.to_string()).collect(),
            num_docs: 0,
            percent_indexed: 1.0,
            hash_indexing_failures: 0,
        }
    }
}

/// The fields and types this build queries. TAG fields holding ids are CASESENSITIVE: persona
/// "Ada" and persona "ada" are different personas.
///
/// No VECTOR field: vector search runs on each persona's own vector set (`keys.rs`), which
/// holds only that persona's active preferences. An HNSW field here would keep a second graph
/// of every vector of every persona, re-indexed on each write, that no query needs.
pub const SCHEMA: [(&str, &str); 7] = [
    (field::PERSONA_ID, "TAG"),
    (field::CATEGORY, "TAG"),
    (field::ACTIVE, "TAG"),
    (field::RELATED_USER_IDS_INDEX, "TAG"),
    (field::STRENGTH, "NUMERIC"),
    (field::NAME, "TEXT"),
    (field::OPINION, "TEXT"),
];

/// The TAG fields holding ids, which must compare case-sensitively.
pub const CASE_SENSITIVE: [&str; 2] = [field::PERSONA_ID, field::RELATED_USER_IDS_INDEX];

pub fn create_command(index: &str, prefix: &str) -> redis::Cmd {
    let mut cmd = redis::cmd("FT.CREATE");
    cmd.arg(index)
        .arg("ON")
        .arg("HASH")
        .arg("PREFIX")
        .arg(1)
        .arg(prefix)
        .arg("SCHEMA")
        .arg(field::PERSONA_ID)
        .arg("TAG")
        .arg("CASESENSITIVE")
        .arg(field::CATEGORY)
        .arg("TAG")
        .arg(field::ACTIVE)
        .arg("TAG")
        .arg(field::RELATED_USER_IDS_INDEX)
        .arg("TAG")
        .arg("SEPARATOR")
        .arg(",")
        .arg("CASESENSITIVE")
        .arg(field::STRENGTH)
        .arg("NUMERIC")
        .arg("SORTABLE")
        .arg(field::NAME)
        .arg("TEXT")
        .arg(field::OPINION)
        .arg("TEXT");
    cmd
}

/// Parses an FT.INFO reply (RESP2: a flat list of name/value pairs).
pub fn parse_info(name: &str, reply: Value) -> Result<IndexInfo, StoreError> {
    let Value::Array(items) = reply else {
        return Err(StoreError::UnexpectedReply(format!(
            "FT.INFO returned {reply:?}"
        )));
    };
    let mut info = IndexInfo {
        name: name.to_string(),
        prefixes: Vec::new(),
        attributes: Vec::new(),
        vector_dims: None,
        vector_metric: None,
        vector_type: None,
        case_sensitive: Vec::new(),
        num_docs: 0,
        percent_indexed: 1.0,
        hash_indexing_failures: 0,
    };
    let mut items = items.into_iter();
    while let (Some(key), Some(value)) = (items.next(), items.next()) {
        match value_to_string(&key).as_str() {
            "index_definition" => {
                let pairs = pairs_of(&value);
                if let Some(Value::Array(prefixes)) =
                    pairs.iter().find(|(k, _)| k == "prefixes").map(|(_, v)| v)
                {
                    info.prefixes = prefixes.iter().map(value_to_string).collect();
                }
            }
            "attributes" => {
                let Value::Array(attributes) = value else {
                    continue;
                };
                for attribute in attributes {
                    // Attribute entries are flat lists, but flags such as SORTABLE stand alone,
                    // so read by scanning for known keys rather than by pairs.
                    let Value::Array(parts) = attribute else {
                        continue;
                    };
                    let words: Vec<String> = parts.iter().map(value_to_string).collect();
                    let after = |key: &str| {
                        words
                            .iter()
                            .position(|w| w.eq_ignore_ascii_case(key))
                            .and_then(|i| words.get(i + 1))
                            .cloned()
                    };
                    let attribute_name = after("attribute")
                        .or_else(|| after("identifier"))
                        .unwrap_or_default();
                    let kind = after("type").unwrap_or_default();
                    if words
                        .iter()
                        .any(|w| w.eq_ignore_ascii_case("CASESENSITIVE"))
                    {
                        info.case_sensitive.push(attribute_name.clone());
                    }
                    if kind == "VECTOR" {
                        info.vector_dims = after("dim").and_then(|d| d.parse().ok());
                        info.vector_metric = after("distance_metric");
                        info.vector_type = after("data_type");
                    }
                    info.attributes.push((attribute_name, kind));
                }
            }
            "num_docs" => {
                info.num_docs = value_to_string(&value).parse::<f64>().unwrap_or(0.0) as u64
            }
            "percent_indexed" => {
                info.percent_indexed = value_to_string(&value).parse::<f64>().unwrap_or(1.0)
            }
            "hash_indexing_failures" => {
                info.hash_indexing_failures =
                    value_to_string(&value).parse::<f64>().unwrap_or(0.0) as u64
            }
            _ => {}
        }
    }
    Ok(info)
}

/// Every way `info` differs from what this build needs, as readable phrases.
pub fn mismatches(info: &IndexInfo, prefix: &str) -> Vec<String> {
    let mut problems = Vec::new();
    if !info.prefixes.iter().any(|p| p == prefix) {
        problems.push(format!(
            "it covers key prefixes {:?}, configured prefix is {prefix:?}",
            info.prefixes
        ));
    }
    for (name, kind) in SCHEMA {
        match info
            .attributes
            .iter()
            .find(|(existing, _)| existing == name)
        {
            None => problems.push(format!("field {name} ({kind}) is missing")),
            Some((_, existing)) if existing != kind => {
                problems.push(format!("field {name} is {existing}, expected {kind}"))
            }
            Some(_) => {}
        }
    }
    for name in CASE_SENSITIVE {
        if info.attributes.iter().any(|(existing, _)| existing == name)
            && !info.case_sensitive.iter().any(|c| c == name)
        {
            problems.push(format!(
                "TAG {name} is not CASESENSITIVE (persona \"Ada\" and persona \"ada\" would share memories)"
            ));
        }
    }
    if info.attributes.iter().any(|(_, kind)| kind == "VECTOR") {
        problems.push(
            "it indexes the embedding as a VECTOR field (the layout before per-persona vector \
             sets; the original system's too)"
                .into(),
        );
    }
    problems
}

fn pairs_of(value: &Value) -> Vec<(String, Value)> {
    let Value::Array(items) = value else {
        return Vec::new();
    };
    items
        .chunks(2)
        .filter(|c| c.len() == 2)
        .map(|c| (value_to_string(&c[0]), c[1].clone()))
        .collect()
}

use std::time::{Duration, Instant};

use super::{PreferenceStore, loose_text};

impl PreferenceStore {
    /// Creates the index if missing (on every master of a cluster: each indexes its own keys).
    /// If it exists with another schema, fails with an error naming the difference, so nothing
    /// is written where it cannot be found.
    pub async fn ensure_index(&self) -> Result<IndexInfo, StoreError> {
        if self.connection.is_cluster() {
            // RediSearch 2.10 treats an index name as a key (FT.CREATE is MOVED to the master
            // owning the name's slot) and has no coordinator, so no index can see every shard.
            // Every hot and administrative path but keyword search reads the personas' own
            // structures; on a cluster there is no shared index at all.
            return Ok(IndexInfo::placeholder(&self.settings.index_name));
        }
        let nodes = self.index_info_per_node().await?;
        for (node, info) in &nodes {
            let Some(info) = info else { continue };
            let problems = mismatches(info, &self.hash_prefix());
            if !problems.is_empty() {
                let at = if self.connection.is_cluster() {
                    format!(" on {node}")
                } else {
                    String::new()
                };
                return Err(StoreError::IndexMismatch {
                    index: info.name.clone(),
                    reason: format!(
                        "{}{at}. Run `persona-prefs index migrate` (it rebuilds the index and moves \
                         data of earlier layouts; hashes are kept), or fix the configuration",
                        problems.join("; "),
                    ),
                });
            }
        }
        if !self.settings.text_index {
            // An earlier layout's index was refused above; one of this build's is left by a
            // deployment that had the index on: it is not asked, yet indexes every write.
            if nodes.iter().any(|(_, info)| info.is_some()) {
                tracing::warn!(
                    index = %self.settings.index_name,
                    "a full-text index exists but redis.text_index is off: it is not used and \
                     costs memory on every write; `persona-prefs index migrate` drops it (the \
                     hashes stay)"
                );
            }
            return Ok(IndexInfo::placeholder(&self.settings.index_name));
        }
        if nodes.iter().any(|(_, info)| info.is_none()) {
            let mut connection = self.connection.clone();
            let create = create_command(&self.settings.index_name, &self.hash_prefix());
            for (node, reply) in connection.query_every_master(&create).await? {
                if let Value::ServerError(error) = reply {
                    let text = loose_text(&error.to_string());
                    // Another worker created it between our probe and our create: verify theirs.
                    if !text.contains("already exists") {
                        return Err(StoreError::UnexpectedReply(format!(
                            "FT.CREATE on {node}: {error}"
                        )));
                    }
                }
            }
        }
        let mut again = self.index_info().await?;
        let info = again.take().ok_or_else(|| {
            StoreError::UnexpectedReply("index missing right after FT.CREATE".into())
        })?;
        let problems = mismatches(&info, &self.hash_prefix());
        if !problems.is_empty() {
            return Err(StoreError::IndexMismatch {
                index: info.name.clone(),
                reason: problems.join("; "),
            });
        }
        Ok(info)
    }

    /// `FT.INFO`, or `None` when the index does not exist; the placeholder where this
    /// deployment keeps none (a cluster, or `redis.text_index` off).
    pub async fn index_info(&self) -> Result<Option<IndexInfo>, StoreError> {
        if !self.has_text_index() {
            return Ok(Some(IndexInfo::placeholder(&self.settings.index_name)));
        }
        self.existing_index().await
    }

    /// `FT.INFO` of the index as it is, whatever the configuration says (`None` when it does
    /// not exist, and always on a cluster): what a migration must see.
    pub async fn existing_index(&self) -> Result<Option<IndexInfo>, StoreError> {
        if self.connection.is_cluster() {
            return Ok(None);
        }
        let mut combined: Option<IndexInfo> = None;
        for (_, info) in self.index_info_per_node().await? {
            let Some(info) = info else { return Ok(None) };
            combined = Some(match combined {
                None => info,
                Some(mut total) => {
                    total.num_docs += info.num_docs;
                    total.hash_indexing_failures += info.hash_indexing_failures;
                    total.percent_indexed = total.percent_indexed.min(info.percent_indexed);
                    total
                }
            });
        }
        Ok(combined)
    }

    /// `FT.INFO` of every master (one entry on a single node).
    pub async fn index_info_per_node(
        &self,
    ) -> Result<Vec<(String, Option<IndexInfo>)>, StoreError> {
        let mut connection = self.connection.clone();
        let mut command = redis::cmd("FT.INFO");
        command.arg(&self.settings.index_name);
        let mut nodes = Vec::new();
        for (node, reply) in connection.query_every_master(&command).await? {
            let info = match reply {
                Value::ServerError(error) => {
                    let text = loose_text(&error.to_string());
                    if text.contains("unknown index name") || text.contains("no such index") {
                        None
                    } else {
                        return Err(StoreError::UnexpectedReply(format!(
                            "FT.INFO on {node}: {error}"
                        )));
                    }
                }
                reply => Some(parse_info(&self.settings.index_name, reply)?),
            };
            nodes.push((node, info));
        }
        nodes.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(nodes)
    }

    /// Drops the index definition on every master; the hashes stay (no `DD`).
    pub async fn drop_index(&self) -> Result<(), StoreError> {
        if self.connection.is_cluster() {
            return Ok(());
        }
        let mut connection = self.connection.clone();
        let mut command = redis::cmd("FT.DROPINDEX");
        command.arg(&self.settings.index_name);
        for (node, reply) in connection.query_every_master(&command).await? {
            if let Value::ServerError(error) = reply {
                let text = loose_text(&error.to_string());
                if !(text.contains("unknown index name") || text.contains("no such index")) {
                    return Err(StoreError::UnexpectedReply(format!(
                        "FT.DROPINDEX on {node}: {error}"
                    )));
                }
            }
        }
        Ok(())
    }

    /// Polls `FT.INFO` until the index has read every existing hash (after a create), or
    /// `patience` runs out.
    pub async fn wait_until_indexed(&self, patience: Duration) -> Result<IndexInfo, StoreError> {
        let deadline = Instant::now() + patience;
        loop {
            let info = self.index_info().await?.ok_or_else(|| {
                StoreError::UnexpectedReply(format!("index {} vanished", self.settings.index_name))
            })?;
            if info.percent_indexed >= 1.0 || Instant::now() >= deadline {
                return Ok(info);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}
