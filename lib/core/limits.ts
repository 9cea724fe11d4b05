/**
 * Size limits of a call (`idempotent(fn, { maxKeyBytes, maxArgsBytes, maxResultBytes })`).
 * Without them a 100 MB key was hashed for seconds and a 300 MB result held gigabytes of
 * memory on its way into the store. A key or an argument list over its limit is a
 * `TypeError` before anything runs (no record, fn not run); a result over its limit is
 * the "completed, but its result cannot be stored" case: the side effect happened, so
 * the record is completed without the result, and the call and its replays throw a
 * `TypeError` that says so. Sizes are UTF-8 bytes, of the key as given and of the JSON
 * text that is hashed (arguments) or stored (results).
 */

export interface Limits {
  /** An explicit key's size; within every store's reach (a Postgres index entry holds about 2.7 kB). */
  maxKeyBytes: number;
  /** The arguments as JSON (or what `payload` picks, and the `context` value), as hashed into the key. */
  maxArgsBytes: number;
  /** A result as JSON, as stored (calls and their steps). */
  maxResultBytes: number;
}

export const DEFAULT_LIMITS: Readonly<Limits> = Object.freeze({
  maxKeyBytes: 2048,
  maxArgsBytes: 4 * 1024 * 1024,
  maxResultBytes: 16 * 1024 * 1024,
});

export const LIMIT_OPTIONS = Object.keys(DEFAULT_LIMITS) as Array<keyof Limits>;

/** The limits among `options`, checked (a whole number of bytes, at least 1), defaults filled in. */
export function resolveLimits(options: Record<string, unknown>, fail: (option: string, what: string, Kind?: typeof RangeError) => never): Limits {
  const out = { ...DEFAULT_LIMITS };
  for (const option of LIMIT_OPTIONS) {
    const value = options[option];
    if (value === undefined) continue;
    if (typeof value !== 'number') fail(option, `must be a number of bytes, not ${value === null ? 'null' : typeof value}`);
    if (!Number.isSafeInteger(value) || value < 1) {
      fail(option, `must be a whole number of bytes >= 1 (default ${DEFAULT_LIMITS[option]}), not ${value}`, RangeError);
    }
    out[option] = value;
  }
  return out;
}

/** UTF-8 bytes of `text` when that can be over `max` (each UTF-16 unit is 1 to 3 bytes). */
function bytesOver(text: string, max: number): number | undefined {
  if (text.length * 3 <= max) return undefined;
  const bytes = Buffer.byteLength(text, 'utf8');
  return bytes > max ? bytes : undefined;
}

const over = (bytes: number, max: number, option: keyof Limits, unit = 'bytes') =>
  `${bytes} ${unit}, over the limit of ${max} bytes (the "${option}" option)`;

/** Throws when an explicit key is over `maxKeyBytes`. */
export function checkKeySize(key: string, limits: Limits, name: string): void {
  const bytes = bytesOver(key, limits.maxKeyBytes);
  if (bytes !== undefined) {
    throw new TypeError(
      `idempotent-tools: the key of a call of "${name}" is ${over(bytes, limits.maxKeyBytes, 'maxKeyBytes')}; ` +
        'use a shorter key (a hash of a long one), or raise maxKeyBytes',
    );
  }
}

/**
 * Throws when what identifies the call (its arguments, or what `payload` picks, or the
 * `context` value), as JSON, is over `maxArgsBytes`.
 */
export function checkArgsSize(json: string, limits: Limits, name: string, what: 'arguments' | 'payload' | 'context'): void {
  const bytes = bytesOver(json, limits.maxArgsBytes);
  if (bytes !== undefined) {
    const subject = what === 'arguments' ? 'the arguments of a call of' : `the "${what}" value of a call of`;
    const verb = what === 'arguments' ? 'are' : 'is';
    throw new TypeError(
      `idempotent-tools: ${subject} "${name}" ${verb} ${over(bytes, limits.maxArgsBytes, 'maxArgsBytes', 'bytes as JSON')}; ` +
        'pick the data that identifies the call with the "payload" option, or raise maxArgsBytes',
    );
  }
}

/** Why a result's JSON cannot be stored (over `maxResultBytes`), or undefined when it can. */
export function resultTooLarge(json: string, maxResultBytes: number): string | undefined {
  const bytes = bytesOver(json, maxResultBytes);
  return bytes === undefined ? undefined : `it is ${over(bytes, maxResultBytes, 'maxResultBytes', 'bytes as JSON')}`;
}
