//! A local HTTP server speaking the OpenAI wire format, the one test double the project allows
//! (for the paid LLM and embedding APIs). Replies are scripted: a queue of faults or canned
//! answers is served first, then a default responder.
#![allow(dead_code)]

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// A server's slots: how many, one permit each, and how long each request takes.
type Slots = Option<(Arc<tokio::sync::Semaphore>, usize, Duration)>;

/// One scripted reply.
#[derive(Clone)]
pub enum Reply {
    /// Status, JSON body, extra headers.
    Json(u16, Value, Vec<(String, String)>),
    /// A 200 whose body is not JSON at all.
    Garbage(u16, String),
    /// Wait, then send the inner reply.
    Delay(Duration, Box<Reply>),
}

impl Reply {
    pub fn ok(body: Value) -> Reply {
        Reply::Json(200, body, Vec::new())
    }
    pub fn status(status: u16) -> Reply {
        Reply::Json(
            status,
            json!({"error": {"message": "scripted failure", "type": "server_error"}}),
            Vec::new(),
        )
    }
    pub fn rate_limited(retry_after_secs: f64) -> Reply {
        Reply::Json(
            429,
            json!({"error": {"message": "slow down"}}),
            vec![("Retry-After".into(), retry_after_secs.to_string())],
        )
    }
    /// A chat completion whose message content is `content`.
    pub fn chat(content: &str) -> Reply {
        Reply::ok(json!({
            "id": "chatcmpl-test", "object": "chat.completion", "model": "fake",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}
        }))
    }
    /// A chat completion cut off at its token budget (`finish_reason: "length"`).
    pub fn cut_off(content: &str) -> Reply {
        Reply::ok(json!({
            "id": "chatcmpl-test", "object": "chat.completion", "model": "fake",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "length"}],
            "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}
        }))
    }
    /// A 400 as a server answers a request shape it does not take.
    pub fn bad_request() -> Reply {
        Reply::Json(
            400,
            json!({"error": {"code": 400, "message": "unsupported", "type": "invalid_request_error"}}),
            Vec::new(),
        )
    }
    /// A chat completion returning `{"opinions": opinions}`.
    pub fn opinions(opinions: Value) -> Reply {
        Reply::chat(&json!({ "opinions": opinions }).to_string())
    }
}

/// What the server received.
#[derive(Clone, Debug)]
pub struct Received {
    pub at: Instant,
    pub path: String,
    pub body: Value,
    pub authorization: Option<String>,
    /// The W3C `traceparent` header, if the request carried one.
    pub traceparent: Option<String>,
}

type Responder = Arc<dyn Fn(&str, &Value) -> Reply + Send + Sync>;

#[derive(Clone)]
pub struct FakeOpenAi {
    pub base_url: String,
    script: Arc<Mutex<VecDeque<Reply>>>,
    received: Arc<Mutex<Vec<Received>>>,
    default: Arc<Mutex<Responder>>,
    in_flight: Arc<std::sync::atomic::AtomicUsize>,
    max_in_flight: Arc<std::sync::atomic::AtomicUsize>,
    /// Like a llama.cpp server with this many slots: `/props` reports them, and POSTs are
    /// computed that many at a time (each taking `compute`, and finished even when the client
    /// has gone), the rest waiting in the server. `None`: no `/props`, every request at once.
    slots: Arc<Mutex<Slots>>,
}

impl FakeOpenAi {
    /// Starts on a free loopback port. The default reply extracts nothing.
    pub async fn start() -> FakeOpenAi {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base_url = format!("http://{}/v1", listener.local_addr().unwrap());
        let fake = FakeOpenAi {
            base_url,
            script: Arc::new(Mutex::new(VecDeque::new())),
            received: Arc::new(Mutex::new(Vec::new())),
            default: Arc::new(Mutex::new(Arc::new(|_: &str, _: &Value| {
                Reply::opinions(json!([]))
            }))),
            in_flight: Default::default(),
            max_in_flight: Default::default(),
            slots: Default::default(),
        };
        let server = fake.clone();
        tokio::spawn(async move {
            loop {
                let Ok((socket, _)) = listener.accept().await else {
                    return;
                };
                let server = server.clone();
                tokio::spawn(async move { server.serve(socket).await });
            }
        });
        fake
    }

    /// Behaves like a llama.cpp server with `slots` slots, each request taking `compute`.
    pub fn with_slots(&self, slots: usize, compute: Duration) {
        *self.slots.lock().unwrap() =
            Some((Arc::new(tokio::sync::Semaphore::new(slots)), slots, compute));
    }

    /// Replies served, in order, before the default responder.
    pub fn script(&self, replies: impl IntoIterator<Item = Reply>) {
        self.script.lock().unwrap().extend(replies);
    }

