// transports.js — the two ways a Statewire client reaches a thread:
// StatewireHttp (an SSE attach, statements POSTed under the lease) and
// StatewireWebSocket (the `statewire.v1` subprotocol).
// Owns: carrying the negotiation fields, the client id and the bearer
// token (asked again on every attach and request), and turning what
// arrives into packets. Must never: interpret a packet (the client does),
// or send the token to another origin than the transport's URL.

import { readEvents, StreamDropped } from '../sse.js';

/**
 * @typedef {string | (() => string | Promise<string>)} TokenSource
 * @typedef {{fin?: any, syn?: any, ops?: any[], ans?: any[], dur?: any[]}} Packet
 * @typedef {{ctx?: any[], cmd?: any[]}} ClientFrame
 * @typedef {{send(frame: ClientFrame): Promise<void>, close(): void}} TransportConnection
 * @typedef {{
 *   clientId: string,
 *   headers: Record<string, string>,
 *   initial: ClientFrame | null,
 *   onPacket: (packet: Packet) => void,
 *   onClose: (reason: unknown) => void,
 * }} OpenOptions
 * @typedef {{kind: string, url: string, open(options: OpenOptions): Promise<TransportConnection>}} Transport
 */

/** Silence on a Statewire SSE attach (the host sends a comment every 15 s) before it counts as dropped, in ms. */
export const STATEWIRE_SILENCE_MS = 45_000;
/** The WebSocket subprotocol. */
export const SUBPROTOCOL = 'statewire.v1';

/** A transport that could not open or lost its connection. */
export class TransportError extends Error {}

/** A transport that cannot work here at all (no WebSocket): the client stops at once. */
export class TransportUnavailable extends TransportError {}

/** @param {TokenSource | undefined} token @returns {Promise<Record<string, string>>} */
async function authorization(token) {
  if (token === undefined) return {};
  const value = typeof token === 'function' ? await token() : token;
  return { Authorization: `Bearer ${value}` };
}

/** @param {string} url */
function absolute(url) {
  const base = globalThis.location?.href;
  return base ? new URL(url, base).href : url;
}

/**
 * The HTTP transport: `GET|POST {url}/stream` to attach, `POST
 * {url}/frames` under the lease. `url` is the thread (`/threads/t1`).
 * @param {{url: string, token?: TokenSource, fetch?: typeof fetch, silenceMs?: number}} options
 * @returns {Transport}
 */
export function StatewireHttp({ url, token, fetch: fetchImpl, silenceMs = STATEWIRE_SILENCE_MS }) {
  const base = url.replace(/\/+$/, '');
  const call = fetchImpl ?? ((input, init) => globalThis.fetch(input, init));
  return {
    kind: 'http',
    url: base,
    async open({ clientId, headers, initial, onPacket, onClose }) {
      const controller = new AbortController();
      /** @type {Record<string, string>} */
      const all = { ...headers, 'Statewire-Client-Id': clientId, ...(await authorization(token)) };
      if (initial) all['Content-Type'] = 'application/json';
      let response;
      try {
        response = await call(`${base}/stream`, {
          method: initial ? 'POST' : 'GET', headers: all, body: initial ? JSON.stringify(initial) : undefined,
          signal: controller.signal, cache: 'no-store',
        });
      } catch (error) {
        throw new TransportError(`the attach could not reach the host (${error instanceof Error ? error.message : error})`);
      }
      if (!response.ok) {
        /** @type {any} */
        const body = await response.json().catch(() => null);
        if (body?.fin) {
          onPacket({ fin: body.fin });
          return { send: async () => {}, close: () => {} };
        }
        throw new TransportError(`the attach answered ${response.status}`);
      }
      const lease = response.headers.get('Statewire-Lease') ?? '';
      (async () => {
        try {
          for await (const event of readEvents(response, { signal: controller.signal, silenceMs })) {
            if ('data' in event) onPacket(JSON.parse(event.data));
          }
          onClose(new StreamDropped('the stream ended'));
        } catch (error) {
          onClose(error);
        }
      })();
      return {
        async send(frame) {
          const sent = await call(`${base}/frames`, {
            method: 'POST', body: JSON.stringify(frame), cache: 'no-store',
            headers: { 'Content-Type': 'application/json', 'Statewire-Lease': lease, ...(await authorization(token)) },
          });
          if (sent.ok) return;
          /** @type {any} */
          const body = await sent.json().catch(() => null);
          if (body?.fin) onPacket({ fin: body.fin });
          else throw new TransportError(`a frame was answered ${sent.status}`);
        },
        close() { controller.abort(); },
      };
    },
  };
}

/**
 * The WebSocket transport: `{url}/ws?client=<id>` with subprotocol
 * `statewire.v1`; the negotiation fields and the token travel in the
 * first message (a browser cannot set a handshake header).
 * @param {{url: string, token?: TokenSource, WebSocket?: typeof WebSocket}} options
 * @returns {Transport}
 */
export function StatewireWebSocket({ url, token, WebSocket: Impl }) {
  const base = url.replace(/\/+$/, '');
  return {
    kind: 'websocket',
    url: base,
    async open({ clientId, headers, initial, onPacket, onClose }) {
      const Socket = Impl ?? globalThis.WebSocket;
      if (!Socket) throw new TransportUnavailable('no WebSocket here: pass `WebSocket` (Node 20: run with --experimental-websocket)');
      const target = absolute(`${base}/ws?client=${encodeURIComponent(clientId)}`).replace(/^http/, 'ws');
      const auth = await authorization(token);
      const socket = new Socket(target, SUBPROTOCOL);
      return new Promise((resolve, reject) => {
        let opened = false;
        socket.onopen = () => {
          opened = true;
          socket.send(JSON.stringify({ headers: { ...headers, ...auth }, ...(initial ?? {}) }));
          resolve({
            async send(frame) {
              if (socket.readyState !== 1) throw new TransportError('the socket is closed');
              socket.send(JSON.stringify(frame));
            },
            close() { socket.close(); },
          });
        };
        socket.onmessage = (message) => {
          if (typeof message.data === 'string') onPacket(JSON.parse(message.data));
        };
        socket.onclose = (event) => {
          if (!opened) reject(new TransportError(`the socket closed before it opened (${event.code})`));
          else onClose(new TransportError(`the socket closed (${event.code})`));
        };
        socket.onerror = () => {
          if (!opened) reject(new TransportError('the socket could not open'));
        };
      });
    },
  };
}
