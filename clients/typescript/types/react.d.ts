/**
 * The conversation's state (status, pause, canvas, error), re-rendered on every change.
 * @param {import('./studio.js').Conversation} conversation
 */
export function useConversation(conversation: import("./studio.js").Conversation): import("./studio.js").ConversationState;
/**
 * A Statewire document's value (`protocol`'s main document, or the one at `key`).
 * @param {import('./statewire/client.js').StatewireClient} client
 * @param {string} protocol
 * @param {string[]} [key]
 */
export function useStatewireDocument(client: import("./statewire/client.js").StatewireClient, protocol: string, key?: string[]): any;
/**
 * The client's status, selection and lanes.
 * @param {import('./statewire/client.js').StatewireClient} client
 */
export function useStatewireClient(client: import("./statewire/client.js").StatewireClient): import("./statewire/client.js").ClientSnapshot;
/**
 * A harness conversation's main document and messages.
 * @param {import('./harness.js').HarnessClient} harness
 */
export function useHarness(harness: import("./harness.js").HarnessClient): {
    main: import("./harness.js").HarnessMain | undefined;
    messages: import("./harness.js").HarnessMessage[];
};
