//! Statewire: the conformance vectors through the header and patch
//! parsers, the HTTP and WebSocket transports against a real server, the
//! exactly-once lanes across client reconnects and server SIGKILLs, and
//! the fixtures.

mod adapters;
mod conformance;
mod derived;
mod fixtures;
mod http;
mod lanes;
mod older;
mod restart;
mod ws;

use std::net::SocketAddr;
use std::time::Duration;

use futures_util::StreamExt;
use ledgerwire::statewire::packet::Packet;
use ledgerwire::statewire::version::Version;
use ledgerwire::statewire_client::{ClientConfig, Connection, ProtocolOfferConfig};

/// Longest wait for any one expected packet.
pub const PACKET_TIMEOUT: Duration = Duration::from_secs(20);

pub fn v(text: &str) -> Version {
    Version::parse(text).expect("version")
}

pub const WIRE: &str = r#""2026-11-02"; min-version="2026-09-30""#;
pub const CHAT: &str = r#"acme-chat; version="2026-09-13""#;
/// The credentials the Statewire tests attach with (any token passes a
/// server without `STUDIO_API_TOKEN`; it names the principal).
pub const AUTHORIZATION: &str = "Bearer statewire-tests";

/// The thread `id` as the server keeps it: under the tests' principal.
pub fn scope(id: &str) -> ledgerwire::statewire::ThreadScope {
    let token = AUTHORIZATION.trim_start_matches("Bearer ");
    let principal = ledgerwire::studio::auth::Principal::of_token(token);
    ledgerwire::statewire::ThreadScope::new(
        Some(ledgerwire::statewire::PrincipalId::new(principal.as_str()).expect("principal")),
        ledgerwire::statewire::ThreadId::new(id).expect("thread id"),
    )
}

/// A GET `/threads/<thread>/stream` attach with `authorization`, offering
/// the wire range [`WIRE`] and `protocol`, attacher `tab`.
pub async fn http_attach(
    addr: SocketAddr,
    thread: &str,
    authorization: &str,
    protocol: &str,
) -> reqwest::Response {
    reqwest::Client::new()
        .get(format!("http://{addr}/threads/{thread}/stream"))
        .header("Authorization", authorization)
        .header("Statewire-Version", WIRE)
        .header("Statewire-Protocol", protocol)
        .header("Statewire-Attacher", "tab")
        .send()
        .await
        .expect("request")
}

/// A WebSocket client's socket.
pub type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// Opens `/threads/<thread>/ws?client=<client>` with subprotocol
/// `statewire.v1` and these handshake headers.
pub async fn ws_connect(
    addr: SocketAddr,
    thread: &str,
    client: &str,
    handshake: &[(&'static str, &str)],
) -> Socket {
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    use tokio_tungstenite::tungstenite::http::HeaderValue;
    let mut request = format!("ws://{addr}/threads/{thread}/ws?client={client}")
        .into_client_request()
        .expect("request");
    let headers = request.headers_mut();
    headers.insert(
        "Sec-WebSocket-Protocol",
        HeaderValue::from_static("statewire.v1"),
    );
    for (name, value) in handshake {
        headers.append(*name, HeaderValue::from_str(value).expect("header value"));
    }
    tokio_tungstenite::connect_async(request)
        .await
        .expect("connect")
        .0
}

/// The next text message of a socket, as JSON.
pub async fn next_text(socket: &mut Socket) -> serde_json::Value {
    use tokio_tungstenite::tungstenite::Message;
    loop {
        let message = tokio::time::timeout(PACKET_TIMEOUT, socket.next())
            .await
            .expect("a message in time")
            .expect("open")
            .expect("message");
        if let Message::Text(text) = message {
            return serde_json::from_str(text.as_str()).expect("JSON text");
        }
    }
}

/// An in-process attach of thread `th` through the host API, offering
/// exactly `version` of `protocol`, as `client` (and its attacher).
pub async fn host_attach(
    host: &ledgerwire::statewire::host::Host,
    protocol: &str,
    version: &str,
    client: &str,
) -> ledgerwire::statewire::host::AttachHandle {
    host.attach(ledgerwire::statewire::host::AttachRequest {
        thread: "th".into(),
        client: Some(client.into()),
        version: Some("\"2026-11-02\"".into()),
        protocol: Some(format!("{protocol}; version=\"{version}\"")),
        attacher: Some(client.into()),
        ..Default::default()
    })
    .await
    .expect("attach")
}

/// The next packet of an in-process attach.
pub async fn host_packet(handle: &mut ledgerwire::statewire::host::AttachHandle) -> Packet {
    tokio::time::timeout(PACKET_TIMEOUT, handle.next())
        .await
        .expect("a packet in time")
        .expect("the attach is open")
        .packet()
}

/// Reads SSE `data:` events as packets (through `eventsource-stream`;
/// keep-alive comments are skipped).
pub struct Sse {
    events: std::pin::Pin<
        Box<
            dyn futures_util::Stream<
                    Item = Result<
                        eventsource_stream::Event,
                        eventsource_stream::EventStreamError<reqwest::Error>,
                    >,
                > + Send,
        >,
    >,
}

impl Sse {
    pub fn new(response: reqwest::Response) -> Self {
        use eventsource_stream::Eventsource;
        Self {
            events: Box::pin(response.bytes_stream().eventsource()),
        }
    }

    /// The next packet, or `None` when the stream ends.
    pub async fn next(&mut self) -> Option<Packet> {
        let event = tokio::time::timeout(PACKET_TIMEOUT, self.events.next())
            .await
            .expect("SSE packet in time")?
            .expect("SSE event");
        Some(serde_json::from_str(&event.data).expect("packet JSON"))
    }

    /// Reads packets until one satisfies `pick`.
    pub async fn until(&mut self, mut pick: impl FnMut(&Packet) -> bool) -> Packet {
        loop {
            let packet = self.next().await.expect("stream ended early");
            if pick(&packet) {
                return packet;
            }
        }
    }
}

/// A client config for `acme-chat` (required) on `thread`.
pub fn chat_client(addr: SocketAddr, thread: &str) -> ClientConfig {
    ClientConfig {
        url: format!("ws://{addr}/threads/{thread}/ws"),
        wire: (v("2026-09-30"), v("2026-11-02")),
        protocols: Some(vec![ProtocolOfferConfig {
            name: "acme-chat".into(),
            range: (v("2026-09-01"), v("2026-09-13")),
            optional: false,
        }]),
        attacher: Some("tab-1".into()),
        authorization: Some(AUTHORIZATION.into()),
        retry_for: Duration::from_millis(0),
    }
}

/// Invokes a command and waits for its answer.
pub async fn call(
    client: &mut Connection,
    protocol: &str,
    method: &str,
    params: Vec<serde_json::Value>,
) -> ledgerwire::statewire::packet::Answer {
    let seq = client
        .invoke(protocol, method, params)
        .await
        .expect("the command is sent");
    client
        .answer(protocol, seq, PACKET_TIMEOUT)
        .await
        .expect("an answer")
}
