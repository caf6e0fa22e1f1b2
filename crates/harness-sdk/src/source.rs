//! Where `harness-sdk` documents come from: the Studio conversation a
//! thread names, folded by [`ThreadFold`], with the documents built from
//! that fold and cached while they stay the same.
//!
//! Owns: the thread fold cache, older turns' transcripts (folded again
//! from their records on demand), and built documents keyed by the
//! position of the last record that changed them.
//! Must never: keep a document that the fold would not produce now, or
//! hold more than the bounds below.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use async_trait::async_trait;
use serde_json::Value;

use ledgerwire_ledger::{FoldCache, Folded, Ledger, StreamKey};
use ledgerwire_statewire::ThreadScope;
use ledgerwire_statewire::host::{AttachDocuments, DocumentSource, SourceSnapshot};
use ledgerwire_studio::auth::Principal;
use ledgerwire_studio::records::conversation_stream;
use ledgerwire_wire::ids::ConversationId;

use super::INTEREST;
use super::documents::{MESSAGE_NAMESPACE, main_document, message_document};
use super::interest::Interest;
use super::transcript::{Message, ThreadFold, ThreadState, TurnTranscript};

/// Threads whose folded state stays in memory.
pub const CACHED_THREADS: usize = 1024;
/// Older turns' transcripts kept in memory, across threads.
pub const CACHED_OLD_TURNS: usize = 256;
/// Built message documents kept per thread before the cache starts over.
pub const CACHED_DOCUMENTS_PER_THREAD: usize = 1024;

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

/// The conversation stream of a thread: `studio/<principal>/<thread id>`.
pub fn thread_stream(thread: &ThreadScope) -> Result<StreamKey, String> {
    let principal = thread
        .principal()
        .ok_or("harness-sdk threads belong to an authenticated principal")?;
    let conversation = ConversationId::new(thread.id().as_str()).map_err(|e| e.to_string())?;
    conversation_stream(&Principal::from_digest(principal.as_str()), &conversation)
        .map_err(|e| e.to_string())
}

/// Documents built for one thread.
#[derive(Default)]
struct Built {
    main: Option<(u64, Arc<Value>)>,
    messages: HashMap<String, (u64, Arc<Value>)>,
}

struct Shared {
    ledger: Ledger,
    folds: FoldCache<ThreadFold>,
    old_turns: Mutex<OldTurns>,
    built: Mutex<HashMap<StreamKey, Built>>,
}

/// Older turns' transcripts, least recently used first out.
#[derive(Default)]
struct OldTurns {
    turns: HashMap<(StreamKey, u32), Arc<TurnTranscript>>,
    order: VecDeque<(StreamKey, u32)>,
}

/// The `harness-sdk` document source.
#[derive(Clone)]
pub struct HarnessSource {
    shared: Arc<Shared>,
}

impl HarnessSource {
    pub fn new(ledger: Ledger) -> Self {
        let folds = FoldCache::with_limits(
            ledger.clone(),
            ledgerwire_ledger::fold_cache::SNAPSHOT_INTERVAL_RECORDS,
            CACHED_THREADS,
        );
        Self {
            shared: Arc::new(Shared {
                ledger,
                folds,
                old_turns: Mutex::new(OldTurns::default()),
                built: Mutex::new(HashMap::new()),
            }),
        }
    }
}

#[async_trait]
impl DocumentSource for HarnessSource {
    fn stream(&self, thread: &ThreadScope) -> Result<StreamKey, String> {
        thread_stream(thread)
    }

    async fn snapshot(&self, thread: &ThreadScope) -> Result<Arc<dyn SourceSnapshot>, String> {
        let stream = thread_stream(thread)?;
        let folded = self
            .shared
            .folds
            .state(&stream)
            .await
            .map_err(|e| e.to_string())?;
        let conversation_id = thread.id().to_string();
        let main = {
            let mut built = lock(&self.shared.built);
            if built.len() >= CACHED_THREADS && !built.contains_key(&stream) {
                built.clear();
            }
            let entry = built.entry(stream.clone()).or_default();
            match &entry.main {
                Some((position, main)) if *position == folded.position => main.clone(),
                _ => {
                    let main = Arc::new(main_document(&conversation_id, &folded.state));
                    entry.main = Some((folded.position, main.clone()));
                    main
                }
            }
        };
        Ok(Arc::new(Snapshot {
            shared: self.shared.clone(),
            stream,
            conversation_id,
            thread: folded,
            main,
            default_view: OnceLock::new(),
            read_turns: Mutex::new(HashMap::new()),
        }))
    }

    fn release(&self, thread: &ThreadScope) {
        let Ok(stream) = thread_stream(thread) else {
            return;
        };
        lock(&self.shared.built).remove(&stream);
        let mut old = lock(&self.shared.old_turns);
        old.turns.retain(|(s, _), _| *s != stream);
        old.order.retain(|(s, _)| *s != stream);
    }
}

/// One flush's reading of a thread.
struct Snapshot {
    shared: Arc<Shared>,
    stream: StreamKey,
    conversation_id: String,
    thread: Arc<Folded<ThreadState>>,
    main: Arc<Value>,
    /// What an attach without an interest document sees.
    default_view: OnceLock<Vec<(Vec<String>, Arc<Value>)>>,
    /// Older turns' transcripts this flush read (`read_wanted`), which
    /// `keyed` finds even if the shared cache let them go meanwhile.
    read_turns: Mutex<HashMap<u32, Arc<TurnTranscript>>>,
}

