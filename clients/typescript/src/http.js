// http.js — the Studio's HTTP routes: bearer header, JSON bodies, and a
// refusal read into the contract's error grammar.
// Owns: StudioHttp (one origin, one token source) and StudioError.
// Must never: retry on its own (the conversation decides what a refusal
// means), touch DOM or storage, or send the token to another origin
// than the one it was given.

/**
 * @typedef {import('./studio-wire.js').WireError} WireError
 * @typedef {import('./studio-wire.js').StudioRequest} StudioRequest
 * @typedef {import('./studio-wire.js').CompositionManifest} CompositionManifest
 * @typedef {string | (() => string | Promise<string>)} TokenSource
 * @typedef {WireError & {status: number}} StudioFailure
 *   an error in the contract's grammar with the HTTP status it came with (0: no answer)
 */

/** Records one timeline page asks for (the server's most). */
export const TIMELINE_PAGE_RECORDS = 1000;
/** Timeline pages one read takes at most. */
export const MAX_TIMELINE_PAGES = 200;

/** A refusal, or a request that got no usable answer, as an exception. */
export class StudioError extends Error {
  /** @param {StudioFailure} failure */
  constructor(failure) {
    super(failure.detail || failure.code);
    this.name = 'StudioError';
    /** The error as the wire carries it, with `status`. */
    this.failure = failure;
  }

  get code() { return this.failure.code; }

  get retry() { return this.failure.retry; }
}

/**
 * The error of a request that never got an answer.
 * @param {string} [detail]
 * @returns {StudioFailure}
 */
export function unreachable(detail = 'The server could not be reached.') {
  return { code: 'transient_unavailable', retry: 'retry_after_delay', retry_after_seconds: 2, detail, status: 0 };
}

/**
 * A refused response read as the error grammar.
 * @param {Response} response
 * @returns {Promise<StudioFailure>}
 */
export async function refusal(response) {
  /** @type {any} */
  let body = null;
  try {
    body = await response.json();
  } catch {
    // Not JSON (a proxy's page): described from the status alone.
  }
  if (body && typeof body.code === 'string' && typeof body.retry === 'string') return { ...body, status: response.status };
  return {
    code: 'transient_unavailable',
    retry: 'retry_after_delay',
    retry_after_seconds: 5,
    detail: `The server answered ${response.status} with no error the Studio knows.`,
    status: response.status,
  };
}

/** Whether `error` is the AbortError a cancelled fetch raises. */
export function isAbort(error) {
  return error instanceof Error && error.name === 'AbortError';
}

export class StudioHttp {
  /**
   * @param {{baseUrl?: string, token: TokenSource, fetch?: typeof fetch}} options
   *   `baseUrl`: the server (`''` for the page's own origin); `token`: the
   *   bearer token, or a function returning it, asked again for every request.
   */
  constructor({ baseUrl = '', token, fetch: fetchImpl }) {
    this.baseUrl = baseUrl.replace(/\/+$/, '');
    this.token = token;
    this.fetch = fetchImpl ?? ((input, init) => globalThis.fetch(input, init));
  }

