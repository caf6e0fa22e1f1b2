/**
 * The error of a request that never got an answer.
 * @param {string} [detail]
 * @returns {StudioFailure}
 */
export function unreachable(detail?: string): StudioFailure;
/**
 * A refused response read as the error grammar.
 * @param {Response} response
 * @returns {Promise<StudioFailure>}
 */
export function refusal(response: Response): Promise<StudioFailure>;
/** Whether `error` is the AbortError a cancelled fetch raises. */
export function isAbort(error: any): boolean;
/**
 * @typedef {import('./studio-wire.js').WireError} WireError
 * @typedef {import('./studio-wire.js').StudioRequest} StudioRequest
 * @typedef {import('./studio-wire.js').CompositionManifest} CompositionManifest
 * @typedef {string | (() => string | Promise<string>)} TokenSource
 * @typedef {WireError & {status: number}} StudioFailure
 *   an error in the contract's grammar with the HTTP status it came with (0: no answer)
 */
/** Records one timeline page asks for (the server's most). */
export const TIMELINE_PAGE_RECORDS: 1000;
/** Timeline pages one read takes at most. */
export const MAX_TIMELINE_PAGES: 200;
/** A refusal, or a request that got no usable answer, as an exception. */
export class StudioError extends Error {
    /** @param {StudioFailure} failure */
    constructor(failure: StudioFailure);
    /** The error as the wire carries it, with `status`. */
    failure: StudioFailure;
    get code(): import("./studio-wire.js").ErrorCode;
    get retry(): import("./studio-wire.js").RetryMode;
}
export class StudioHttp {
    /**
     * @param {{baseUrl?: string, token: TokenSource, fetch?: typeof fetch}} options
     *   `baseUrl`: the server (`''` for the page's own origin); `token`: the
     *   bearer token, or a function returning it, asked again for every request.
     */
    constructor({ baseUrl, token, fetch: fetchImpl }: {
        baseUrl?: string;
        token: TokenSource;
        fetch?: typeof fetch;
    });
    baseUrl: string;
    token: TokenSource;
    fetch: typeof fetch;
    /** @returns {Promise<Record<string, string>>} */
    headers(): Promise<Record<string, string>>;
    /**
     * POSTs `body` as JSON. Throws StudioError (status 0) when no answer came.
     * @param {string} path
     * @param {unknown} body
     * @param {{signal?: AbortSignal, headers?: Record<string, string>}} [options]
     * @returns {Promise<Response>}
     */
    post(path: string, body: unknown, { signal, headers }?: {
        signal?: AbortSignal;
        headers?: Record<string, string>;
    }): Promise<Response>;
    /**
     * GETs `path` and reads its JSON; throws StudioError on a refusal.
     * @param {string} path
     * @param {{signal?: AbortSignal}} [options]
     * @returns {Promise<any>}
     */
    get(path: string, { signal }?: {
        signal?: AbortSignal;
    }): Promise<any>;
    /**
     * POSTs and reads a JSON answer (204: null); throws StudioError on a refusal.
     * @param {string} path
     * @param {unknown} body
     * @param {{signal?: AbortSignal}} [options]
     */
    call(path: string, body: unknown, options?: {
        signal?: AbortSignal;
    }): Promise<any>;
    /**
     * Stops the conversation's live segment (the Stop button); always 204.
     * @param {string} conversationId
     * @param {{signal?: AbortSignal}} [options]
     */
    cancel(conversationId: string, options?: {
        signal?: AbortSignal;
    }): Promise<void>;
    /**
     * Applies canvas operations; the new manifest. A stale
     * `expected_revision` throws StudioError `edit_conflict`.
     * @param {Omit<Extract<StudioRequest, {kind: 'composition.mutate'}>, 'kind'> & {kind?: 'composition.mutate'}} body
     * @param {{signal?: AbortSignal}} [options]
     * @returns {Promise<CompositionManifest>}
     */
    mutate(body: Omit<Extract<StudioRequest, {
        kind: "composition.mutate";
    }>, "kind"> & {
        kind?: "composition.mutate";
    }, options?: {
        signal?: AbortSignal;
    }): Promise<CompositionManifest>;
    /**
     * The canvas as it stands (null before the first card).
     * @param {string} conversationId
     * @param {{signal?: AbortSignal}} [options]
     * @returns {Promise<CompositionManifest | null>}
     */
    composition(conversationId: string, options?: {
        signal?: AbortSignal;
    }): Promise<CompositionManifest | null>;
    /**
     * One page of the conversation's records.
     * @param {string} conversationId
     * @param {{from?: number, limit?: number, raw?: boolean, signal?: AbortSignal}} [options]
     * @returns {Promise<{head: number, next: number | null, records: Array<{position: number, timestamp_ms: number, kind: string, payload: any}>}>}
     */
    timelinePage(conversationId: string, { from, limit, raw, signal }?: {
        from?: number;
        limit?: number;
        raw?: boolean;
        signal?: AbortSignal;
    }): Promise<{
        head: number;
        next: number | null;
        records: Array<{
            position: number;
            timestamp_ms: number;
            kind: string;
            payload: any;
        }>;
    }>;
    /**
     * Every record of the conversation, page by page (at most MAX_TIMELINE_PAGES).
     * @param {string} conversationId
     * @param {{raw?: boolean, signal?: AbortSignal}} [options]
     */
    timeline(conversationId: string, { raw, signal }?: {
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
    /**
     * Every recorded segment run through the server's agent again.
     * @param {string} conversationId
     * @param {{signal?: AbortSignal}} [options]
     */
    check(conversationId: string, options?: {
        signal?: AbortSignal;
    }): Promise<any>;
}
export type WireError = import("./studio-wire.js").WireError;
export type StudioRequest = import("./studio-wire.js").StudioRequest;
export type CompositionManifest = import("./studio-wire.js").CompositionManifest;
export type TokenSource = string | (() => string | Promise<string>);
/**
 * an error in the contract's grammar with the HTTP status it came with (0: no answer)
 */
export type StudioFailure = WireError & {
    status: number;
};