#[async_trait]
impl SourceSnapshot for Snapshot {
    fn main(&self) -> Arc<Value> {
        self.main.clone()
    }

    /// The older turns this attach's interest picks that neither this
    /// snapshot nor the shared cache holds.
    fn wanted(&self, attach: &AttachDocuments<'_>) -> Vec<u64> {
        let interest = Interest::of(attach.main(INTEREST));
        let current = self.thread.state.current.as_ref().map(|t| t.turn);
        let read = lock(&self.read_turns);
        let cached = lock(&self.shared.old_turns);
        let mut turns: Vec<u64> = interest
            .select(&self.thread.state)
            .into_iter()
            .map(|(turn, _)| turn)
            .filter(|turn| Some(*turn) != current)
            .filter(|turn| {
                !read.contains_key(turn)
                    && !cached.turns.contains_key(&(self.stream.clone(), *turn))
            })
            .map(u64::from)
            .collect();
        turns.sort_unstable();
        turns.dedup();
        turns
    }

    async fn read_wanted(&self, wanted: Vec<u64>) {
        for turn in wanted {
            let Ok(turn) = u32::try_from(turn) else {
                continue;
            };
            if let Some(transcript) = self.read_old_turn(turn).await {
                lock(&self.read_turns).insert(turn, transcript);
            }
        }
    }

    fn keyed(&self, attach: &AttachDocuments<'_>) -> Vec<(Vec<String>, Arc<Value>)> {
        match attach.main(INTEREST) {
            // Most attaches keep the default: chosen once per flush.
            None => self
                .default_view
                .get_or_init(|| self.select(&Interest::default()))
                .clone(),
            Some(interest) => self.select(&Interest::of(Some(interest))),
        }
    }
}

impl Snapshot {
    /// The documents `interest` picks, with their keys.
    fn select(&self, interest: &Interest) -> Vec<(Vec<String>, Arc<Value>)> {
        interest
            .select(&self.thread.state)
            .into_iter()
            .filter_map(|(turn, id)| {
                let document = self.message(turn, &id)?;
                let key = vec![
                    self.conversation_id.clone(),
                    MESSAGE_NAMESPACE.to_owned(),
                    id,
                ];
                Some((key, document))
            })
            .collect()
    }

    /// A message's document, built once per change of the message.
    fn message(&self, turn: u32, id: &str) -> Option<Arc<Value>> {
        let current = self
            .thread
            .state
            .current
            .as_ref()
            .filter(|t| t.turn == turn);
        let old;
        let transcript = match current {
            Some(current) => current,
            None => {
                old = self.old_turn(turn)?;
                &old
            }
        };
        let message = transcript.message(id)?;
        Some(self.built(message))
    }

    fn built(&self, message: &Message) -> Arc<Value> {
        let mut built = lock(&self.shared.built);
        let entry = built.entry(self.stream.clone()).or_default();
        if let Some((changed_at, document)) = entry.messages.get(&message.id)
            && *changed_at == message.changed_at
        {
            return document.clone();
        }
        if entry.messages.len() >= CACHED_DOCUMENTS_PER_THREAD {
            entry.messages.clear();
        }
        let document = Arc::new(message_document(message));
        entry
            .messages
            .insert(message.id.clone(), (message.changed_at, document.clone()));
        document
    }

    /// An older turn's transcript, if this flush read it or the shared
    /// cache holds it; `read_wanted` has read every one an attach's
    /// interest picked when the flush began.
    fn old_turn(&self, turn: u32) -> Option<Arc<TurnTranscript>> {
        if let Some(found) = lock(&self.read_turns).get(&turn) {
            return Some(found.clone());
        }
        let found = lock(&self.shared.old_turns)
            .turns
            .get(&(self.stream.clone(), turn))
            .cloned();
        if found.is_none() {
            // An interest that changed after the flush began: the flush
            // its change makes reads the turn.
            tracing::debug!(stream = %self.stream, turn, "an older turn was not read for this flush");
        }
        found
    }

    /// An older turn's transcript, folded from its records once and kept
    /// in the shared cache.
    async fn read_old_turn(&self, turn: u32) -> Option<Arc<TurnTranscript>> {
        let key = (self.stream.clone(), turn);
        if let Some(found) = lock(&self.shared.old_turns).turns.get(&key) {
            return Some(found.clone());
        }
        let turns = &self.thread.state.conversation.turns;
        let index = usize::try_from(turn).ok()?.checked_sub(1)?;
        let from = turns.get(index)?.first_position;
        // An older turn ends where the next one starts.
        let until = turns.get(index + 1)?.first_position;
        let mut records = Vec::new();
        let mut next = from;
        while next < until {
            let page = self
                .shared
                .ledger
                .read_page(&self.stream, next, ledgerwire_ledger::READ_PAGE_RECORDS)
                .await
                .ok()?;
            let Some(last) = page.last() else {
                break;
            };
            next = last.position() + 1;
            records.extend(
                page.into_iter()
                    .take_while(|record| record.position() < until),
            );
        }
        let transcript = match TurnTranscript::from_records(turn, records) {
            Ok(transcript) => Arc::new(transcript),
            Err(error) => {
                tracing::error!(stream = %self.stream, turn, %error, "an older turn does not fold");
                return None;
            }
        };
        let mut old = lock(&self.shared.old_turns);
        while old.turns.len() >= CACHED_OLD_TURNS {
            let Some(oldest) = old.order.pop_front() else {
                break;
            };
            old.turns.remove(&oldest);
        }
        old.order.push_back(key.clone());
        old.turns.insert(key, transcript.clone());
        Some(transcript)
    }
}
