/**
 * @typedef {import('./studio-wire.js').Frame} Frame
 * @typedef {import('./studio-wire.js').StudioRequest} StudioRequest
 * @typedef {import('./studio-wire.js').CompositionManifest} CompositionManifest
 * @typedef {import('./studio-wire.js').CompositionOp} CompositionOp
 * @typedef {import('./statewire/session.js').SessionStorage} SessionStorage
 * @typedef {import('./statewire/session.js').DocumentsStorage} DocumentsStorage
 * @typedef {'idle' | 'streaming' | 'paused_plan' | 'paused_questions' | 'cancelled' | 'failed'} HarnessStatus
 * @typedef {{
 *   conversation_id: string,
 *   status: HarnessStatus,
 *   turn: number,
 *   pause: null | {kind: 'plan' | 'questions', interrupt_id: string, message_id: string, frame: Frame},
 *   canvas: CompositionManifest | null,
 *   turns: Array<{turn: number, status: string, messages: string[]}>,
 *   turns_omitted: number,
 * }} HarnessMain the conversation's main document
 * @typedef {{id: string, turn: number, role: 'user', kind: 'request', text: string, request: any}} RequestMessage
 * @typedef {{id: string, turn: number, role: 'user', kind: 'answer', interrupt_id: string, decision: string, response: any}} AnswerMessage
 * @typedef {{
 *   id: string, turn: number, role: 'assistant', kind: 'reply', segment: number,
 *   status: 'streaming' | 'paused' | 'done' | 'failed' | 'cancelled' | 'abandoned',
 *   text: string, complete: boolean, plan: Frame | null, plan_versions: Frame[], approved: Frame | null,
 *   questions: Frame | null, steps: Frame[], cards: Frame[], suggestions: string[],
 *   error: Frame | null, done: Frame | null, first_seq: number, last_seq: number,
 * }} ReplyMessage
 * @typedef {RequestMessage | AnswerMessage | ReplyMessage} HarnessMessage
 */
