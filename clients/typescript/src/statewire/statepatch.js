// statepatch.js — Statewire's document operations on plain JSON values:
// `add`, `remove` and `replace` at a path of member names and indexes
// (JSON Patch with its pointer split into steps).
// Owns: applying one op list, whole or not at all, without changing its
// input (each change copies the containers on its path, so a reader
// holding the old value keeps it, and React sees a new reference).
// Must never: apply part of a list, or accept an array step that is not a
// canonical index (or `-` for an add at the end).

/** Operations one list may hold. */
export const MAX_PATCH_OPERATIONS = 1024;
/** Steps one path may hold. */
export const MAX_PATH_DEPTH = 64;

/** Why a patch could not apply. */
export class PatchError extends Error {}

/**
 * @param {unknown[]} array @param {string | number} step @param {boolean} end whether `-` is allowed
 */
function index(array, step, end) {
  if (typeof step === 'number') {
    if (!Number.isSafeInteger(step) || step < 0) throw new PatchError(`bad index ${step}`);
    return step;
  }
  if (step === '-' && end) return array.length;
  if (!/^(0|[1-9][0-9]*)$/.test(step)) throw new PatchError(`${JSON.stringify(step)} is not an array index`);
  return Number(step);
}

/** @param {unknown} value */
function isObject(value) {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

/**
 * `value` with `op` applied at `path`, copying the containers on the way.
 * @param {any} value @param {Array<string | number>} path @param {any} op
 * @returns {any}
 */
function at(value, path, op) {
  const [step, ...rest] = path;
  if (Array.isArray(value)) {
    const copy = value.slice();
    if (rest.length > 0) {
      const i = index(value, step, false);
      if (i >= value.length) throw new PatchError(`index ${i} is past the end`);
      copy[i] = at(value[i], rest, op);
      return copy;
    }
    if (op.op === 'add') {
      const i = index(value, step, true);
      if (i > value.length) throw new PatchError(`index ${i} is past the end`);
      copy.splice(i, 0, op.value);
      return copy;
    }
    const i = index(value, step, false);
    if (i >= value.length) throw new PatchError(`index ${i} is past the end`);
    if (op.op === 'remove') copy.splice(i, 1);
    else copy[i] = op.value;
    return copy;
  }
  if (isObject(value)) {
    if (typeof step !== 'string') throw new PatchError(`${step} names no member`);
    const has = Object.prototype.hasOwnProperty.call(value, step);
    const copy = { ...value };
    if (rest.length > 0) {
      if (!has) throw new PatchError(`no member ${step}`);
      copy[step] = at(value[step], rest, op);
      return copy;
    }
    if (op.op !== 'add' && !has) throw new PatchError(`no member ${step} to ${op.op}`);
    if (op.op === 'remove') delete copy[step];
    else copy[step] = op.value;
    return copy;
  }
  throw new PatchError(`${JSON.stringify(step)} goes into a value that is not a container`);
}

/**
 * `document` with every op of `ops` applied, in order; throws PatchError
 * (and changes nothing) when one cannot apply.
 * @param {any} document
 * @param {Array<{op: string, path: Array<string | number>, value?: any}>} ops
 */
export function applyPatch(document, ops) {
  if (!Array.isArray(ops)) throw new PatchError('a patch is a list of operations');
  if (ops.length > MAX_PATCH_OPERATIONS) throw new PatchError(`more than ${MAX_PATCH_OPERATIONS} operations`);
  let value = document;
  for (const op of ops) {
    if (!op || !['add', 'remove', 'replace'].includes(op.op)) throw new PatchError(`unknown op ${JSON.stringify(op?.op)}`);
    if (!Array.isArray(op.path) || op.path.length > MAX_PATH_DEPTH) throw new PatchError('a path is a list of at most 64 steps');
    const hasValue = Object.prototype.hasOwnProperty.call(op, 'value');
    if (op.op === 'remove' ? hasValue : !hasValue) throw new PatchError(`${op.op} ${op.op === 'remove' ? 'takes no' : 'needs a'} value`);
    if (op.path.length === 0) {
      if (op.op === 'remove') throw new PatchError('the root cannot be removed');
      value = op.value;
    } else {
      value = at(value, op.path, op);
    }
  }
  return value;
}
