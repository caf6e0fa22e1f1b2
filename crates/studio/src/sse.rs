//! Server-sent events as the Studio streams them: each event encoded once,
//! into one buffer of its final size, and the response around a stream
//! of them.
//!
//! Why not axum's `Sse`: its events grow their buffer field by field, so
//! a frame of a few kilobytes was reallocated and copied several times on
//! its way out (about 2.5% of a conversation's instructions). The bytes
//! on the wire are the same as axum's: `id: N`, a `data:` line per line
//! of data, a blank line; `: ka` and a blank line for a heartbeat.
//!
//! Owns: the framing of events, the response's headers, the keep-alive
//! of a stream that has none of its own, and the count of open Studio
//! streams. Must never: let a
//! line break inside data end the event early (each line of data is a
//! `data:` field of its own, as the format wants).

use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE};
use axum::response::{IntoResponse, Response};
use futures_util::{Stream, StreamExt};

/// Counts an open Studio SSE response while the guard lives.
pub(super) fn open_sse() -> ledgerwire_foundations::telemetry::Open {
    ledgerwire_foundations::telemetry::Open::new(metrics::gauge!(
        ledgerwire_foundations::telemetry::STUDIO_SSE_OPEN
    ))
}

/// One event, encoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SseEvent(Bytes);

/// Room for `id: `, a seq, `data: ` and the line ends around a frame.
const FRAME_FRAMING_BYTES: usize = 40;

impl SseEvent {
    /// A frame: its seq as the event id, its JSON as the data.
    pub fn frame(seq: u64, json: &str) -> Self {
        let mut out = Vec::with_capacity(json.len() + FRAME_FRAMING_BYTES);
        out.extend_from_slice(b"id: ");
        push_decimal(&mut out, seq);
        out.push(b'\n');
        push_data(&mut out, json.as_bytes());
        out.push(b'\n');
        Self(Bytes::from(out))
    }

    /// A comment (`: text`), which clients skip: a heartbeat.
    pub fn comment(text: &str) -> Self {
        let mut out = Vec::with_capacity(text.len() + 4);
        out.extend_from_slice(b": ");
        // A line break would end the comment; none is written.
        out.extend(text.bytes().filter(|b| *b != b'\n' && *b != b'\r'));
        out.extend_from_slice(b"\n\n");
        Self(Bytes::from(out))
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }
}

/// `value` in decimal digits (no formatting machinery: one per frame).
fn push_decimal(out: &mut Vec<u8>, value: u64) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    let mut rest = value;
    loop {
        at -= 1;
        digits[at] = b'0' + (rest % 10) as u8;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[at..]);
}

/// `data: ` and `data`, each line of it a field of its own.
fn push_data(out: &mut Vec<u8>, data: &[u8]) {
    out.extend_from_slice(b"data: ");
    let mut start = 0;
    for at in memchr::memchr2_iter(b'\n', b'\r', data) {
        out.extend_from_slice(&data[start..=at]);
        out.extend_from_slice(b"data: ");
        start = at + 1;
    }
    out.extend_from_slice(&data[start..]);
    out.push(b'\n');
}

