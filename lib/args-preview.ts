/**
 * The opt-in preview of a call's arguments (`idempotent(fn, { preview: true })`), kept
 * in the record's `meta.argsPreview` so that `inspect` and the inspector page can tell
 * calls apart. Off by default: arguments often hold personal data. When on, values
 * under sensitive-looking keys, and strings that look like an email address or a card
 * number, are replaced by "[redacted]", and the text is capped at PREVIEW_MAX_CHARS.
 * Building a preview never throws: it describes the call, it must not change it.
 */

import type { RecordMeta } from './store.js';

/** `true`: preview the arguments; a function: preview what it returns (say, one field). */
export type ArgsPreviewOption<A extends unknown[]> = boolean | ((...args: A) => unknown);

export const PREVIEW_MAX_CHARS = 200;
export const REDACTED = '[redacted]';

/**
 * Object keys whose values are never shown, matched case-insensitively anywhere in the
 * key once `_`, `-` and spaces are removed (so `accessToken`, `api_key`, `cardNumber`,
 * `X-Authorization` all match). Over-redacting (`discard`) is the safe side.
 */
export const SENSITIVE_KEY_PARTS = [
  'password', 'passwd', 'secret', 'token', 'apikey', 'authorization', 'cookie',
  'card', 'cvv', 'cvc', 'iban', 'ssn', 'email',
] as const;

const EMAIL = /[^\s@]+@[^\s@]+\.[^\s@]+/;
/** 13 to 19 digits, optionally grouped by spaces or dashes: a payment card number. */
const CARD_NUMBER = /\b(?:\d[ -]?){12,18}\d\b/;

const MAX_DEPTH = 6;
const MAX_ENTRIES = 50;

export function isSensitiveKey(key: string): boolean {
  const k = key.toLowerCase().replace(/[\s_-]/g, '');
  return SENSITIVE_KEY_PARTS.some((part) => k.includes(part));
}

/** A JSON-ready copy of `value` with sensitive parts replaced; bounded in depth and size. */
function redact(value: unknown, depth: number, seen: Set<object>): unknown {
  switch (typeof value) {
    case 'string':
      if (EMAIL.test(value) || CARD_NUMBER.test(value)) return REDACTED;
      return value.length > PREVIEW_MAX_CHARS ? value.slice(0, PREVIEW_MAX_CHARS) : value;
    case 'number':
      return Number.isFinite(value) ? value : String(value);
    case 'boolean':
      return value;
    case 'bigint':
      return `${value}n`;
    case 'undefined':
      return null;
    case 'function':
      return `[function ${value.name || 'anonymous'}]`;
    case 'symbol':
      return value.toString();
  }
  if (value === null) return null;
  const obj = value as object;
  if (seen.has(obj)) return '[cycle]';
  if (depth >= MAX_DEPTH) return Array.isArray(obj) ? '[…]' : '{…}';
  seen.add(obj);
  try {
    if (obj instanceof Date) return Number.isNaN(obj.getTime()) ? 'Invalid Date' : obj.toISOString();
    if (Array.isArray(obj)) {
      const out = obj.slice(0, MAX_ENTRIES).map((v) => redact(v, depth + 1, seen));
      if (obj.length > MAX_ENTRIES) out.push(`…${obj.length - MAX_ENTRIES} more`);
      return out;
    }
    const out: Record<string, unknown> = {};
    const keys = Object.keys(obj);
    for (const k of keys.slice(0, MAX_ENTRIES)) {
      out[k] = isSensitiveKey(k) ? REDACTED : redact((obj as Record<string, unknown>)[k], depth + 1, seen);
    }
    if (keys.length > MAX_ENTRIES) out['…'] = `${keys.length - MAX_ENTRIES} more keys`;
    return out;
  } finally {
    seen.delete(obj);
  }
}

/** The preview text of `value`: redacted JSON, at most PREVIEW_MAX_CHARS characters. */
export function previewText(value: unknown): string {
  let text: string;
  try {
    text = JSON.stringify(redact(value, 0, new Set())) ?? 'undefined';
  } catch (err) {
    // A getter or proxy that throws while being read.
    text = `[no preview: ${err instanceof Error ? err.message : 'unreadable value'}]`;
  }
  return text.length > PREVIEW_MAX_CHARS ? text.slice(0, PREVIEW_MAX_CHARS - 1) + '…' : text;
}

/** Checks the option at wrap time. */
export function resolvePreview<A extends unknown[]>(value: unknown): ArgsPreviewOption<A> {
  if (value === undefined || value === null || value === false) return false;
  if (value === true || typeof value === 'function') return value as ArgsPreviewOption<A>;
  throw new TypeError(
    `idempotent(): option "preview" must be true, false or a function (...args) => value, not ${typeof value}`,
  );
}

/** `meta` with the arguments' preview added when the option asks for one. */
export function withArgsPreview<A extends unknown[]>(
  meta: RecordMeta | undefined,
  preview: ArgsPreviewOption<A>,
  args: A,
): RecordMeta | undefined {
  if (preview === false) return meta;
  let argsPreview: string;
  if (preview === true) {
    argsPreview = previewText(args);
  } else {
    try {
      argsPreview = previewText(preview(...args));
    } catch (err) {
      argsPreview = `[no preview: the "preview" option threw ${err instanceof Error ? err.message : String(err)}]`.slice(
        0,
        PREVIEW_MAX_CHARS,
      );
    }
  }
  return { ...meta, argsPreview };
}
