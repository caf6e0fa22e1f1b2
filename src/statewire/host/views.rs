//! Views: the documents each attach should see, and flushing their
//! diffs.

use super::*;

impl Host {
    /// The documents `attach` should see now.
    pub(super) fn view(
        &self,
        attach: &Attach,
        state: &AttachState,
        documents: &DocumentsState,
    ) -> View {
        let mut view = View::new();
        for p in &attach.selection.protocols {
            match p.record {
                Record::Durable => {
                    let value = documents
                        .documents
                        .get(&(p.name.to_string(), None))
                        .map(|j| j.0.clone())
                        .or_else(|| {
                            self.inner
                                .protocols
                                .get(&p.name)
                                .map(|info| info.initial_main.clone())
                        });
                    if let Some(value) = value {
                        view.insert(DocIdentity::main(p.name.clone()), Arc::new(value));
                    }
                }
                Record::Ephemeral => {
                    for (id, value) in state
                        .ephemeral
                        .iter()
                        .filter(|(id, _)| id.protocol == p.name)
                    {
                        view.insert(id.clone(), Arc::new(value.clone()));
                    }
                }
            }
        }
        for id in &state.included {
            if let Some(value) = documents
                .documents
                .get(&(id.protocol.to_string(), id.key.clone()))
            {
                view.insert(id.clone(), Arc::new(value.0.clone()));
            }
        }
        view
    }

    /// Sends `attach` its view diff, then `answers`, in one packet.
    pub(super) fn flush_attach(&self, attach: &Arc<Attach>, answers: Vec<Answer>, dur: Vec<Dur>) {
        let documents = match self.inner.documents.state(&attach.thread.documents) {
            Ok(documents) => documents,
            Err(error) => {
                self.end(attach, server_fin(error));
                return;
            }
        };
        self.flush_with(attach, &documents.state, answers, dur);
    }

    pub(super) fn flush_with(
        &self,
        attach: &Arc<Attach>,
        documents: &DocumentsState,
        ans: Vec<Answer>,
        dur: Vec<Dur>,
    ) {
        let mut state = lock(&attach.state);
        let view = self.view(attach, &state, documents);
        let ops = state.table.update(&view);
        let packet = Packet {
            ops,
            ans,
            dur,
            ..Packet::default()
        };
        // Sent under the state lock so packets leave in table order.
        self.send(attach, packet);
    }

    /// Flushes every attach of the thread (after a document commit) but
    /// `except`, which its caller flushes with its answers.
    pub(super) fn flush_thread(
        &self,
        thread: &Arc<Thread>,
        except: Option<u64>,
    ) -> Result<(), HostError> {
        let documents = self.inner.documents.state(&thread.documents)?;
        let attaches: Vec<Arc<Attach>> = lock(&thread.attaches)
            .values()
            .filter(|a| Some(a.id) != except)
            .cloned()
            .collect();
        for attach in attaches {
            self.flush_with(&attach, &documents.state, Vec::new(), Vec::new());
        }
        Ok(())
    }
}
