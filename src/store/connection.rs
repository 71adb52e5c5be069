//! One connection type for a single Redis node and for a Redis Cluster.
//!
//! Commands that name their keys (HSET, VSIM, EVALSHA with KEYS, …) are routed by the cluster
//! client on their own. Commands that name no key but concern one persona are sent to the
//! master that owns the persona's slot ([`RedisConnection::query_for_key`]); administration
//! goes to every master ([`RedisConnection::query_every_master`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use redis::aio::{ConnectionLike, ConnectionManager};
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{
    MultipleNodeRoutingInfo, Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr,
};
use redis::{Cmd, FromRedisValue, Pipeline, RedisFuture, RedisResult, Value};

/// A multiplexed, reconnecting connection to one node or to a cluster. Cheap to clone.
#[derive(Clone)]
pub enum RedisConnection {
    Single(ConnectionManager),
    Cluster(Arc<ClusterHandle>),
}

/// The cluster connection, renewed after a transport failure.
///
/// The cluster client reconnects to the address its slot map names for a slot; a master that
/// died stays in that map, and the client keeps trying its address instead of asking the other
/// nodes who serves its slots now. So after a request fails in transit, a new connection is
/// made from the seed nodes (at most twice a second), which reads the current slot map: the
/// promoted replica's. Requests meanwhile fail as retryable and are retried by their callers
/// (ingest naks and redelivers).
pub struct ClusterHandle {
    client: ClusterClient,
    current: std::sync::RwLock<ClusterConnection>,
    renewing: AtomicBool,
    last_renewed: std::sync::Mutex<Instant>,
}

impl ClusterHandle {
    pub async fn connect(client: ClusterClient) -> RedisResult<ClusterHandle> {
        let connection = client.get_async_connection().await?;
        Ok(ClusterHandle {
            client,
            current: std::sync::RwLock::new(connection),
            renewing: AtomicBool::new(false),
            last_renewed: std::sync::Mutex::new(Instant::now()),
        })
    }

    fn current(&self) -> ClusterConnection {
        self.current
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    /// After a transport failure: a new connection from the seeds, in the background.
    fn renew_after(self: &Arc<Self>, error: &redis::RedisError) {
        // Anything but the server's own answer to the command (a script error, a wrong type):
        // those say nothing about the topology.
        let answered = matches!(error.kind(), redis::ErrorKind::Server(_))
            && !error.is_cluster_error()
            && !matches!(
                error.kind(),
                redis::ErrorKind::Server(
                    redis::ServerErrorKind::TryAgain
                        | redis::ServerErrorKind::ClusterDown
                        | redis::ServerErrorKind::MasterDown
                )
            );
        if answered {
            return;
        }
        let recently = self
            .last_renewed
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .elapsed()
            < Duration::from_millis(500);
        if recently || self.renewing.swap(true, Ordering::AcqRel) {
            return;
        }
        tracing::info!(%error, "renewing the redis cluster connection after a transport failure");
        let handle = Arc::clone(self);
        tokio::spawn(async move {
            match handle.client.get_async_connection().await {
                Ok(connection) => {
                    *handle
                        .current
                        .write()
                        .unwrap_or_else(|poisoned| poisoned.into_inner()) = connection;
                    tracing::info!("redis cluster connection renewed");
                }
                Err(error) => tracing::warn!(%error, "renewing the redis cluster connection"),
            }
            *handle
                .last_renewed
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner()) = Instant::now();
            handle.renewing.store(false, Ordering::Release);
        });
    }

    async fn route(self: &Arc<Self>, cmd: &Cmd, routing: RoutingInfo) -> RedisResult<Value> {
        self.current()
            .route_command(cmd.clone(), routing)
            .await
            .inspect_err(|error| self.renew_after(error))
    }
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
            RedisConnection::Cluster(handle) => {
                let routing = RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(
                    Route::with_key(key.as_bytes(), SlotAddr::Master),
                ));
                let value = handle.route(cmd, routing).await?;
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
            RedisConnection::Cluster(handle) => {
                let route = Route::with_key(key.as_bytes(), SlotAddr::Master);
                handle
                    .current()
                    .route_pipeline(
                        pipe.clone(),
                        0,
                        pipe.len(),
                        SingleNodeRoutingInfo::SpecificNode(route),
                    )
                    .await
                    .inspect_err(|error| handle.renew_after(error))
            }
        }
    }

    /// [`RedisConnection::pipeline_for_key`] for a pipeline that invokes `script` (built with
    /// `ignore_errors`, so each command's error comes back in its place): a server that does not
    /// know the script yet (started, restarted or failed over since it was loaded) is given it,
    /// and the pipeline is sent once more. Other errors are left in place for the caller.
    pub async fn pipeline_with_script_for_key(
        &mut self,
        key: &str,
        pipe: &Pipeline,
        script: &redis::Script,
    ) -> RedisResult<Vec<Value>> {
        let unknown_script =
            |error: &redis::ServerError| error.kind() == Some(redis::ServerErrorKind::NoScript);
        match self.pipeline_for_key(key, pipe).await {
            Ok(replies)
                if !replies.iter().any(
                    |reply| matches!(reply, Value::ServerError(error) if unknown_script(error)),
                ) =>
            {
                return Ok(replies);
            }
            Ok(_) => {}
            Err(error)
                if error.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript) => {}
            Err(error) => return Err(error),
        }
        script.load_async(self).await?;
        self.pipeline_for_key(key, pipe).await
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
            RedisConnection::Cluster(handle) => {
                let routing = RoutingInfo::MultiNode((MultipleNodeRoutingInfo::AllMasters, None));
                match handle.route(cmd, routing).await? {
                    Value::Map(replies) => Ok(replies
                        .into_iter()
                        .map(|(address, value)| (value_text(&address), value))
                        .collect()),
                    other => Ok(vec![("cluster".to_string(), other)]),
                }
            }
        }
    }

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
            RedisConnection::Cluster(handle) => {
                let invalid = |reason: &'static str| {
                    redis::RedisError::from((
                        redis::ErrorKind::InvalidClientConfig,
                        reason,
                        node.to_string(),
                    ))
                };
                let (host, port) = node
                    .rsplit_once(':')
                    .ok_or_else(|| invalid("node address without a port"))?;
                let port = port
                    .parse()
                    .map_err(|_| invalid("node address with a bad port"))?;
                let routing = RoutingInfo::SingleNode(SingleNodeRoutingInfo::ByAddress {
                    host: host.to_string(),
                    port,
                });
                let value = handle.route(cmd, routing).await?;
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
            RedisConnection::Cluster(handle) => {
                let handle = Arc::clone(handle);
                Box::pin(async move {
                    let mut connection = handle.current();
                    connection
                        .req_packed_command(cmd)
                        .await
                        .inspect_err(|error| handle.renew_after(error))
                })
            }
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
            RedisConnection::Cluster(handle) => {
                let handle = Arc::clone(handle);
                Box::pin(async move {
                    let mut connection = handle.current();
                    connection
                        .req_packed_commands(cmd, offset, count)
                        .await
                        .inspect_err(|error| handle.renew_after(error))
                })
            }
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            RedisConnection::Single(connection) => connection.get_db(),
            RedisConnection::Cluster(_) => 0,
        }
    }
}
