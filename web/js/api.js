// api.js — the Studio's HTTP routes as the page calls them.
// Owns: the bearer header, JSON bodies, and reading a refusal into the
// contract's error grammar. Must never: retry on its own (the session
// decides what a refusal means), or send the token anywhere but this
// page's own origin.

/** A request that never reached the server, or whose answer was cut. */
export class NetworkError extends Error {}

export class Api {
  /** @param {() => string} token the bearer token to send */
  constructor(token) {
    this.token = token;
  }

  headers(extra) {
    return {
      Authorization: `Bearer ${this.token()}`,
      'Content-Type': 'application/json',
      ...extra,
    };
  }

  /** POSTs `body` as JSON; throws NetworkError when no answer came. */
  async post(path, body, { signal, headers } = {}) {
    try {
      return await fetch(path, {
        method: 'POST',
        headers: this.headers(headers),
        body: JSON.stringify(body),
        signal,
        cache: 'no-store',
      });
    } catch (error) {
      if (error?.name === 'AbortError') throw error;
      throw new NetworkError(`The server could not be reached (${error?.message ?? error}).`);
    }
  }

  /** GETs `path`: `{ok: true, body}` or `{ok: false, error}`. */
  async read(path, { signal } = {}) {
    let response;
    try {
      response = await fetch(path, { headers: this.headers(), signal, cache: 'no-store' });
    } catch (error) {
      if (error?.name === 'AbortError') throw error;
      return { ok: false, error: unreachable() };
    }
    if (!response.ok) return { ok: false, error: await refusal(response) };
    try {
      return { ok: true, body: await response.json() };
    } catch {
      return { ok: false, error: unreachable() };
    }
  }

  composition(conversationId) {
    return this.read(`/api/studio/conversations/${encodeURIComponent(conversationId)}/composition`);
  }

  timeline(conversationId, from, { raw = false, limit = 1000 } = {}) {
    const query = `from=${from}&limit=${limit}${raw ? '&raw=true' : ''}`;
    return this.read(`/api/studio/conversations/${encodeURIComponent(conversationId)}/timeline?${query}`);
  }

  check(conversationId) {
    return this.read(`/api/studio/conversations/${encodeURIComponent(conversationId)}/check`);
  }
}

/** The error of a request that got no usable answer. */
export function unreachable(detail = 'The server could not be reached.') {
  return { code: 'transient_unavailable', retry: 'retry_after_delay', retry_after_seconds: 2, detail, status: 0 };
}

/** A refused response read as the contract's error grammar. */
export async function refusal(response) {
  let body = null;
  try {
    body = await response.json();
  } catch {
    // Not JSON: described below from the status alone.
  }
  if (body && typeof body.code === 'string' && typeof body.retry === 'string') {
    return { ...body, status: response.status };
  }
  return {
    code: 'transient_unavailable',
    retry: 'retry_after_delay',
    retry_after_seconds: 5,
    detail: `The server answered ${response.status} with no error the Studio knows.`,
    status: response.status,
  };
}
