// react.js — `@ledgerwire/client/react`: hooks over the package's stores,
// on React's useSyncExternalStore. React is an optional peer dependency:
// only this entry imports it.
// Owns: reading a Conversation, a Statewire document, a StatewireClient's
// state or a HarnessClient in a component. Must never: start a request
// or touch storage while rendering (server rendering reads the snapshot).

import { useCallback, useSyncExternalStore } from 'react';

/**
 * The conversation's state (status, pause, canvas, error), re-rendered on every change.
 * @param {import('./studio.js').Conversation} conversation
 */
export function useConversation(conversation) {
  return useSyncExternalStore(conversation.subscribe, conversation.getSnapshot, conversation.getSnapshot);
}

/**
 * A Statewire document's value (`protocol`'s main document, or the one at `key`).
 * @param {import('./statewire/client.js').StatewireClient} client
 * @param {string} protocol
 * @param {string[]} [key]
 */
export function useStatewireDocument(client, protocol, key) {
  const keyText = key ? JSON.stringify(key) : '';
  const subscribe = useCallback((/** @type {() => void} */ listener) => client.documents.subscribe(listener), [client]);
  const read = useCallback(() => client.documents.get(protocol, keyText ? JSON.parse(keyText) : undefined), [client, protocol, keyText]);
  return useSyncExternalStore(subscribe, read, read);
}

/**
 * The client's status, selection and lanes.
 * @param {import('./statewire/client.js').StatewireClient} client
 */
export function useStatewireClient(client) {
  return useSyncExternalStore(client.subscribe, client.getSnapshot, client.getSnapshot);
}

/**
 * A harness conversation's main document and messages.
 * @param {import('./harness.js').HarnessClient} harness
 */
export function useHarness(harness) {
  return useSyncExternalStore(harness.subscribe, harness.getSnapshot, harness.getSnapshot);
}