  /** @returns {Promise<Record<string, string>>} */
  async headers() {
    const token = typeof this.token === 'function' ? await this.token() : this.token;
    return { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' };
  }

  /**
   * POSTs `body` as JSON. Throws StudioError (status 0) when no answer came.
   * @param {string} path
   * @param {unknown} body
   * @param {{signal?: AbortSignal, headers?: Record<string, string>}} [options]
   * @returns {Promise<Response>}
   */
  async post(path, body, { signal, headers } = {}) {
    const all = { ...(await this.headers()), ...headers };
    try {
      return await this.fetch(this.baseUrl + path, { method: 'POST', headers: all, body: JSON.stringify(body), signal, cache: 'no-store' });
    } catch (error) {
      if (isAbort(error)) throw error;
      throw new StudioError(unreachable(`The server could not be reached (${error instanceof Error ? error.message : error}).`));
    }
  }

  /**
   * GETs `path` and reads its JSON; throws StudioError on a refusal.
   * @param {string} path
   * @param {{signal?: AbortSignal}} [options]
   * @returns {Promise<any>}
   */
  async get(path, { signal } = {}) {
    let response;
    try {
      response = await this.fetch(this.baseUrl + path, { headers: await this.headers(), signal, cache: 'no-store' });
    } catch (error) {
      if (isAbort(error)) throw error;
      throw new StudioError(unreachable());
    }
    if (!response.ok) throw new StudioError(await refusal(response));
    try {
      return await response.json();
    } catch (error) {
      if (isAbort(error)) throw error;
      throw new StudioError(unreachable('The answer could not be read.'));
    }
  }

  /**
   * POSTs and reads a JSON answer (204: null); throws StudioError on a refusal.
   * @param {string} path
   * @param {unknown} body
   * @param {{signal?: AbortSignal}} [options]
   */
  async call(path, body, options) {
    const response = await this.post(path, body, options);
    if (!response.ok) throw new StudioError(await refusal(response));
    if (response.status === 204) return null;
    return response.json();
  }

  /**
   * Stops the conversation's live segment (the Stop button); always 204.
   * @param {string} conversationId
   * @param {{signal?: AbortSignal}} [options]
   */
  async cancel(conversationId, options) {
    await this.call('/api/studio/cancel', { kind: 'turn.cancel', conversation_id: conversationId }, options);
  }

  /**
   * Applies canvas operations; the new manifest. A stale
   * `expected_revision` throws StudioError `edit_conflict`.
   * @param {Omit<Extract<StudioRequest, {kind: 'composition.mutate'}>, 'kind'> & {kind?: 'composition.mutate'}} body
   * @param {{signal?: AbortSignal}} [options]
   * @returns {Promise<CompositionManifest>}
   */
  mutate(body, options) {
    return this.call('/api/studio/composition', { ...body, kind: 'composition.mutate' }, options);
  }

  /**
   * The canvas as it stands (null before the first card).
   * @param {string} conversationId
   * @param {{signal?: AbortSignal}} [options]
   * @returns {Promise<CompositionManifest | null>}
   */
  async composition(conversationId, options) {
    const body = await this.get(`/api/studio/conversations/${encodeURIComponent(conversationId)}/composition`, options);
    return body.composition ?? null;
  }

  /**
   * One page of the conversation's records.
   * @param {string} conversationId
   * @param {{from?: number, limit?: number, raw?: boolean, signal?: AbortSignal}} [options]
   * @returns {Promise<{head: number, next: number | null, records: Array<{position: number, timestamp_ms: number, kind: string, payload: any}>}>}
   */
  timelinePage(conversationId, { from = 0, limit = TIMELINE_PAGE_RECORDS, raw = false, signal } = {}) {
    const query = `from=${from}&limit=${limit}${raw ? '&raw=true' : ''}`;
    return this.get(`/api/studio/conversations/${encodeURIComponent(conversationId)}/timeline?${query}`, { signal });
  }

  /**
   * Every record of the conversation, page by page (at most MAX_TIMELINE_PAGES).
   * @param {string} conversationId
   * @param {{raw?: boolean, signal?: AbortSignal}} [options]
   */
  async timeline(conversationId, { raw = false, signal } = {}) {
    /** @type {Array<{position: number, timestamp_ms: number, kind: string, payload: any}>} */
    const records = [];
    let from = 0;
    let head = 0;
    for (let page = 0; page < MAX_TIMELINE_PAGES; page += 1) {
      const body = await this.timelinePage(conversationId, { from, raw, signal });
      records.push(...body.records);
      head = body.head;
      if (body.next === null || body.next === undefined) return { records, head, complete: true };
      from = body.next;
    }
    return { records, head, complete: false };
  }

  /**
   * Every recorded segment run through the server's agent again.
   * @param {string} conversationId
   * @param {{signal?: AbortSignal}} [options]
   */
  check(conversationId, options) {
    return this.get(`/api/studio/conversations/${encodeURIComponent(conversationId)}/check`, options);
  }
}
