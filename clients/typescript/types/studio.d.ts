/**
 * Resolves after `ms`, or rejects with an AbortError when `signal` aborts.
 * @param {number} ms
 * @param {AbortSignal} [signal]
 */
export function delay(ms: number, signal?: AbortSignal): Promise<any>;
/**
 * What an error's retry mode asks of the client, as data.
 * @param {StudioFailure} error
 * @returns {RetryAdvice}
 */
export function retryAdvice(error: StudioFailure): RetryAdvice;
export { transcript } from "./timeline.js";
/**
 * @typedef {import('./studio-wire.js').Frame} Frame
 * @typedef {import('./studio-wire.js').StudioRequest} StudioRequest
 * @typedef {import('./studio-wire.js').CompositionManifest} CompositionManifest
 * @typedef {import('./studio-wire.js').CompositionOp} CompositionOp
 * @typedef {import('./studio-wire.js').Answer} QuestionAnswer
 * @typedef {import('./http.js').StudioFailure} StudioFailure
 * @typedef {import('./http.js').TokenSource} TokenSource
 * @typedef {Extract<StudioRequest, {kind: 'turn.request'}>} TurnRequest
 * @typedef {Extract<StudioRequest, {kind: 'interrupt.response'}>} InterruptResponse
 * @typedef {Extract<Frame, {event: 'plan.proposed'}> | Extract<Frame, {event: 'elicitation.request'}>} PauseFrame
 * @typedef {'idle' | 'streaming' | 'paused' | 'reconnecting' | 'failed'} Status
 * @typedef {'done' | 'paused' | 'stopped' | 'failed' | 'refused' | 'gone'} Outcome
 *   how a call ended: the turn finished, paused on a question, was stopped
 *   by the user, ended on an error frame, was refused before streaming, or
 *   could not be followed (the server did not come back)
 * @typedef {{mode: StudioFailure['retry'], fix?: string, waitMs?: number}} RetryAdvice
 * @typedef {{
 *   conversationId: string,
 *   status: Status,
 *   pause: PauseFrame | null,
 *   canvas: CompositionManifest | null,
 *   error: StudioFailure | null,
 *   retry: RetryAdvice | null,
 *   stopped: boolean,
 *   lastSeq: number,
 *   note: string | null,
 *   busy: boolean,
 * }} ConversationState
 * @typedef {{type: 'frame', frame: Frame, receivedAt?: number, replay: boolean}
 *   | {type: 'turn', request: any, replay: boolean}
 *   | {type: 'segment', replay: boolean}
 *   | {type: 'answered', response: any, replay: boolean}
 *   | {type: 'note', text: string}
 *   | {type: 'notice', kind: 'refused' | 'unreachable' | 'lost' | 'gave-up' | 'restore', error: StudioFailure, request?: any}
 *   | {type: 'restored', complete: boolean}} ConversationEvent
 */
