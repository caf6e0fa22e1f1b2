/** An AbortError as fetch raises it. */
export function abortError(): DOMException;
/**
 * @typedef {{id?: string, data: string, receivedAt: number}} SseMessage
 * @typedef {{comment: string}} SseComment
 */
/**
 * Yields each event (`{id, data, receivedAt}`) and each comment
 * (`{comment}`, the heartbeats) of `response` until its body ends.
 * Throws StreamDropped when the connection fails, stays silent for
 * `silenceMs`, or an event grows past MAX_EVENT_CHARS; an AbortError
 * when `signal` aborts.
 * @param {Response} response
 * @param {{signal?: AbortSignal, silenceMs?: number}} [options]
 * @returns {AsyncGenerator<SseMessage | SseComment>}
 */
export function readEvents(response: Response, { signal, silenceMs }?: {
    signal?: AbortSignal;
    silenceMs?: number;
}): AsyncGenerator<SseMessage | SseComment>;
/** Characters one event may hold before the stream is given up as broken. */
export const MAX_EVENT_CHARS: number;
/** Silence (no byte, not even a heartbeat) after which a stream counts as dropped, in ms. */
export const SILENCE_LIMIT_MS: 30000;
/** A stream that stopped without its closing frame: cut, silent or unreadable. */
export class StreamDropped extends Error {
    /** @param {string} message */
    constructor(message: string);
}
export type SseMessage = {
    id?: string;
    data: string;
    receivedAt: number;
};
export type SseComment = {
    comment: string;
};
