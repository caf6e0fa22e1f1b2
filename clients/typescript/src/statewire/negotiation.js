// negotiation.js — what a Statewire client offers and how it checks what
// the host selected.
// Owns: the `Statewire-Version` and `Statewire-Protocol` request fields
// as RFC 9651 structured fields (through structured-headers), reading
// them back, and validating a hello's `syn` against the offers.
// Must never: accept a selection outside the offers (other than a
// selected parent's child at its parent's version), or build a field by
// pasting strings.

import { Token, parseItem, parseList, serializeItem, serializeList } from 'structured-headers';

/**
 * @typedef {{version: string, minVersion?: string}} VersionRange
 * @typedef {{name: string, version: string, minVersion?: string, optional?: boolean}} ProtocolOffer
 * @typedef {{name: string, version: string, record?: 'ephemeral', seq: number}} SelectedProtocol
 * @typedef {{version: string, protocols: SelectedProtocol[]}} Selection
 */

const DATE = /^\d{4}-\d{2}-\d{2}$/;

/** A wire or protocol version: a real calendar date `YYYY-MM-DD`. @param {unknown} value */
export function isVersion(value) {
  if (typeof value !== 'string' || !DATE.test(value)) return false;
  const date = new Date(`${value}T00:00:00Z`);
  return !Number.isNaN(date.getTime()) && date.toISOString().slice(0, 10) === value;
}

/** @param {VersionRange} range */
function checkRange(range) {
  const min = range.minVersion ?? range.version;
  if (!isVersion(range.version) || !isVersion(min)) throw new TypeError(`versions are dates YYYY-MM-DD: ${range.version}`);
  if (min > range.version) throw new TypeError(`minVersion ${min} is after version ${range.version}`);
  return { min, max: range.version };
}

/** Whether `version` lies in `range` (both ends included). @param {VersionRange} range @param {string} version */
export function inRange(range, version) {
  const { min, max } = checkRange(range);
  return isVersion(version) && min <= version && version <= max;
}

/** Whether two ranges share a version. @param {VersionRange} a @param {VersionRange} b */
export function overlaps(a, b) {
  const x = checkRange(a);
  const y = checkRange(b);
  return (x.min > y.min ? x.min : y.min) <= (x.max < y.max ? x.max : y.max);
}

/** `Statewire-Version`: an Item, the String maximum with `min-version`. @param {VersionRange} range */
export function versionField(range) {
  const { min, max } = checkRange(range);
  /** @type {Map<string, string>} */
  const params = new Map();
  if (min !== max) params.set('min-version', min);
  return serializeItem([max, params]);
}

/**
 * `Statewire-Protocol`: a List of Tokens with `version`, `min-version`
 * and `optional`, or the bare `*` of an inspector.
 * @param {ProtocolOffer[] | '*'} offers
 */
export function protocolField(offers) {
  if (offers === '*') return serializeList([[new Token('*'), new Map()]]);
  if (offers.length === 0) throw new TypeError('offer at least one application protocol');
  const seen = new Set();
  return serializeList(offers.map((offer) => {
    if (seen.has(offer.name)) throw new TypeError(`${offer.name} is offered twice`);
    seen.add(offer.name);
    const { min, max } = checkRange(offer);
    /** @type {Map<string, string | boolean>} */
    const params = new Map([['version', max]]);
    if (min !== max) params.set('min-version', min);
    if (offer.optional) params.set('optional', true);
    return [new Token(offer.name), params];
  }));
}

/**
 * Reads a `Statewire-Protocol` field back: `*`, or the offers it names.
 * Throws on anything the field's grammar refuses.
 * @param {string} text
 * @returns {ProtocolOffer[] | '*'}
 */
export function readProtocolField(text) {
  const list = parseList(text);
  if (list.length === 0) throw new SyntaxError('an empty protocol list');
  /** @type {ProtocolOffer[]} */
  const offers = [];
  for (const member of list) {
    const [value, params] = member;
    if (Array.isArray(value)) throw new SyntaxError('an inner list is not a protocol');
    if (!(value instanceof Token)) throw new SyntaxError('a protocol is a Token');
    if (value.toString() === '*') {
      if (list.length !== 1 || params.size > 0) throw new SyntaxError('* stands alone, without parameters');
      return '*';
    }
    /** @type {ProtocolOffer} */
    const offer = { name: value.toString(), version: '' };
    for (const [key, param] of params) {
      if (key === 'version' && typeof param === 'string') offer.version = param;
      else if (key === 'min-version' && typeof param === 'string') offer.minVersion = param;
      else if (key === 'optional' && typeof param === 'boolean') offer.optional = param;
      else throw new SyntaxError(`parameter ${key} is not understood`);
    }
    if (!offer.version) throw new SyntaxError(`${offer.name} names no version`);
    offers.push(offer);
  }
  return offers;
}

/** Reads a `Statewire-Version` field back. @param {string} text @returns {VersionRange} */
export function readVersionField(text) {
  const [value, params] = parseItem(text);
  if (typeof value !== 'string') throw new SyntaxError('the version is a String');
  /** @type {VersionRange} */
  const range = { version: value };
  for (const [key, param] of params) {
    if (key === 'min-version' && typeof param === 'string') range.minVersion = param;
    else throw new SyntaxError(`parameter ${key} is not understood`);
  }
  return range;
}

/**
 * Checks a hello's `syn` against what was offered; the selection, or a
 * thrown Error saying what is wrong (a protocol error: the client stops).
 * @param {any} syn
 * @param {VersionRange} wire
 * @param {ProtocolOffer[] | '*'} offers
 * @returns {Selection}
 */
export function validateSelection(syn, wire, offers) {
  if (!syn || typeof syn !== 'object') throw new Error('the hello has no syn');
  if (!inRange(wire, syn.version)) throw new Error(`wire version ${syn.version} was not offered`);
  if (!Array.isArray(syn.protocols)) throw new Error('syn.protocols is missing');
  /** @type {SelectedProtocol[]} */
  const protocols = [];
  const byName = new Map();
  for (const entry of syn.protocols) {
    const { name, version, record, seq } = entry ?? {};
    if (typeof name !== 'string' || !isVersion(version)) throw new Error(`a selected protocol lacks its name or version: ${JSON.stringify(entry)}`);
    if (!Number.isSafeInteger(seq) || seq < 0) throw new Error(`${name} has no lane watermark`);
    if (record !== undefined && record !== 'ephemeral') throw new Error(`${name} has an unknown record ${record}`);
    if (byName.has(name)) throw new Error(`${name} is selected twice`);
    if (offers !== '*') {
      const offer = offers.find((o) => o.name === name);
      if (offer) {
        if (!inRange(offer, version)) throw new Error(`${name} ${version} is outside the offer`);
      } else {
        const slash = name.lastIndexOf('/');
        const parent = slash > 0 ? byName.get(name.slice(0, slash)) : undefined;
        if (!parent) throw new Error(`${name} was not offered`);
        if (parent.version !== version) throw new Error(`${name} is not at its parent's version`);
      }
    }
    /** @type {SelectedProtocol} */
    const selected = { name, version, seq };
    if (record) selected.record = record;
    byName.set(name, selected);
    protocols.push(selected);
  }
  if (offers !== '*') {
    for (const offer of offers) {
      if (!offer.optional && !byName.has(offer.name)) throw new Error(`required ${offer.name} is missing from the selection`);
    }
  }
  return { version: syn.version, protocols };
}
