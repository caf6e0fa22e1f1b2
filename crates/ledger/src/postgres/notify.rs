//! Tails across processes: the heads every instance learns of, fed by
//! its own appends at once and by the other instances' through one
//! LISTEN connection, with a catch-up read of the watched heads after
//! every (re)connection and every [`CATCH_UP_INTERVAL_MS`], so a
//! notification lost (a reconnection, a full queue) delays a tail by at
//! most that long.
//!
//! An instance sends one `pg_notify` per batch of heads it appended (the
//! heads gathered for [`NOTIFY_BATCH_WINDOW_MS`]), outside the append
//! transactions: a NOTIFY inside one would take PostgreSQL's global
//! notification lock at every commit and serialise them. An append only
//! adds its head to the batch; the notifier wakes once per batch.
//!
//! Owns: the LISTEN connection, the NOTIFY batches and the head watchers.
//!
//! Must never: lower a head a watcher was sent, poll per tail, or let a
//! notification queue grow without a bound.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use deadpool_postgres::Pool;
use futures_util::future::poll_fn;
use tokio::sync::{Notify, mpsc, watch};
use tokio_postgres::{AsyncMessage, NoTls};

use super::Counters;
use super::error::Availability;
use crate::record::StreamKey;

/// The `application_name` of the LISTEN connection (operators tell it
/// from the pools' in `pg_stat_activity`).
pub const LISTENER_APPLICATION_NAME: &str = "ledgerwire-listen";

/// The channel heads are announced on (per database).
pub const NOTIFY_CHANNEL: &str = "ledgerwire_heads";

/// How long the notifier gathers heads before it sends them, in ms: what
/// a tail on another instance may wait beyond the commit, and what one
/// notification's cost (two backends and the listener woken) is spread
/// over.
pub const NOTIFY_BATCH_WINDOW_MS: u64 = 10;

/// Largest payload of one notification, in bytes (PostgreSQL refuses
/// 8000 and more).
pub const MAX_NOTIFY_PAYLOAD_BYTES: usize = 7_900;

/// Streams whose heads wait for the notifier, and notifications received
/// waiting for the listener; past these, new ones are dropped (the
/// catch-up read brings their heads).
pub const MAX_QUEUED_HEADS: usize = 65_536;

/// Interval of the catch-up read of watched heads, in ms.
pub const CATCH_UP_INTERVAL_MS: u64 = 1_000;

/// Pauses between attempts to reconnect the LISTEN connection, in ms.
pub const RECONNECT_MIN_MS: u64 = 50;
pub const RECONNECT_MAX_MS: u64 = 2_000;

/// Streams watched past which a new watch first drops the senders nobody
/// listens to any more.
pub const WATCHERS_PRUNE_AT: usize = 4096;

const WATCHED_HEADS: &str =
    "SELECT stream, head FROM ledgerwire_streams WHERE stream = ANY($1::text[])";

/// The heads this instance knows, by stream, and the batch of its own
/// appends' heads to announce.
#[derive(Default)]
pub(super) struct Heads {
    watchers: Mutex<HashMap<StreamKey, watch::Sender<u64>>>,
    /// The next batch: the highest head appended per stream.
    outgoing: Mutex<HashMap<StreamKey, u64>>,
    /// Signalled when `outgoing` gains its first head.
    batch_started: Notify,
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

impl Heads {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<StreamKey, watch::Sender<u64>>> {
        lock(&self.watchers)
    }

    /// A receiver of the stream's head. It starts at the highest head
    /// this instance knows (0 if none): a tail reads before it waits, so
    /// a low start only means the next raise wakes it.
    pub(super) fn watch(&self, stream: &StreamKey) -> watch::Receiver<u64> {
        let mut watchers = self.lock();
        if watchers.len() >= WATCHERS_PRUNE_AT {
            watchers.retain(|_, sender| sender.receiver_count() > 0);
        }
        watchers
            .entry(stream.clone())
            .or_insert_with(|| watch::channel(0).0)
            .subscribe()
    }

    /// Raises the stream's head to `head` if it is higher.
    pub(super) fn raise(&self, stream: &StreamKey, head: u64) {
        if let Some(sender) = self.lock().get(stream) {
            sender.send_if_modified(|known| {
                let higher = head > *known;
                if higher {
                    *known = head;
                }
                higher
            });
        }
    }