/** Reconnects to one turn's stream before giving up. */
export const MAX_RECONNECTS: 30;
/** Longest wait between two reconnects, in ms. */
export const MAX_BACKOFF_MS: 3000;
/** Times one turn's dead segment is resumed by re-posting its answer. */
export const MAX_RECOVERIES: 6;
/** Times one request waits out a live segment's lease (a 409 with `retry_after_seconds`). */
export const MAX_LEASE_WAITS: 20;
/** Longest single wait on a lease, in ms (a larger `retry_after_seconds` waits this long, then asks again). */
export const MAX_LEASE_WAIT_MS: 60000;
/** The entry point: one server, one token; conversations and the read routes. */
export class StudioClient {
    /**
     * @param {{baseUrl?: string, token: TokenSource, fetch?: typeof fetch, silenceMs?: number, waitOutBusy?: boolean}} options
     *   `silenceMs`: how long a stream may go without a byte (heartbeats
     *   come every 5 s) before it counts as dropped; `waitOutBusy`: wait out
     *   a 409 on a live segment by its `retry_after_seconds` (default true).
     */
    constructor({ baseUrl, token, fetch, silenceMs, waitOutBusy }: {
        baseUrl?: string;
        token: TokenSource;
        fetch?: typeof globalThis.fetch;
        silenceMs?: number;
        waitOutBusy?: boolean;
    });
    http: StudioHttp;
    silenceMs: number;
    waitOutBusy: boolean;
    /**
     * A client for conversation `conversationId` (mint one id per
     * conversation and keep it). Each call returns a new object: dispose
     * the one you leave.
     * @param {string} conversationId
     */
    conversation(conversationId: string): Conversation;
    /** @param {string} conversationId @param {{signal?: AbortSignal}} [options] */
    cancel(conversationId: string, options?: {
        signal?: AbortSignal;
    }): Promise<void>;
    /** @param {Parameters<StudioHttp['mutate']>[0]} body @param {{signal?: AbortSignal}} [options] */
    mutate(body: Parameters<StudioHttp["mutate"]>[0], options?: {
        signal?: AbortSignal;
    }): Promise<import("./studio-wire.js").CompositionManifest>;
    /** @param {string} conversationId @param {{signal?: AbortSignal}} [options] */
    composition(conversationId: string, options?: {
        signal?: AbortSignal;
    }): Promise<import("./studio-wire.js").CompositionManifest | null>;
    /** @param {string} conversationId @param {{raw?: boolean, signal?: AbortSignal}} [options] */
    timeline(conversationId: string, options?: {
        raw?: boolean;
        signal?: AbortSignal;
    }): Promise<{
        records: {
            position: number;
            timestamp_ms: number;
            kind: string;
            payload: any;
        }[];
        head: number;
        complete: boolean;
    }>;
    /** @param {string} conversationId @param {{signal?: AbortSignal}} [options] */
    check(conversationId: string, options?: {
        signal?: AbortSignal;
    }): Promise<any>;
}
export class Conversation {
    /**
     * @param {StudioClient} client
     * @param {string} conversationId
     */
    constructor(client: StudioClient, conversationId: string);
    client: StudioClient;
    http: StudioHttp;
    conversationId: string;
    /** @type {ConversationState} */
    state: ConversationState;
    /** @type {Set<() => void>} */
    subscribers: Set<() => void>;
    /** @type {Set<(event: ConversationEvent) => void>} */
    listeners: Set<(event: ConversationEvent) => void>;
    disposed: AbortController;
    busy: boolean;
    /** The turn.request of the latest turn. @type {any} */
    request: any;
    /** The interrupt.response that started the latest segment, if one did. @type {any} */
    answer: any;
    stopRequested: boolean;
    /** The latest pause delivered, restored when its answer is refused. @type {PauseFrame | null} */
    lastPause: PauseFrame | null;
    /** State listeners (`useSyncExternalStore`'s subscribe). @param {() => void} listener */
    subscribe(listener: () => void): () => void;
    /** The current state; a new object after every change. */
    getSnapshot(): ConversationState;
    /** Every event (frames, notes, notices). @param {(event: ConversationEvent) => void} listener */
    on(listener: (event: ConversationEvent) => void): () => void;
    /**
     * The live frames as an async iterator, in seq order, each once, until
     * `signal` aborts or the conversation is disposed.
     * @param {{signal?: AbortSignal}} [options]
     * @returns {AsyncGenerator<Frame>}
     */
    frames({ signal }?: {
        signal?: AbortSignal;
    }): AsyncGenerator<Frame>;
    /** @param {Partial<ConversationState>} patch */
    set(patch: Partial<ConversationState>): void;
    /** @param {ConversationEvent} event */
    emit(event: ConversationEvent): void;
    /** @param {string} text */
    note(text: string): void;
    /** Stops every stream and timer of this conversation; later events are dropped. */
    dispose(): void;
    /**
     * Runs `work` as the one call in flight: busy while it runs; a
     * disposal or `signal` ends it as an AbortError.
     * @param {(signal: AbortSignal) => Promise<Outcome>} work
     * @param {AbortSignal} [signal]
     * @returns {Promise<Outcome>}
     */
    exclusive(work: (signal: AbortSignal) => Promise<Outcome>, signal?: AbortSignal): Promise<Outcome>;
    /**
     * Asks a new turn: `message`, or a turn.request body's members.
     * @param {string | Omit<TurnRequest, 'kind' | 'conversation_id'>} message
     * @param {{signal?: AbortSignal}} [options]
     * @returns {Promise<Outcome>}
     */
    ask(message: string | Omit<TurnRequest, "kind" | "conversation_id">, { signal }?: {
        signal?: AbortSignal;
    }): Promise<Outcome>;
    /**
     * Answers the open pause with an interrupt.response body.
     * @param {Omit<InterruptResponse, 'kind' | 'conversation_id'>} response
     * @param {{signal?: AbortSignal}} [options]
     * @returns {Promise<Outcome>}
     */
    respond(response: Omit<InterruptResponse, "kind" | "conversation_id">, { signal }?: {
        signal?: AbortSignal;
    }): Promise<Outcome>;
    /** The open pause's interrupt id (throws when nothing is paused). */
    pauseId(): string;
    /** @param {{signal?: AbortSignal}} [options] */
    approve(options?: {
        signal?: AbortSignal;
    }): Promise<Outcome>;
    /** @param {string} text the amendment @param {{signal?: AbortSignal}} [options] */
    amend(text: string, options?: {
        signal?: AbortSignal;
    }): Promise<Outcome>;
    /**
     * Picks another option of one of the plan's choices (ledgerwire's switch).
     * @param {string} choiceId @param {string} optionId @param {{signal?: AbortSignal}} [options]
     */
    switchChoice(choiceId: string, optionId: string, options?: {
        signal?: AbortSignal;
    }): Promise<Outcome>;
    /** @param {{signal?: AbortSignal}} [options] */
    reject(options?: {
        signal?: AbortSignal;
    }): Promise<Outcome>;
    /**
     * Answers a clarifying pause, one answer per question id.
     * @param {Record<string, QuestionAnswer>} answers @param {{signal?: AbortSignal}} [options]
     */
    answerQuestions(answers: Record<string, QuestionAnswer>, options?: {
        signal?: AbortSignal;
    }): Promise<Outcome>;
    /** Dismisses a skippable clarifying pause. @param {{signal?: AbortSignal}} [options] */
    skip(options?: {
        signal?: AbortSignal;
    }): Promise<Outcome>;
    /**
     * Follows the latest turn again (after `gone`, or when a tab comes back
     * from the background): reconnects through `/api/studio/stream` and, if
     * its segment died, re-posts the answer that started it.
     * @param {{signal?: AbortSignal}} [options]
     * @returns {Promise<Outcome>}
     */
    resume({ signal }?: {
        signal?: AbortSignal;
    }): Promise<Outcome>;
    /**
     * Stop: asks the server to end the live segment (or a running switch).
     * The call in flight then ends as `stopped` (or `paused`, for a switch).
     * @param {{signal?: AbortSignal}} [options]
     */
    stop({ signal }?: {
        signal?: AbortSignal;
    }): Promise<void>;
    /**
     * Applies canvas operations with the revision last drawn. On
     * `edit_conflict` the canvas is read again before the error is thrown.
     * @param {CompositionOp[]} ops @param {{signal?: AbortSignal}} [options]
     */
    mutate(ops: CompositionOp[], { signal }?: {
        signal?: AbortSignal;
    }): Promise<import("./studio-wire.js").CompositionManifest>;
    /** Reads the canvas as it stands. @param {{signal?: AbortSignal}} [options] */
    refreshCanvas({ signal }?: {
        signal?: AbortSignal;
    }): Promise<import("./studio-wire.js").CompositionManifest | null>;
    /**
     * @param {CompositionManifest | null | undefined} manifest
     * @param {boolean} [force] take it even when older (the server's latest answer)
     */
    setCanvas(manifest: CompositionManifest | null | undefined, force?: boolean): void;
    /**
     * Reads the conversation back from the log (a reload, or another
     * client on the same conversation): every turn, segment, frame and
     * answer as replayed events, the canvas as it stands, and, when the
     * latest turn is still streaming, follows it (and resumes it if its
     * segment died). `new` when the server holds no such conversation.
     * @param {{signal?: AbortSignal}} [options]
     * @returns {Promise<'new' | 'restored' | 'failed'>}
     */
    restore({ signal }?: {
        signal?: AbortSignal;
    }): Promise<"new" | "restored" | "failed">;
    /**
     * Posts a question or an answer and reads the stream it opens.
     * @param {string} path @param {any} body @param {AbortSignal} signal
     * @returns {Promise<Outcome>}
     */
    open(path: string, body: any, signal: AbortSignal): Promise<Outcome>;
    /**
     * A refusal or an unreachable server, kept as the state's error and
     * told as a notice.
     * @param {StudioFailure} failure
     * @param {'refused' | 'unreachable' | 'lost' | 'gave-up'} kind
     * @param {any} [request]
     * @returns {Outcome}
     */
    fail(failure: StudioFailure, kind: "refused" | "unreachable" | "lost" | "gave-up", request?: any): Outcome;
    /** @param {StudioFailure} failure @param {AbortSignal} signal */
    waitLease(failure: StudioFailure, signal: AbortSignal): Promise<void>;
    /** How the latest call ended, from the state. @returns {Outcome} */
    outcome(): Outcome;
    /**
     * One frame into the state, then to the listeners. Frames at or below
     * the last seq are dropped before this.
     * @param {Frame} frame @param {number | undefined} receivedAt @param {boolean} replay
     */
    apply(frame: Frame, receivedAt: number | undefined, replay: boolean): void;
    /**
     * Reads frames until a closing frame (`ended`), the body's end without
     * one (`closed`) or a drop (`dropped`). On a reconnect, a closing frame
     * already delivered ends it as `ended`, and an error saying the segment
     * stopped ends it as `dead`, for `recover` to act on.
     * @param {Response} response @param {AbortSignal} signal @param {boolean} reconnect
     * @returns {Promise<'ended' | 'closed' | 'dropped' | 'dead'>}
     */
    consume(response: Response, signal: AbortSignal, reconnect: boolean): Promise<"ended" | "closed" | "dropped" | "dead">;
    /** A closing frame seen again on a reconnect: the state it stands for. @param {Frame} frame */
    settleFrom(frame: Frame): void;
    /**
     * The stream stopped short: follow the turn, and resume it by
     * re-posting its answer when its segment died.
     * @param {AbortSignal} signal
     * @returns {Promise<Outcome>}
     */
    recover(signal: AbortSignal): Promise<Outcome>;
    /**
     * Reconnects through `/api/studio/stream` after the last seq: `ended`
     * (a closing frame came), `dead` (no segment streams the turn any
     * more) or `gone` (given up).
     * @param {AbortSignal} signal
     * @returns {Promise<'ended' | 'dead' | 'gone'>}
     */
    follow(signal: AbortSignal): Promise<"ended" | "dead" | "gone">;
    /**
     * Re-posts the answer that started the dead segment, waiting out its
     * lease: `done`, or `again` to follow once more.
     * @param {AbortSignal} signal
     * @returns {Promise<'done' | 'again'>}
     */
    retryAnswer(signal: AbortSignal): Promise<"done" | "again">;
}
export type Frame = import("./studio-wire.js").Frame;
export type StudioRequest = import("./studio-wire.js").StudioRequest;
export type CompositionManifest = import("./studio-wire.js").CompositionManifest;
export type CompositionOp = import("./studio-wire.js").CompositionOp;
export type QuestionAnswer = import("./studio-wire.js").Answer;
export type StudioFailure = import("./http.js").StudioFailure;
export type TokenSource = import("./http.js").TokenSource;
export type TurnRequest = Extract<StudioRequest, {
    kind: "turn.request";
}>;
export type InterruptResponse = Extract<StudioRequest, {
    kind: "interrupt.response";
}>;
export type PauseFrame = Extract<Frame, {
    event: "plan.proposed";
}> | Extract<Frame, {
    event: "elicitation.request";
}>;
export type Status = "idle" | "streaming" | "paused" | "reconnecting" | "failed";
/**
 * how a call ended: the turn finished, paused on a question, was stopped
 * by the user, ended on an error frame, was refused before streaming, or
 * could not be followed (the server did not come back)
 */
