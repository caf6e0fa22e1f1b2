/**
 * `document` with every op of `ops` applied, in order; throws PatchError
 * (and changes nothing) when one cannot apply.
 * @param {any} document
 * @param {Array<{op: string, path: Array<string | number>, value?: any}>} ops
 */
export function applyPatch(document: any, ops: Array<{
    op: string;
    path: Array<string | number>;
    value?: any;
}>): any;
/** Operations one list may hold. */
export const MAX_PATCH_OPERATIONS: 1024;
/** Steps one path may hold. */
export const MAX_PATH_DEPTH: 64;
/** Why a patch could not apply. */
export class PatchError extends Error {
}