    /// This instance appended up to `head`: its tails wake now, the
    /// other instances' once the notification arrives.
    pub(super) fn appended(&self, stream: &StreamKey, head: u64) {
        self.raise(stream, head);
        let started = {
            let mut outgoing = lock(&self.outgoing);
            let (started, room) = (outgoing.is_empty(), outgoing.len() < MAX_QUEUED_HEADS);
            match outgoing.get_mut(stream) {
                Some(known) => *known = (*known).max(head),
                None if room => {
                    outgoing.insert(stream.clone(), head);
                }
                None => {}
            }
            started
        };
        if started {
            self.batch_started.notify_one();
        }
    }

    /// The batch gathered so far; the next append starts another.
    fn take_batch(&self) -> HashMap<StreamKey, u64> {
        std::mem::take(&mut *lock(&self.outgoing))
    }

    /// The streams some tail watches.
    fn watched(&self) -> Vec<String> {
        self.lock()
            .iter()
            .filter(|(_, sender)| sender.receiver_count() > 0)
            .map(|(stream, _)| stream.as_str().to_owned())
            .collect()
    }

    /// Applies a notification's payload: lines of `<head> <stream>`.
    fn apply(&self, payload: &str) {
        for line in payload.lines() {
            let Some((head, stream)) = line.split_once(' ') else {
                continue;
            };
            if let (Ok(head), Ok(stream)) = (head.parse::<u64>(), StreamKey::new(stream)) {
                self.raise(&stream, head);
            }
        }
    }
}

/// The payloads announcing `heads`, each under the size limit.
fn payloads(heads: &HashMap<StreamKey, u64>) -> Vec<String> {
    let mut payloads = Vec::new();
    let mut payload = String::new();
    for (stream, head) in heads {
        let line = format!("{head} {stream}");
        if !payload.is_empty() && payload.len() + 1 + line.len() > MAX_NOTIFY_PAYLOAD_BYTES {
            payloads.push(std::mem::take(&mut payload));
        }
        if !payload.is_empty() {
            payload.push('\n');
        }
        payload.push_str(&line);
    }
    if !payload.is_empty() {
        payloads.push(payload);
    }
    payloads
}

/// The notifier: from a batch's first head, waits the batch window, then
/// sends the batch, one `pg_notify` per payload, on the buffered pool. A
/// failed send is dropped: the catch-up read brings those heads. Runs
/// until the store aborts it.
pub(super) async fn send_batches(heads: Arc<Heads>, pool: Pool, counters: Arc<Counters>) {
    loop {
        heads.batch_started.notified().await;
        tokio::time::sleep(Duration::from_millis(NOTIFY_BATCH_WINDOW_MS)).await;
        let batch = heads.take_batch();
        for payload in payloads(&batch) {
            let sent = match pool.get().await {
                Ok(client) => client
                    .execute("SELECT pg_notify($1, $2)", &[&NOTIFY_CHANNEL, &payload])
                    .await
                    .map(drop)
                    .map_err(|error| error.to_string()),
                Err(error) => Err(error.to_string()),
            };
            match sent {
                Ok(()) => counters.bump(&counters.notifications_sent),
                Err(error) => tracing::debug!(%error, "a head notification was not sent"),
            }
        }
    }
}

/// The listener: one connection that LISTENs, reconnecting with a
/// bounded backoff, forever (the store aborts it when it closes).
pub(super) async fn listen(
    mut config: tokio_postgres::Config,
    heads: Arc<Heads>,
    availability: Arc<Availability>,
    counters: Arc<Counters>,
) {
    config.application_name(LISTENER_APPLICATION_NAME);
    let mut pause = Duration::from_millis(RECONNECT_MIN_MS);
    loop {
        match config.connect(NoTls).await {
            Ok((client, connection)) => {
                counters.bump(&counters.listener_connects);
                let lost = serve(client, connection, &heads, &availability, &counters).await;
                // Not an outage by itself: the next connection (after the
                // shortest pause) decides, and its catch-up covers the gap.
                tracing::debug!(%lost, "the notification connection to PostgreSQL ended; connecting again");
                pause = Duration::from_millis(RECONNECT_MIN_MS);
            }
            Err(error) => {
                availability.set_down(format!("cannot connect to PostgreSQL: {error}"));
            }
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(RECONNECT_MAX_MS));
    }
}

/// Serves one LISTEN connection until it fails; why it ended.
async fn serve<S, T>(
    client: tokio_postgres::Client,
    mut connection: tokio_postgres::Connection<S, T>,
    heads: &Heads,
    availability: &Availability,
    counters: &Counters,
) -> String
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (received, mut notes) = mpsc::channel::<String>(MAX_QUEUED_HEADS);
    // The connection is driven here: its notifications go to `notes`.
    let driver = tokio::spawn(async move {
        loop {
            match poll_fn(|cx| connection.poll_message(cx)).await {
                Some(Ok(AsyncMessage::Notification(note))) => {
                    let _ = received.try_send(note.payload().to_owned());
                }
                Some(Ok(_)) => {}
                Some(Err(error)) => return error.to_string(),
                None => return "the server closed it".to_owned(),
            }
        }
    });
    let ended = async {
        client
            .batch_execute(&format!("LISTEN {NOTIFY_CHANNEL}"))
            .await
            .map_err(|error| error.to_string())?;
        availability.up();
        let mut ticker = tokio::time::interval(Duration::from_millis(CATCH_UP_INTERVAL_MS));
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                note = notes.recv() => match note {
                    Some(payload) => {
                        counters.bump(&counters.notifications_received);
                        heads.apply(&payload);
                    }
                    None => return Err::<(), String>("the connection ended".to_owned()),
                },
                // The first tick is at once: the catch-up after connecting.
                _ = ticker.tick() => catch_up(&client, heads, counters).await?,
            }
        }
    };
    let reason = ended.await.err().unwrap_or_default();
    driver.abort();
    match driver.await {
        Ok(why) => why,
        Err(_) => reason,
    }
}

