/**
 * The HTTP transport: `GET|POST {url}/stream` to attach, `POST
 * {url}/frames` under the lease. `url` is the thread (`/threads/t1`).
 * @param {{url: string, token?: TokenSource, fetch?: typeof fetch, silenceMs?: number}} options
 * @returns {Transport}
 */
export function StatewireHttp({ url, token, fetch: fetchImpl, silenceMs }: {
    url: string;
    token?: TokenSource;
    fetch?: typeof fetch;
    silenceMs?: number;
}): Transport;
/**
 * The WebSocket transport: `{url}/ws?client=<id>` with subprotocol
 * `statewire.v1`; the negotiation fields and the token travel in the
 * first message (a browser cannot set a handshake header).
 * @param {{url: string, token?: TokenSource, WebSocket?: typeof WebSocket}} options
 * @returns {Transport}
 */
export function StatewireWebSocket({ url, token, WebSocket: Impl }: {
    url: string;
    token?: TokenSource;
    WebSocket?: typeof WebSocket;
}): Transport;
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
export const STATEWIRE_SILENCE_MS: 45000;
/** The WebSocket subprotocol. */
export const SUBPROTOCOL: "statewire.v1";
/** A transport that could not open or lost its connection. */
export class TransportError extends Error {
}
/** A transport that cannot work here at all (no WebSocket): the client stops at once. */
export class TransportUnavailable extends TransportError {
}
export type TokenSource = string | (() => string | Promise<string>);
export type Packet = {
    fin?: any;
    syn?: any;
    ops?: any[];
    ans?: any[];
    dur?: any[];
};
export type ClientFrame = {
    ctx?: any[];
    cmd?: any[];
};
export type TransportConnection = {
    send(frame: ClientFrame): Promise<void>;
    close(): void;
};
export type OpenOptions = {
    clientId: string;
    headers: Record<string, string>;
    initial: ClientFrame | null;
    onPacket: (packet: Packet) => void;
    onClose: (reason: unknown) => void;
};
export type Transport = {
    kind: string;
    url: string;
    open(options: OpenOptions): Promise<TransportConnection>;
};