/// The `text/event-stream` response streaming `events`; with
/// `keep_alive`, a comment of that text whenever the stream has been
/// quiet for that long.
pub fn response(
    events: impl Stream<Item = SseEvent> + Send + 'static,
    keep_alive: Option<(Duration, &'static str)>,
) -> Response {
    let body = match keep_alive {
        None => Body::from_stream(events.map(Ok::<_, std::convert::Infallible>)),
        Some((quiet, text)) => Body::from_stream(
            with_keep_alive(events, quiet, text).map(Ok::<_, std::convert::Infallible>),
        ),
    };
    (
        [
            (CONTENT_TYPE, "text/event-stream"),
            (CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
        .into_response()
}

/// `events`, and a comment of `text` after every `quiet` without one.
fn with_keep_alive(
    events: impl Stream<Item = SseEvent> + Send + 'static,
    quiet: Duration,
    text: &'static str,
) -> impl Stream<Item = SseEvent> + Send + 'static {
    async_stream::stream! {
        let mut events = Box::pin(events);
        loop {
            match tokio::time::timeout(quiet, events.next()).await {
                Ok(Some(event)) => yield event,
                Ok(None) => return,
                Err(_) => yield SseEvent::comment(text),
            }
        }
    }
}

impl From<SseEvent> for Bytes {
    fn from(event: SseEvent) -> Self {
        event.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bytes axum's `Sse` writes for `events`.
    async fn axum_bytes(events: Vec<axum::response::sse::Event>) -> Bytes {
        let stream =
            futures_util::stream::iter(events.into_iter().map(Ok::<_, std::convert::Infallible>));
        let response = axum::response::sse::Sse::new(stream).into_response();
        axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .expect("a body")
    }

    /// The same bytes as axum's own events, and the same headers.
    #[tokio::test]
    async fn the_bytes_are_axums() {
        use axum::response::sse::Event;
        let json = r#"{"event":"done","seq":7}"#;
        let axum = axum_bytes(vec![
            Event::default().id("7").data(json),
            Event::default().data("a\nb\rc"),
            Event::default().comment("ka"),
        ])
        .await;
        let mut ours = SseEvent::frame(7, json).as_bytes().to_vec();
        // Data alone (no id), as axum writes it.
        push_data(&mut ours, b"a\nb\rc");
        ours.push(b'\n');
        ours.extend_from_slice(SseEvent::comment("ka").as_bytes());
        assert_eq!(
            String::from_utf8_lossy(&ours),
            String::from_utf8_lossy(&axum)
        );
        let headers = response(futures_util::stream::empty(), None);
        let axum_headers = axum::response::sse::Sse::new(futures_util::stream::empty::<
            Result<Event, std::convert::Infallible>,
        >())
        .into_response();
        for name in [CONTENT_TYPE, CACHE_CONTROL] {
            assert_eq!(
                headers.headers().get(&name),
                axum_headers.headers().get(&name)
            );
        }
    }

    #[test]
    fn events_are_framed_as_axum_frames_them() {
        let frame = SseEvent::frame(7, r#"{"event":"done","seq":7}"#);
        assert_eq!(
            frame.as_bytes(),
            b"id: 7\ndata: {\"event\":\"done\",\"seq\":7}\n\n"
        );
        // Each line of data is a field of its own.
        assert_eq!(
            SseEvent::frame(1, "a\nb\rc").as_bytes(),
            b"id: 1\ndata: a\ndata: b\rdata: c\n\n"
        );
        assert_eq!(SseEvent::comment("ka").as_bytes(), b": ka\n\n");
        for seq in [0, 9, 10, 4_096, u64::MAX] {
            let event = SseEvent::frame(seq, "{}");
            assert_eq!(
                event.as_bytes(),
                format!("id: {seq}\ndata: {{}}\n\n").as_bytes()
            );
        }
        assert_eq!(SseEvent::comment("k\na").as_bytes(), b": ka\n\n");
    }

    #[tokio::test]
    async fn a_quiet_stream_gets_a_comment_and_ends_when_its_events_end() {
        let (sender, receiver) = tokio::sync::mpsc::channel(4);
        let events = tokio_stream_of(receiver);
        let quiet = Duration::from_millis(20);
        let mut stream = Box::pin(with_keep_alive(events, quiet, "ka"));
        sender.send(SseEvent::frame(1, "{}")).await.expect("send");
        assert_eq!(stream.next().await, Some(SseEvent::frame(1, "{}")));
        // Nothing is sent: after `quiet`, the comment.
        let waited = std::time::Instant::now();
        assert_eq!(stream.next().await, Some(SseEvent::comment("ka")));
        assert!(waited.elapsed() >= quiet);
        sender.send(SseEvent::frame(2, "{}")).await.expect("send");
        assert_eq!(stream.next().await, Some(SseEvent::frame(2, "{}")));
        drop(sender);
        assert_eq!(stream.next().await, None);
    }

    fn tokio_stream_of(
        mut receiver: tokio::sync::mpsc::Receiver<SseEvent>,
    ) -> impl Stream<Item = SseEvent> + Send + 'static {
        async_stream::stream! {
            while let Some(event) = receiver.recv().await {
                yield event;
            }
        }
    }
}