/** The application protocol and the version this client is written against. */
export const HARNESS_PROTOCOL: "harness-sdk";
export const HARNESS_VERSION: "2026-12-01";
/** The ephemeral child whose synced document says which messages to mount. */
export const INTEREST_PROTOCOL: "harness-sdk/interest";
/** Namespace of message keys: `[conversation_id, "main", message_id]`. */
export const MESSAGE_NAMESPACE: "main";
export class HarnessClient {
    /**
     * @param {{
     *   baseUrl?: string, conversationId: string, token?: string | (() => string | Promise<string>),
     *   transport?: 'http' | 'websocket' | import('./statewire/transports.js').Transport,
     *   session?: SessionStorage, documents?: DocumentsStorage,
     *   fetch?: typeof fetch, WebSocket?: typeof WebSocket, retryForMs?: number, backoff?: {initialMs: number, maxMs: number},
     * }} options
     */
    constructor({ baseUrl, conversationId, token, transport, session, documents, fetch, WebSocket, retryForMs, backoff }: {
        baseUrl?: string;
        conversationId: string;
        token?: string | (() => string | Promise<string>);
        transport?: "http" | "websocket" | import("./statewire/transports.js").Transport;
        session?: SessionStorage;
        documents?: DocumentsStorage;
        fetch?: typeof globalThis.fetch;
        WebSocket?: typeof globalThis.WebSocket;
        retryForMs?: number;
        backoff?: {
            initialMs: number;
            maxMs: number;
        };
    });
    conversationId: string;
    statewire: StatewireClient;
    interest: {
        protocol: string;
        readonly value: any;
        set(value: unknown): Promise<any>;
        patch(ops: {
            op: string;
            path: Array<string | number>;
            value?: unknown;
        }[]): Promise<any>;
    };
    /** @type {{main: HarnessMain | undefined, messages: HarnessMessage[]} | null} */
    cached: {
        main: HarnessMain | undefined;
        messages: HarnessMessage[];
    } | null;
    /** Document changes (`useSyncExternalStore`). @param {() => void} listener */
    subscribe(listener: () => void): () => void;
    /** The main document and the mounted messages; the same object until a document changes. */
    getSnapshot(): {
        main: HarnessMain | undefined;
        messages: HarnessMessage[];
    };
    connect(): Promise<import("./statewire/negotiation.js").Selection>;
    close(): void;
    /** @returns {HarnessMain | undefined} */
    get main(): HarnessMain | undefined;
    /** A mounted message document by id. @param {string} id @returns {HarnessMessage | undefined} */
    message(id: string): HarnessMessage | undefined;
    /** Every mounted message, in the main document's turn order. @returns {HarnessMessage[]} */
    messages(): HarnessMessage[];
    /**
     * @param {string} method @param {unknown} body @param {{hold?: boolean, localMeta?: unknown}} [options]
     */
    command(method: string, body: unknown, options?: {
        hold?: boolean;
        localMeta?: unknown;
    }): import("./statewire/client.js").PendingCommand;
    /**
     * Starts a turn (`POST /api/studio/turn` as a command); resolves with
     * `{turn, segment, first_seq, request, reply}`.
     * @param {Omit<Extract<StudioRequest, {kind: 'turn.request'}>, 'kind' | 'conversation_id'>} body
     * @param {{hold?: boolean, localMeta?: unknown}} [options]
     */
    turn(body: Omit<Extract<StudioRequest, {
        kind: "turn.request";
    }>, "kind" | "conversation_id">, options?: {
        hold?: boolean;
        localMeta?: unknown;
    }): Promise<any>;
    /** @param {string} message */
    ask(message: string): Promise<any>;
    /**
     * Answers the open pause; resolves with `{turn, segment, first_seq, reply, interrupt_id, decision}`.
     * @param {Omit<Extract<StudioRequest, {kind: 'interrupt.response'}>, 'kind' | 'conversation_id'>} body
     * @param {{hold?: boolean, localMeta?: unknown}} [options]
     */
    answer(body: Omit<Extract<StudioRequest, {
        kind: "interrupt.response";
    }>, "kind" | "conversation_id">, options?: {
        hold?: boolean;
        localMeta?: unknown;
    }): Promise<any>;
    /** @param {string} interruptId */
    approve(interruptId: string): Promise<any>;
    /** Stops the live segment; resolves with `{cancelled, segment?}`. */
    cancel(): Promise<any>;
    /**
     * Changes the canvas; resolves with `{composition}`.
     * @param {{expected_revision: number, ops: CompositionOp[], composition_id?: string}} body
     */
    mutate(body: {
        expected_revision: number;
        ops: CompositionOp[];
        composition_id?: string;
    }): Promise<any>;
    /**
     * Which messages this attach mounts: the newest `latest` and the named ones.
     * @param {{latest?: number, messages?: string[]}} interest
     */
    setInterest(interest: {
        latest?: number;
        messages?: string[];
    }): Promise<any>;
}
export type Frame = import("./studio-wire.js").Frame;
export type StudioRequest = import("./studio-wire.js").StudioRequest;
export type CompositionManifest = import("./studio-wire.js").CompositionManifest;
export type CompositionOp = import("./studio-wire.js").CompositionOp;
export type SessionStorage = import("./statewire/session.js").SessionStorage;
export type DocumentsStorage = import("./statewire/session.js").DocumentsStorage;
export type HarnessStatus = "idle" | "streaming" | "paused_plan" | "paused_questions" | "cancelled" | "failed";
/**
 * the conversation's main document
 */
export type HarnessMain = {
    conversation_id: string;
    status: HarnessStatus;
    turn: number;
    pause: null | {
        kind: "plan" | "questions";
        interrupt_id: string;
        message_id: string;
        frame: Frame;
    };
    canvas: CompositionManifest | null;
    turns: Array<{
        turn: number;
        status: string;
        messages: string[];
    }>;
    turns_omitted: number;
};
export type RequestMessage = {
    id: string;
    turn: number;
    role: "user";
    kind: "request";
    text: string;
    request: any;
};
export type AnswerMessage = {
    id: string;
    turn: number;
    role: "user";
    kind: "answer";
    interrupt_id: string;
    decision: string;
    response: any;
};
export type ReplyMessage = {
    id: string;
    turn: number;
    role: "assistant";
    kind: "reply";
    segment: number;
    status: "streaming" | "paused" | "done" | "failed" | "cancelled" | "abandoned";
    text: string;
    complete: boolean;
    plan: Frame | null;
    plan_versions: Frame[];
    approved: Frame | null;
    questions: Frame | null;
    steps: Frame[];
    cards: Frame[];
    suggestions: string[];
    error: Frame | null;
    done: Frame | null;
    first_seq: number;
    last_seq: number;
};
export type HarnessMessage = RequestMessage | AnswerMessage | ReplyMessage;
import { StatewireClient } from './statewire/client.js';