    pub fn respond_with(&self, responder: impl Fn(&str, &Value) -> Reply + Send + Sync + 'static) {
        *self.default.lock().unwrap() = Arc::new(responder);
    }

    pub fn received(&self) -> Vec<Received> {
        self.received.lock().unwrap().clone()
    }

    /// The most requests this server was answering at one time.
    pub fn max_in_flight(&self) -> usize {
        self.max_in_flight.load(std::sync::atomic::Ordering::SeqCst)
    }

    async fn serve(&self, mut socket: tokio::net::TcpStream) {
        loop {
            let mut buffer = Vec::new();
            let mut chunk = [0u8; 8192];
            let header_end = loop {
                if let Some(at) = find(&buffer, b"\r\n\r\n") {
                    break at;
                }
                match socket.read(&mut chunk).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => buffer.extend_from_slice(&chunk[..n]),
                }
            };
            let head = String::from_utf8_lossy(&buffer[..header_end]).to_string();
            let length = head
                .lines()
                .find_map(|line| {
                    line.to_ascii_lowercase()
                        .strip_prefix("content-length:")
                        .map(|v| v.trim().parse::<usize>().unwrap_or(0))
                })
                .unwrap_or(0);
            while buffer.len() < header_end + 4 + length {
                match socket.read(&mut chunk).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => buffer.extend_from_slice(&chunk[..n]),
                }
            }
            let body: Value =
                serde_json::from_slice(&buffer[header_end + 4..header_end + 4 + length])
                    .unwrap_or(Value::Null);
            let path = head.split_whitespace().nth(1).unwrap_or("/").to_string();
            if head.starts_with("GET ") {
                // llama.cpp's `/props`, when this server plays one; nothing else is served.
                let slots = self.slots.lock().unwrap().as_ref().map(|(_, n, _)| *n);
                let reply = match (path.as_str(), slots) {
                    ("/props", Some(slots)) => Reply::ok(json!({"total_slots": slots})),
                    _ => Reply::Json(404, json!({"error": "not found"}), Vec::new()),
                };
                if !self.write(&mut socket, reply).await {
                    return;
                }
                continue;
            }
            let header = |wanted: &str| {
                head.lines().find_map(|line| {
                    let (name, value) = line.split_once(':')?;
                    name.eq_ignore_ascii_case(wanted)
                        .then(|| value.trim().to_string())
                })
            };
            let authorization = header("authorization");
            let traceparent = header("traceparent");
            self.received.lock().unwrap().push(Received {
                at: Instant::now(),
                path: path.clone(),
                body: body.clone(),
                authorization,
                traceparent,
            });
            use std::sync::atomic::Ordering::SeqCst;
            let now = self.in_flight.fetch_add(1, SeqCst) + 1;
            self.max_in_flight.fetch_max(now, SeqCst);
            let scripted = self.script.lock().unwrap().pop_front();
            let reply = match scripted {
                Some(reply) => reply,
                None => {
                    let responder = self.default.lock().unwrap().clone();
                    responder(&path, &body)
                }
            };
            let slots = self.slots.lock().unwrap().clone();
            let reply = match slots {
                Some((slot, _, compute)) => {
                    let _computing = slot.acquire_owned().await.unwrap();
                    tokio::time::sleep(compute).await;
                    reply
                }
                None => reply,
            };
            let written = self.write(&mut socket, reply).await;
            self.in_flight.fetch_sub(1, SeqCst);
            if !written {
                return;
            }
        }
    }

    async fn write(&self, socket: &mut tokio::net::TcpStream, reply: Reply) -> bool {
        let mut reply = reply;
        loop {
            match reply {
                Reply::Delay(wait, inner) => {
                    tokio::time::sleep(wait).await;
                    reply = *inner;
                }
                Reply::Json(status, body, headers) => {
                    let text = body.to_string();
                    let extra: String = headers
                        .iter()
                        .map(|(k, v)| format!("{k}: {v}\r\n"))
                        .collect();
                    let response = format!(
                        "HTTP/1.1 {status} Scripted\r\nContent-Type: application/json\r\nContent-Length: {}\r\n{extra}\r\n{text}",
                        text.len()
                    );
                    return socket.write_all(response.as_bytes()).await.is_ok();
                }
                Reply::Garbage(status, text) => {
                    let response = format!(
                        "HTTP/1.1 {status} Scripted\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\r\n{text}",
                        text.len()
                    );
                    return socket.write_all(response.as_bytes()).await.is_ok();
                }
            }
        }
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack
        .windows(needle.len())
        .position(|window| window == needle)
}

/// The persona message an extraction request asks about.
pub fn persona_message(body: &Value) -> String {
    let content = body["messages"][1]["content"].as_str().unwrap_or_default();
    let conversation: Value = serde_json::from_str(content).unwrap_or(Value::Null);
    conversation["persona_message"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}