/// Reads the heads of every watched stream and raises them.
async fn catch_up(
    client: &tokio_postgres::Client,
    heads: &Heads,
    counters: &Counters,
) -> Result<(), String> {
    let watched = heads.watched();
    if watched.is_empty() {
        return Ok(());
    }
    counters.bump(&counters.catch_up_reads);
    let rows = client
        .query(WATCHED_HEADS, &[&watched])
        .await
        .map_err(|error| error.to_string())?;
    for row in rows {
        if let Ok(stream) = StreamKey::new(row.get::<_, String>(0)) {
            heads.raise(&stream, row.get::<_, i64>(1) as u64);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_batch_holds_each_streams_highest_head_and_wakes_the_notifier() {
        let heads = Heads::default();
        let (a, b) = (StreamKey::new("a").unwrap(), StreamKey::new("b").unwrap());
        for (stream, head) in [(&a, 3), (&b, 1), (&a, 5), (&a, 4)] {
            heads.appended(stream, head);
        }
        let woken = Duration::from_secs(10);
        tokio::time::timeout(woken, heads.batch_started.notified())
            .await
            .expect("the first head wakes the notifier");
        assert_eq!(heads.take_batch(), HashMap::from([(a.clone(), 5), (b, 1)]));
        assert!(heads.take_batch().is_empty());
        heads.appended(&a, 6);
        tokio::time::timeout(woken, heads.batch_started.notified())
            .await
            .expect("the next batch's first head wakes it again");
        assert_eq!(heads.take_batch(), HashMap::from([(a, 6)]));
    }

    #[test]
    fn payloads_stay_under_the_limit_and_round_trip() {
        let heads: HashMap<StreamKey, u64> = (0..100u64)
            .map(|n| {
                (
                    StreamKey::new(format!("{n}/{}", "x".repeat(200))).unwrap(),
                    n,
                )
            })
            .collect();
        let payloads = payloads(&heads);
        assert!(payloads.len() > 1);
        assert!(payloads.iter().all(|p| p.len() <= MAX_NOTIFY_PAYLOAD_BYTES));
        let store = Heads::default();
        let watched: Vec<_> = heads.keys().map(|stream| store.watch(stream)).collect();
        for payload in &payloads {
            store.apply(payload);
        }
        for (receiver, (_, head)) in watched.iter().zip(&heads) {
            assert_eq!(*receiver.borrow(), *head);
        }
    }
}
