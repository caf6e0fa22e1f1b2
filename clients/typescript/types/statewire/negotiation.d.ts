/** A wire or protocol version: a real calendar date `YYYY-MM-DD`. @param {unknown} value */
export function isVersion(value: unknown): boolean;
/** Whether `version` lies in `range` (both ends included). @param {VersionRange} range @param {string} version */
export function inRange(range: VersionRange, version: string): boolean;
/** Whether two ranges share a version. @param {VersionRange} a @param {VersionRange} b */
export function overlaps(a: VersionRange, b: VersionRange): boolean;
/** `Statewire-Version`: an Item, the String maximum with `min-version`. @param {VersionRange} range */
export function versionField(range: VersionRange): string;
/**
 * `Statewire-Protocol`: a List of Tokens with `version`, `min-version`
 * and `optional`, or the bare `*` of an inspector.
 * @param {ProtocolOffer[] | '*'} offers
 */
export function protocolField(offers: ProtocolOffer[] | "*"): string;
/**
 * Reads a `Statewire-Protocol` field back: `*`, or the offers it names.
 * Throws on anything the field's grammar refuses.
 * @param {string} text
 * @returns {ProtocolOffer[] | '*'}
 */
export function readProtocolField(text: string): ProtocolOffer[] | "*";
/** Reads a `Statewire-Version` field back. @param {string} text @returns {VersionRange} */
export function readVersionField(text: string): VersionRange;
/**
 * Checks a hello's `syn` against what was offered; the selection, or a
 * thrown Error saying what is wrong (a protocol error: the client stops).
 * @param {any} syn
 * @param {VersionRange} wire
 * @param {ProtocolOffer[] | '*'} offers
 * @returns {Selection}
 */
export function validateSelection(syn: any, wire: VersionRange, offers: ProtocolOffer[] | "*"): Selection;
export type VersionRange = {
    version: string;
    minVersion?: string;
};
export type ProtocolOffer = {
    name: string;
    version: string;
    minVersion?: string;
    optional?: boolean;
};
export type SelectedProtocol = {
    name: string;
    version: string;
    record?: "ephemeral";
    seq: number;
};
export type Selection = {
    version: string;
    protocols: SelectedProtocol[];
};
