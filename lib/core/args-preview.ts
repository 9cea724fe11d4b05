/**
 * The opt-in preview of a call's arguments (`idempotent(fn, { preview: true })`), kept
 * in the record's `meta.argsPreview` so that `inspect` and the inspector page can tell
 * calls apart. Off by default: arguments often hold personal data. When on, the rules of
 * REDACTION_RULES (one table: sensitive names, header tuples and lines, credentials in
 * strings and URLs, JSON inside strings, card numbers, private keys, bytes, email
 * addresses) replace what they find, and the text is capped at PREVIEW_MAX_CHARS.
 * Building a preview never throws: it describes the call, it must not change it.
 */

import type { RecordMeta } from './store.js';

/** `true`: preview the arguments; a function: preview what it returns (say, one field). */
export type ArgsPreviewOption<A extends unknown[]> = boolean | ((...args: A) => unknown);

export const PREVIEW_MAX_CHARS = 200;
export const REDACTED = '[redacted]';

/**
 * Names (object keys, header names, query parameters) whose values are never shown,
 * matched case-insensitively anywhere in the name once `_`, `-`, `.` and spaces are
 * removed (so `accessToken`, `api_key`, `cardNumber`, `X-Authorization`, `db_pwd` all
 * match). Over-redacting (`discard`, `author`, `compass`) is the safe side.
 */
export const SENSITIVE_KEY_PARTS = [
  'password', 'passwd', 'pass', 'pwd', 'passphrase', 'secret', 'token', 'apikey', 'authorization', 'auth',
  'credential', 'private', 'cookie', 'session', 'signature', 'card', 'cvv', 'cvc', 'iban', 'ssn', 'email',
] as const;

/** Whole names that are secrets as query parameters and fields (`?key=`, `?sig=`, `code`). */
export const SENSITIVE_NAMES = ['key', 'sig', 'code', 'pin', 'otp', 'jwt', 'sid'] as const;

const MAX_DEPTH = 6;
const MAX_ENTRIES = 50;
/**
 * Strings are searched this far (the preview shows at most 200 characters of one, and
 * every rule still finds a secret that the cut leaves half); JSON inside a string is
 * parsed whole up to MAX_JSON.
 */
const MAX_SCANNED = 4 * 1024;
const MAX_JSON = 1024 * 1024;

export function isSensitiveKey(key: string): boolean {
  const k = key.toLowerCase().replace(/[\s_.-]/g, '');
  return SENSITIVE_KEY_PARTS.some((part) => k.includes(part)) || (SENSITIVE_NAMES as readonly string[]).includes(k);
}

/** A payment card number: 13 to 19 digits, the networks' first digit (2 to 6), Luhn-valid. */
function isCardNumber(digits: string): boolean {
  if (!/^[2-6]\d{12,18}$/.test(digits)) return false;
  let sum = 0;
  for (let i = 0; i < digits.length; i++) {
    let d = digits.charCodeAt(digits.length - 1 - i) - 48;
    if (i % 2 === 1) {
      d *= 2;
      if (d > 9) d -= 9;
    }
    sum += d;
  }
  return sum % 10 === 0;
}

