//! A fake model on loopback: an OpenAI-compatible `/v1/chat/completions`
//! that answers each call from a script (recorded replies, or a way to
//! misbehave), counts the calls and notices a caller that hangs up; over
//! plain HTTP, or over TLS with a certificate made in the test.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::Response;
use futures_util::StreamExt;
use serde_json::{Value, json};

/// How the fake answers one call.
#[derive(Clone, Debug)]
pub enum Reply {
    /// The content, streamed as chunks of a few bytes, then `[DONE]`.
    Stream(String),
    /// The content as one JSON body (a server that ignores `stream`).
    Whole(String),
    /// This body as it is, with status 200 and no SSE framing.
    Raw(String),
    /// An error status with a short body.
    Status(u16),
    /// The content one byte per `every`.
    Trickle { content: String, every: Duration },
    /// The first chunks of the content, then the connection drops.
    Dropped(String),
    /// Nothing, ever: the call waits until the caller hangs up.
    Hang,
    /// The content in `pieces` chunks, each after the first sent only
    /// once the test adds a permit to `gate`.
    Gated {
        content: String,
        pieces: usize,
        gate: Arc<tokio::sync::Semaphore>,
    },
    /// All of the content, then, once the test adds a permit to `gate`
    /// (having seen it arrive), the connection drops.
    Cut {
        content: String,
        gate: Arc<tokio::sync::Semaphore>,
    },
    /// All of the content, then nothing until the caller hangs up.
    StreamThenHang(String),
}

#[derive(Default)]
struct Script {
    replies: VecDeque<Reply>,
    /// What answers once the script is spent.
    otherwise: Option<Reply>,
    requests: Vec<Value>,
    /// Each request's `Authorization` header.
    authorizations: Vec<Option<String>>,
}

/// A running fake model.
#[derive(Clone)]
pub struct FakeModel {
    pub addr: SocketAddr,
    scheme: &'static str,
    calls: Arc<AtomicUsize>,
    arrived: tokio::sync::watch::Receiver<usize>,
    hung_up: Arc<tokio::sync::Notify>,
    script: Arc<Mutex<Script>>,
}

#[derive(Clone)]
struct Shared {
    calls: Arc<AtomicUsize>,
    arrived: Arc<tokio::sync::watch::Sender<usize>>,
    hung_up: Arc<tokio::sync::Notify>,
    script: Arc<Mutex<Script>>,
}

impl FakeModel {
    /// Starts the fake, answering `replies` in order, then `otherwise`.
    pub async fn start(replies: Vec<Reply>, otherwise: Option<Reply>) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the fake model");
        Self::serve(listener, "http", replies, otherwise)
    }

    /// The fake over TLS, with the certificate and key `tls` holds.
    pub async fn start_tls(
        tls: Arc<tokio_rustls::rustls::ServerConfig>,
        replies: Vec<Reply>,
        otherwise: Option<Reply>,
    ) -> Self {
        let tcp = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the fake model");
        let listener = TlsListener {
            tcp,
            acceptor: tokio_rustls::TlsAcceptor::from(tls),
        };
        Self::serve(listener, "https", replies, otherwise)
    }

    fn serve<L>(
        listener: L,
        scheme: &'static str,
        replies: Vec<Reply>,
        otherwise: Option<Reply>,
    ) -> Self
    where
        L: axum::serve::Listener<Addr = SocketAddr>,
    {
        let script = Arc::new(Mutex::new(Script {
            replies: replies.into(),
            otherwise,
            ..Script::default()
        }));
        let (arrived, watched) = tokio::sync::watch::channel(0);
        let shared = Shared {
            calls: Arc::default(),
            arrived: Arc::new(arrived),
            hung_up: Arc::default(),
            script: Arc::clone(&script),
        };
        let app = axum::Router::new()
            .route("/v1/chat/completions", axum::routing::post(answer))
            .with_state(shared.clone());
        let addr = listener.local_addr().expect("address");
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self {
            addr,
            scheme,
            arrived: watched,
            calls: shared.calls,
            hung_up: shared.hung_up,
            script,
        }
    }

    /// The base URL `--model-url` takes.
    pub fn url(&self) -> String {
        format!("{}://{}/v1", self.scheme, self.addr)
    }

    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }

    /// Resolves once `count` calls have arrived.
    pub async fn calls_reach(&self, count: usize) {
        let mut arrived = self.arrived.clone();
        let _ = arrived.wait_for(|n| *n >= count).await;
    }

    /// The request bodies received, oldest first.
    pub fn requests(&self) -> Vec<Value> {
        self.script.lock().expect("script").requests.clone()
    }

    /// Each request's `Authorization` header, oldest first.
    pub fn authorizations(&self) -> Vec<Option<String>> {
        self.script.lock().expect("script").authorizations.clone()
    }

    /// Resolves once a caller hung up on a [`Reply::Hang`].
    pub async fn hung_up(&self) {
        self.hung_up.notified().await;
    }
}

async fn answer(State(shared): State<Shared>, headers: HeaderMap, body: Bytes) -> Response {
    let reply = {
        let mut script = shared.script.lock().expect("script");
        let request = serde_json::from_slice(&body).unwrap_or(Value::Null);
        script.requests.push(request);
        let authorization = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        script.authorizations.push(authorization);
        script
            .replies
            .pop_front()
            .or_else(|| script.otherwise.clone())
            .unwrap_or(Reply::Status(503))
    };
    let count = shared.calls.fetch_add(1, Ordering::SeqCst) + 1;
    shared.arrived.send_replace(count);
    respond(reply, Arc::clone(&shared.hung_up))
}

fn chunk(text: &str) -> Bytes {
    let chunk =
        json!({"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": null}]});
    Bytes::from(format!("data: {chunk}\n\n"))
}

