//! One connection type for a single Redis node and for a Redis Cluster.
//!
//! Commands that name their keys (HSET, VSIM, EVALSHA with KEYS, …) are routed by the cluster
//! client on their own. RediSearch commands name an index, not a key, and RediSearch 2.10 on a
//! cluster has no coordinator: each master indexes only its own keys. Since every key of a
//! persona lives in that persona's slot, a per-persona query sent to the master owning the slot
//! ([`RedisConnection::query_for_key`]) sees all of that persona's preferences; index
//! administration goes to every master ([`RedisConnection::query_every_master`]).

use redis::aio::{ConnectionLike, ConnectionManager};
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{
    MultipleNodeRoutingInfo, Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr,
};
use redis::{Cmd, FromRedisValue, Pipeline, RedisFuture, RedisResult, Value};

/// A multiplexed, reconnecting connection to one node or to a cluster. Cheap to clone.
#[derive(Clone)]
pub enum RedisConnection {
    Single(ConnectionManager),
    Cluster(ClusterConnection),
}

impl RedisConnection {
    pub fn is_cluster(&self) -> bool {
        matches!(self, RedisConnection::Cluster(_))
    }

    /// Sends `cmd` to the master that owns `key`'s slot (on a single node: to it).
    pub async fn query_for_key<T: FromRedisValue>(
        &mut self,
        key: &str,
        cmd: &Cmd,
    ) -> RedisResult<T> {
        match self {
            RedisConnection::Single(connection) => cmd.query_async(connection).await,
            RedisConnection::Cluster(connection) => {
                let routing = RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(
                    Route::with_key(key.as_bytes(), SlotAddr::Master),
                ));
                let value = connection.route_command(cmd.clone(), routing).await?;
                redis::from_redis_value(value).map_err(redis::RedisError::from)
            }
        }
    }

    /// Sends a pipeline to the master that owns `key`'s slot.
    pub async fn pipeline_for_key(
        &mut self,
        key: &str,
        pipe: &Pipeline,
    ) -> RedisResult<Vec<Value>> {
        match self {
            RedisConnection::Single(connection) => pipe.query_async(connection).await,
            RedisConnection::Cluster(connection) => {
                let route = Route::with_key(key.as_bytes(), SlotAddr::Master);
                connection
                    .route_pipeline(
                        pipe.clone(),
                        0,
                        pipe.len(),
                        SingleNodeRoutingInfo::SpecificNode(route),
                    )
                    .await
            }
        }
    }

    /// Sends `cmd` to every master and returns each one's reply, by node address (`"single"`
    /// on a single node). A node's error reply is returned as [`Value::ServerError`] in its
    /// place, so the caller can say which node refused.
    pub async fn query_every_master(&mut self, cmd: &Cmd) -> RedisResult<Vec<(String, Value)>> {
        match self {
            RedisConnection::Single(connection) => {
                let value = match cmd.query_async::<Value>(connection).await {
                    Ok(value) => value,
                    Err(error) => match error.clone().try_into() {
                        Ok(server_error) => Value::ServerError(server_error),
                        Err(_) => return Err(error),
                    },
                };
                Ok(vec![("single".to_string(), value)])
            }
            RedisConnection::Cluster(connection) => {
                let routing = RoutingInfo::MultiNode((MultipleNodeRoutingInfo::AllMasters, None));
                match connection.route_command(cmd.clone(), routing).await? {
                    Value::Map(replies) => Ok(replies
                        .into_iter()
                        .map(|(address, value)| (value_text(&address), value))
                        .collect()),
                    other => Ok(vec![("cluster".to_string(), other)]),
                }
            }
        }
    }
}

impl RedisConnection {
    /// The address of every master (`"single"` on a single node).
    pub async fn masters(&mut self) -> RedisResult<Vec<String>> {
        let replies = self.query_every_master(&redis::cmd("PING")).await?;
        Ok(replies.into_iter().map(|(node, _)| node).collect())
    }

    /// Sends `cmd` to one node named by [`RedisConnection::masters`] (SCAN, which walks one
    /// node's keyspace).
    pub async fn query_at_node<T: FromRedisValue>(
        &mut self,
        node: &str,
        cmd: &Cmd,
    ) -> RedisResult<T> {
        match self {
            RedisConnection::Single(connection) => cmd.query_async(connection).await,
            RedisConnection::Cluster(connection) => {
                let (host, port) = node.rsplit_once(':').ok_or_else(|| {
                    redis::RedisError::from((
                        redis::ErrorKind::InvalidClientConfig,
                        "node address without a port",
                        node.to_string(),
                    ))
                })?;
                let port = port.parse().map_err(|_| {
                    redis::RedisError::from((
                        redis::ErrorKind::InvalidClientConfig,
                        "node address with a bad port",
                        node.to_string(),
                    ))
                })?;
                let routing = RoutingInfo::SingleNode(SingleNodeRoutingInfo::ByAddress {
                    host: host.to_string(),
                    port,
                });
                let value = connection.route_command(cmd.clone(), routing).await?;
                redis::from_redis_value(value).map_err(redis::RedisError::from)
            }
        }
    }
}

fn value_text(value: &Value) -> String {
    match value {
        Value::BulkString(bytes) => String::from_utf8_lossy(bytes).into_owned(),
        Value::SimpleString(text) => text.clone(),
        other => format!("{other:?}"),
    }
}

impl ConnectionLike for RedisConnection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            RedisConnection::Single(connection) => connection.req_packed_command(cmd),
            RedisConnection::Cluster(connection) => connection.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        cmd: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            RedisConnection::Single(connection) => {
                connection.req_packed_commands(cmd, offset, count)
            }
            RedisConnection::Cluster(connection) => {
                connection.req_packed_commands(cmd, offset, count)
            }
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            RedisConnection::Single(connection) => connection.get_db(),
            RedisConnection::Cluster(connection) => connection.get_db(),
        }
    }
}
