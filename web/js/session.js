// session.js — one conversation of the page, run by the package's
// `/studio` client (@ledgerwire/client): the Conversation posts the
// questions and answers, reads the streams, reconnects, re-posts a dead
// segment's answer and restores from the log; this module shows what it
// reports in the transcript and the canvas.
// Owns: mapping the Conversation's events (turns, segments, frames,
// notes, notices) onto the ChatView, the busy flag of the composer, and
// the buttons a notice offers. Must never: talk to the server itself, or
// show an event of another conversation (each Session has its own
// Conversation, disposed with it).

import { StudioError, unreachable } from '@ledgerwire/client/studio';

const isAbort = (error) => error?.name === 'AbortError';

export class Session {
  /**
   * `studio`: the StudioClient; `chat`: the ChatView; `canvas`: the
   * Canvas; `onBusy(busy)`: a call started or ended; `announce(text)`: a
   * line for the status region.
   */
  constructor({ studio, conversationId, chat, canvas, onBusy, announce }) {
    this.conversation = studio.conversation(conversationId);
    this.conversationId = conversationId;
    this.chat = chat;
    this.canvas = canvas;
    this.onBusy = onBusy;
    this.announce = announce;
    canvas.attach(this.conversation);
    this.conversation.on((event) => this.show(event));
  }

  get busy() {
    return this.conversation.busy;
  }

  dispose() {
    this.conversation.dispose();
  }

  /** One event of the Conversation, into the transcript. */
  show(event) {
    const chat = this.chat;
    chat.replaying = Boolean(event.replay);
    try {
      switch (event.type) {
        case 'turn': chat.userTurn(event.request?.message ?? '', event.request); break;
        case 'segment': chat.segmentStarted(); break;
        case 'frame': chat.frame(event.frame, { receivedAt: event.receivedAt }); break;
        case 'answered': if (event.replay) chat.answered(event.response); break;
        case 'note': chat.status(event.text); break;
        case 'notice': this.notice(event); break;
        case 'restored':
          if (!event.complete) chat.notice({ code: 'transient_unavailable', retry: 'do_not_retry', detail: 'This conversation is longer than the page reads back; its oldest part is shown.' });
          this.canvas.setManifest(this.conversation.getSnapshot().canvas, { force: true });
          this.canvas.render();
          chat.scrolled();
          break;
        default: break;
      }
    } finally {
      chat.replaying = false;
    }
  }

  /** A notice: a refusal, an unreachable server, a turn that cannot resume. */
  notice({ kind, error, request }) {
    const chat = this.chat;
    const again = () => this.ask(this.conversation.request?.message ?? '', {
      componentRef: this.conversation.request?.component_ref, autoAdd: this.conversation.request?.auto_add,
    });
    switch (kind) {
      case 'refused':
        if (request?.kind === 'interrupt.response') chat.pauseRefused(request.interrupt_id);
        if (error.code === 'unauthorized') this.announce('The server refused the token: enter the right one above.');
        chat.notice(error, { onRetry: () => (request?.kind === 'interrupt.response' ? this.respond(request) : again()) });
        break;
      case 'unreachable':
        chat.notice(error, { onRetry: again });
        break;
      case 'lost':
        chat.notice({ code: 'transient_unavailable', retry: 'do_not_retry', detail: 'This answer stopped before it finished (its connection was lost while the question was being read), and nothing can resume it.' });
        chat.status('', 'failed');
        if (request?.message) {
          chat.notice({ code: 'transient_unavailable', retry: 'retry_after_delay', retry_after_seconds: 0, detail: 'Ask the question again to start over.' }, { onRetry: again });
        }
        break;
      case 'gave-up':
        chat.status('');
        chat.notice(error, { onRetry: () => this.run(() => this.conversation.resume()) });
        break;
      case 'restore':
        chat.notice(error, { onRefresh: () => chat.actions.refresh() });
        break;
      default:
        chat.notice(error);
    }
  }

  /** Runs one call of the Conversation with the busy flag shown. */
  async run(call) {
    this.onBusy(true);
    try {
      const outcome = await call();
      if (outcome === 'stopped' && this.chat.current?.el.dataset.state !== 'stopped') this.chat.status('Stopped.', 'stopped');
      return outcome;
    } catch (error) {
      if (!isAbort(error)) this.chat.notice(unreachable(`The answer could not be read: ${error?.message ?? error}.`));
      return 'failed';
    } finally {
      this.onBusy(false);
    }
  }

  /** Asks `message` as a new turn. */
  async ask(message, { componentRef, autoAdd = true } = {}) {
    if (this.busy) {
      this.announce('Wait for this answer to finish, or stop it.');
      return false;
    }
    const body = { message, auto_add: autoAdd !== false };
    if (componentRef) body.component_ref = componentRef;
    await this.run(() => this.conversation.ask(body));
    return true;
  }

  /** Answers the open pause with `body` (an interrupt.response). */
  async respond(body) {
    if (this.busy) {
      this.announce('Wait for this answer to finish, or stop it.');
      this.chat.pauseRefused(body.interrupt_id);
      return;
    }
    const { kind: _kind, conversation_id: _id, ...response } = body;
    await this.run(() => this.conversation.respond(response));
  }

  /** The Stop button. */
  async cancel() {
    this.chat.status('Stopping…');
    try {
      await this.conversation.stop();
    } catch (error) {
      if (isAbort(error)) return;
      if (error instanceof StudioError && error.failure.status !== 0) this.chat.notice(error.failure);
      else this.announce('The stop request did not reach the server; press Stop again.');
    }
  }

  /**
   * Reads the conversation back from the log and follows its latest turn
   * if it is still streaming: `new`, `restored` or `failed`.
   */
  async restore() {
    this.onBusy(true);
    try {
      return await this.conversation.restore();
    } catch (error) {
      if (!isAbort(error)) this.chat.notice(unreachable(`The conversation could not be read: ${error?.message ?? error}.`));
      return 'failed';
    } finally {
      this.onBusy(false);
    }
  }
}