fn finish() -> Vec<Bytes> {
    let last = json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]});
    vec![
        Bytes::from(format!("data: {last}\n\n")),
        Bytes::from_static(b"data: [DONE]\n\n"),
    ]
}

/// Chunks of a streamed reply: a few characters, as models stream, or
/// 8 KiB ones for a huge reply (building 7-byte chunks of a megabyte
/// would hold the test's one thread for seconds).
fn stream_pieces(content: &str) -> Vec<String> {
    pieces(
        content,
        if content.len() > 64 * 1024 {
            8 * 1024
        } else {
            7
        },
    )
}

fn pieces(content: &str, size: usize) -> Vec<String> {
    let chars: Vec<char> = content.chars().collect();
    chars.chunks(size).map(|c| c.iter().collect()).collect()
}

fn sse(body: Body) -> Response {
    Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .body(body)
        .expect("response")
}

/// Notifies when dropped: the response body went away before its end.
struct HangUp(Arc<tokio::sync::Notify>);

impl Drop for HangUp {
    fn drop(&mut self) {
        self.0.notify_waiters();
        self.0.notify_one();
    }
}

fn respond(reply: Reply, hung_up: Arc<tokio::sync::Notify>) -> Response {
    type Item = Result<Bytes, std::io::Error>;
    match reply {
        Reply::Stream(content) => {
            let mut parts: Vec<Item> = stream_pieces(&content)
                .iter()
                .map(|p| Ok(chunk(p)))
                .collect();
            parts.extend(finish().into_iter().map(Ok));
            sse(Body::from_stream(futures_util::stream::iter(parts)))
        }
        Reply::Whole(content) => {
            let body = json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}]});
            Response::builder()
                .header(header::CONTENT_TYPE, "application/json")
                .body(Body::from(body.to_string()))
                .expect("response")
        }
        Reply::Raw(text) => Response::builder()
            .header(header::CONTENT_TYPE, "text/plain")
            .body(Body::from(text))
            .expect("response"),
        Reply::Status(status) => Response::builder()
            .status(StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR))
            .body(Body::from("{\"error\":{\"message\":\"the fake is down\"}}"))
            .expect("response"),
        Reply::Trickle { content, every } => {
            let mut parts: Vec<Bytes> = pieces(&content, 1).iter().map(|p| chunk(p)).collect();
            parts.extend(finish());
            let stream = futures_util::stream::iter(parts).then(move |part| async move {
                tokio::time::sleep(every).await;
                Ok::<_, std::io::Error>(part)
            });
            sse(Body::from_stream(stream))
        }
        Reply::Dropped(content) => {
            let mut parts: Vec<Item> = pieces(&content, 7)
                .iter()
                .take(2)
                .map(|p| Ok(chunk(p)))
                .collect();
            parts.push(Err(std::io::Error::other("the fake drops the connection")));
            sse(Body::from_stream(futures_util::stream::iter(parts)))
        }
        Reply::Hang => sse(Body::from_stream(hang(Vec::new(), hung_up))),
        Reply::Gated {
            content,
            pieces: count,
            gate,
        } => {
            let size = content.chars().count().div_ceil(count.max(1)).max(1);
            let mut parts: Vec<(bool, Bytes)> = pieces(&content, size)
                .iter()
                .enumerate()
                .map(|(n, p)| (n > 0, chunk(p)))
                .collect();
            parts.extend(finish().into_iter().map(|b| (false, b)));
            let stream = futures_util::stream::iter(parts).then(move |(gated, part)| {
                let gate = Arc::clone(&gate);
                async move {
                    if gated {
                        gate.acquire().await.expect("the gate").forget();
                    }
                    Ok::<_, std::io::Error>(part)
                }
            });
            sse(Body::from_stream(stream))
        }
        Reply::Cut { content, gate } => {
            let parts: Vec<Item> = pieces(&content, 7).iter().map(|p| Ok(chunk(p))).collect();
            let cut = futures_util::stream::once(async move {
                gate.acquire().await.expect("the gate").forget();
                Err(std::io::Error::other("the fake drops the connection"))
            });
            sse(Body::from_stream(
                futures_util::stream::iter(parts).chain(cut),
            ))
        }
        Reply::StreamThenHang(content) => {
            let parts = pieces(&content, 7).iter().map(|p| chunk(p)).collect();
            sse(Body::from_stream(hang(parts, hung_up)))
        }
    }
}

/// `parts`, then nothing until the caller hangs up (which `hung_up` tells).
fn hang(
    parts: Vec<Bytes>,
    hung_up: Arc<tokio::sync::Notify>,
) -> impl futures_util::Stream<Item = Result<Bytes, std::io::Error>> {
    let guard = HangUp(hung_up);
    let never = futures_util::stream::once(async move {
        let _guard = guard;
        std::future::pending::<()>().await;
        Ok::<Bytes, std::io::Error>(Bytes::new())
    });
    futures_util::stream::iter(parts.into_iter().map(Ok)).chain(never)
}

/// Accepts TCP connections and completes their TLS handshake; a client
/// that refuses the certificate is dropped and the next one awaited.
struct TlsListener {
    tcp: tokio::net::TcpListener,
    acceptor: tokio_rustls::TlsAcceptor,
}

/// Longest a handshake may take before the connection is dropped.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

impl axum::serve::Listener for TlsListener {
    type Io = tokio_rustls::server::TlsStream<tokio::net::TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            let Ok((tcp, addr)) = self.tcp.accept().await else {
                continue;
            };
            let handshake = self.acceptor.accept(tcp);
            if let Ok(Ok(tls)) = tokio::time::timeout(HANDSHAKE_TIMEOUT, handshake).await {
                return (tls, addr);
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.tcp.local_addr()
    }
}