export type Outcome = "done" | "paused" | "stopped" | "failed" | "refused" | "gone";
export type RetryAdvice = {
    mode: StudioFailure["retry"];
    fix?: string;
    waitMs?: number;
};
export type ConversationState = {
    conversationId: string;
    status: Status;
    pause: PauseFrame | null;
    canvas: CompositionManifest | null;
    error: StudioFailure | null;
    retry: RetryAdvice | null;
    stopped: boolean;
    lastSeq: number;
    note: string | null;
    busy: boolean;
};
export type ConversationEvent = {
    type: "frame";
    frame: Frame;
    receivedAt?: number;
    replay: boolean;
} | {
    type: "turn";
    request: any;
    replay: boolean;
} | {
    type: "segment";
    replay: boolean;
} | {
    type: "answered";
    response: any;
    replay: boolean;
} | {
    type: "note";
    text: string;
} | {
    type: "notice";
    kind: "refused" | "unreachable" | "lost" | "gave-up" | "restore";
    error: StudioFailure;
    request?: any;
} | {
    type: "restored";
    complete: boolean;
};
import { StudioHttp } from './http.js';
export { StudioError, StudioHttp, unreachable, refusal } from "./http.js";
export { StreamDropped, SILENCE_LIMIT_MS } from "./sse.js";
