/**
 * Strings cross into Rust exactly or not at all. napi converts a JavaScript string to
 * UTF-8 and turns every lone UTF-16 surrogate into U+FFFD, so `'order-\uD800'` and
 * `'order-\uDBFF'` would reach the store as one key, and one call would silently replay
 * the other's result. Every string on its way into the native addon is checked here
 * (`native.ts` routes every entry point through `checkArguments`), and a lone surrogate
 * is a `TypeError` naming what carried it. JSON texts pass: `JSON.stringify` writes lone
 * surrogates as ASCII escapes.
 */

import { RefusedInputError } from './refused-input.js';

/** A string that cannot cross into the native addon exactly: bad input, never a store failure. */
export class InexactStringError extends RefusedInputError {}

const isWellFormed = (String.prototype as unknown as { isWellFormed?: () => boolean }).isWellFormed;

function wellFormed(s: string): boolean {
  if (isWellFormed !== undefined) return isWellFormed.call(s);
  return firstLoneSurrogate(s) < 0;
}

function firstLoneSurrogate(s: string): number {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff) {
      const next = s.charCodeAt(i + 1);
      if (next >= 0xdc00 && next <= 0xdfff) {
        i++;
        continue;
      }
      return i;
    }
    if (c >= 0xdc00 && c <= 0xdfff) return i;
  }
  return -1;
}

/** What the user knows each field as (the fields of requests and store options). */
const DESCRIPTIONS: Record<string, string> = {
  key: 'the key (from withKey(), the "key" option, or --key)',
  name: 'the name (the "name" option, or the function\'s own name)',
  path: 'the store\'s "path"',
  url: 'the store\'s "url"',
  prefix: 'the store\'s "prefix"',
  namespace: 'the store\'s "namespace"',
  table: 'the store\'s "table"',
  token: 'the claim\'s token',
  fingerprint: 'the fingerprint',
  context: 'the "context" value',
  payload: 'the arguments (or the "payload" value)',
  resultJson: 'the JSON text of the result',
};

function describe(field: string, where: string): string {
  return DESCRIPTIONS[field] ?? `"${field}" (${where})`;
}

function refuse(s: string, field: string, where: string): never {
  const at = firstLoneSurrogate(s);
  const unit = s.charCodeAt(at).toString(16).toUpperCase();
  throw new InexactStringError(
    `idempotent-tools: ${describe(field, where)} contains a lone UTF-16 surrogate (\\u${unit} at index ${at}), ` +
      'which cannot be stored exactly: on its way into the store it would become U+FFFD, and two different ' +
      'strings would become one. Pass well-formed text (str.toWellFormed() replaces lone surrogates, if that is what you want)',
  );
}

function checkValue(value: unknown, field: string, where: string, depth: number): void {
  if (typeof value === 'string') {
    if (!wellFormed(value)) refuse(value, field, where);
  } else if (value !== null && typeof value === 'object' && depth < 3) {
    // Walked without a list of keys: every call's claim and settle cross in a batch (an
    // array of requests), and Object.keys would build an array per batch and per request.
    // `for...in` also sees inherited fields, as napi, which reads fields by name, does.
    if (Array.isArray(value)) {
      for (let i = 0; i < value.length; i++) checkValue(value[i], field, where, depth + 1);
    } else {
      for (const k in value) checkValue((value as Record<string, unknown>)[k], k, where, depth + 1);
    }
  }
}

/**
 * Throws `InexactStringError` if `value` holds a lone surrogate: for paths that reach a
 * store without crossing the addon (idempotentTx's node-postgres client encodes a lone
 * surrogate as U+FFFD just as napi does). `field` is a key of DESCRIPTIONS.
 */
export function checkWellFormed(value: string, field: string, where: string): void {
  if (!wellFormed(value)) refuse(value, field, where);
}

/**
 * Throws `InexactStringError` if any string among `args` (or in the fields of an object
 * argument) holds a lone surrogate. `params` names the positional arguments.
 */
export function checkArguments(args: ArrayLike<unknown>, params: readonly string[] | undefined, where: string): void {
  for (let i = 0; i < args.length; i++) {
    const a = args[i];
    if (typeof a === 'string') {
      if (!wellFormed(a)) refuse(a, params?.[i] ?? `argument ${i + 1}`, where);
    } else if (a !== null && typeof a === 'object') {
      checkValue(a, params?.[i] ?? `argument ${i + 1}`, where, 0);
    }
  }
}