/** Runs of 13 to 19 digits, which spaces or dashes may group. */
const DIGIT_RUN = /(?<!\d)\d(?:[ -]?\d){12,18}(?!\d)/g;
const PEM_PRIVATE_KEY = /-----BEGIN ([A-Z0-9 ]*)PRIVATE KEY-----[\s\S]*?(?:-----END \1PRIVATE KEY-----|$)/g;
const HEADER_LINE = /^([ \t]*)([A-Za-z0-9_-]+)([ \t]*:[ \t]*)(.*)$/gm;
const AUTH_SCHEME = /\b(Bearer|Basic|Digest|Negotiate)([ \t]+)[A-Za-z0-9._~+/=-]+/gi;
const URL_PASSWORD = /(\b[a-z][a-z0-9+.-]*:\/\/[^\s:@/?#]*:)[^\s@/?#]*@/gi;
const QUERY_PARAMETER = /(^|[?&;#])([^=&;#?\s]+)=([^&;#\s]*)/g;
/** Bounded parts (an address's own limits), so a long string is searched in linear time. */
const EMAIL = /[A-Za-z0-9._%+-]{1,64}@[A-Za-z0-9-]{1,63}(?:\.[A-Za-z0-9-]{1,63})+/;
/** A `"name": value` pair in JSON text that does not parse (cut short, or not quite JSON). */
const JSON_PAIR = /("((?:[^"\\]|\\.){1,128})"[ \t]*:[ \t]*)("(?:[^"\\]|\\.)*"?|[^,}\]\s]+)/g;

/** Byte containers: shown by size only (a Buffer's toJSON would list every byte). */
function byteLength(value: object): number | undefined {
  if (ArrayBuffer.isView(value)) return value.byteLength;
  if (value instanceof ArrayBuffer) return value.byteLength;
  if (typeof SharedArrayBuffer !== 'undefined' && value instanceof SharedArrayBuffer) return value.byteLength;
  return undefined;
}

type Recurse = (value: unknown) => unknown;

/** One redaction rule: what it finds, where it looks, and what it leaves. */
export type RedactionRule =
  | { kind: string; on: 'name'; matches: (name: string) => boolean }
  | { kind: string; on: 'string'; apply: (text: string, recurse: Recurse, whole: string) => string }
  | { kind: string; on: 'number'; apply: (digits: string) => unknown }
  | { kind: string; on: 'array'; apply: (items: readonly unknown[]) => unknown[] | undefined }
  | { kind: string; on: 'object'; apply: (value: object) => unknown };

/**
 * The redaction rules, one table: every value of the arguments meets the rules for its
 * type, in this order (string rules one after the other, each on what the last left).
 */
export const REDACTION_RULES: readonly RedactionRule[] = [
  // Object keys; header names and query parameters below ask the same question.
  { kind: 'sensitive name', on: 'name', matches: isSensitiveKey },
  // fetch's headers as [[name, value]] (and a Map's or Headers' entries).
  {
    kind: 'header tuple',
    on: 'array',
    apply: (items) => (items.length === 2 && typeof items[0] === 'string' && isSensitiveKey(items[0]) ? [items[0], REDACTED] : undefined),
  },
  { kind: 'bytes', on: 'object', apply: (value) => { const n = byteLength(value); return n === undefined ? undefined : `[${n} bytes]`; } },
  { kind: 'card number given as a number', on: 'number', apply: (digits) => (isCardNumber(digits) ? REDACTED : undefined) },
  {
    kind: 'JSON inside a string',
    on: 'string',
    apply: (text, recurse, whole) => {
      if (!/^\s*[[{]/.test(text)) return text;
      try {
        if (whole.length > MAX_JSON) throw new RangeError('too long to parse');
        return JSON.stringify(recurse(JSON.parse(whole))).slice(0, MAX_SCANNED);
      } catch {
        // Cut short or not quite JSON: the pairs whose names are sensitive, by pattern.
        return text.replace(JSON_PAIR, (all, head: string, name: string) => (isSensitiveKey(name) ? `${head}"${REDACTED}"` : all));
      }
    },
  },
  { kind: 'PEM private key', on: 'string', apply: (text) => text.replace(PEM_PRIVATE_KEY, '[redacted private key]') },
  {
    kind: 'header line',
    on: 'string',
    apply: (text) => text.replace(HEADER_LINE, (all, lead: string, name: string, colon: string) => (isSensitiveKey(name) ? `${lead}${name}${colon}${REDACTED}` : all)),
  },
  { kind: 'authorization scheme', on: 'string', apply: (text) => text.replace(AUTH_SCHEME, `$1$2${REDACTED}`) },
  { kind: 'password in a URL', on: 'string', apply: (text) => text.replace(URL_PASSWORD, `$1${REDACTED}@`) },
  {
    kind: 'secret query parameter',
    on: 'string',
    apply: (text) =>
      text.replace(QUERY_PARAMETER, (all, lead: string, name: string) => {
        let decoded = name;
        try {
          decoded = decodeURIComponent(name);
        } catch {
          // a malformed escape: judge the name as written
        }
        return isSensitiveKey(decoded) ? `${lead}${name}=${REDACTED}` : all;
      }),
  },
  // Whole strings, as before: an address or a card number says who the call is about.
  { kind: 'email address', on: 'string', apply: (text) => (EMAIL.test(text) ? REDACTED : text) },
  {
    kind: 'card number',
    on: 'string',
    apply: (text) => ((text.match(DIGIT_RUN) ?? []).some((run) => isCardNumber(run.replace(/[ -]/g, ''))) ? REDACTED : text),
  },
];

const rulesOn = <K extends RedactionRule['on']>(on: K) =>
  REDACTION_RULES.filter((r): r is Extract<RedactionRule, { on: K }> => r.on === on);
const NAME_RULES = rulesOn('name');
const STRING_RULES = rulesOn('string');
const NUMBER_RULES = rulesOn('number');
const ARRAY_RULES = rulesOn('array');
const OBJECT_RULES = rulesOn('object');

const sensitiveName = (name: string) => NAME_RULES.some((r) => r.matches(name));

function redactString(value: string, depth: number, seen: Set<object>): string {
  let text = value.length > MAX_SCANNED ? value.slice(0, MAX_SCANNED) : value;
  const recurse: Recurse = (v) => redact(v, depth + 1, seen);
  for (const rule of STRING_RULES) {
    text = rule.apply(text, recurse, value);
    if (text === REDACTED) return text;
  }
  return text.length > PREVIEW_MAX_CHARS ? text.slice(0, PREVIEW_MAX_CHARS) : text;
}

function redactNumber(digits: string, shown: unknown): unknown {
  for (const rule of NUMBER_RULES) {
    const out = rule.apply(digits);
    if (out !== undefined) return out;
  }
  return shown;
}

/** A JSON-ready copy of `value` with sensitive parts replaced; bounded in depth and size. */
function redact(value: unknown, depth: number, seen: Set<object>): unknown {
  switch (typeof value) {
    case 'string':
      return redactString(value, depth, seen);
    case 'number':
      if (!Number.isFinite(value)) return String(value);
      // Above 2^53 the digits shown are not the ones given: a card there is redacted unchecked.
      if (Number.isInteger(value) && value > 0) {
        const digits = BigInt(value).toString();
        if (!Number.isSafeInteger(value) && /^[2-6]\d{15,18}$/.test(digits)) return REDACTED;
        return redactNumber(digits, value);
      }
      return value;
    case 'boolean':
      return value;
    case 'bigint':
      return redactNumber(value.toString(), `${value}n`);
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
  for (const rule of OBJECT_RULES) {
    const out = rule.apply(obj);
    if (out !== undefined) return out;
  }
  if (depth >= MAX_DEPTH) return Array.isArray(obj) ? '[…]' : '{…}';
  seen.add(obj);
  try {
    if (obj instanceof Date) return Number.isNaN(obj.getTime()) ? 'Invalid Date' : obj.toISOString();
    if (obj instanceof URL || obj instanceof URLSearchParams) return redactString(obj.toString(), depth, seen);
    // Entries, as [name, value] tuples: the header tuple rule sees a Map's or Headers' pairs.
    if (obj instanceof Map || (typeof Headers !== 'undefined' && obj instanceof Headers)) {
      return redact([...(obj as Map<unknown, unknown>).entries()], depth, seen);
    }
    if (Array.isArray(obj)) {
      for (const rule of ARRAY_RULES) {
        const out = rule.apply(obj);
        if (out !== undefined) return out.map((v) => redact(v, depth + 1, seen));
      }
      const out = obj.slice(0, MAX_ENTRIES).map((v) => redact(v, depth + 1, seen));
      if (obj.length > MAX_ENTRIES) out.push(`…${obj.length - MAX_ENTRIES} more`);
      return out;
    }
    const out: Record<string, unknown> = {};
    const keys = Object.keys(obj);
    for (const k of keys.slice(0, MAX_ENTRIES)) {
      out[k] = sensitiveName(k) ? REDACTED : redact((obj as Record<string, unknown>)[k], depth + 1, seen);
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
