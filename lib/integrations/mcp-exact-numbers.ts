/**
 * Numbers through the proxy exactly. The SDK reads JSON with `JSON.parse`, which keeps
 * every number as a double: `1790000000000000001` would arrive as `1790000000000000000`,
 * be forwarded so, and key one call with `1790000000000000002`. (Node 20 has neither
 * `JSON.rawJSON` nor the reviver's source text.) So the proxy's readers find, in the raw
 * line, each number a double would change, and put a placeholder string in its place,
 * holding the number's exact decimal value; its writers put the number back:
 * - forwarded, the server gets the number the client sent (and the client the server's);
 * - keyed, two distinct numbers are two distinct strings, so two calls never share a key,
 *   and one number written two ways (`1790000000000000001`, `1.790000000000000001e18`)
 *   is one placeholder, so one call;
 * - stored, a result's numbers replay exactly.
 * No string from outside may look like a placeholder (it would leave as a number): a
 * message that carries one is refused (see stdio.ts).
 */

/** What a placeholder starts with: a NUL, which no tool name, key or text has in practice. */
export const PLACEHOLDER = '\u0000idempotent-tools:number:';
/** The same, as `JSON.stringify` writes it inside a string. */
const PLACEHOLDER_JSON = JSON.stringify(PLACEHOLDER).slice(1, -1);

/** A decimal's exact value: its significant digits and the power of ten of the last one. */
function decimal(text: string): { negative: boolean; digits: string; exponent: number } {
  const m = /^(-?)(\d+)(?:\.(\d+))?(?:[eE]([+-]?\d+))?$/.exec(text);
  if (m === null) return { negative: false, digits: '', exponent: 0 };
  let digits = m[2] + (m[3] ?? '');
  let exponent = Number(m[4] ?? 0) - (m[3] ?? '').length;
  digits = digits.replace(/^0+/, '');
  const trailing = /0*$/.exec(digits)![0].length;
  digits = digits.slice(0, digits.length - trailing);
  exponent += trailing;
  // Every zero is one zero, whatever its sign (JSON.stringify(-0) is "0").
  return { negative: digits.length > 0 && m[1] === '-', digits, exponent: digits.length > 0 ? exponent : 0 };
}

/** Whether `text`, a JSON number, goes through JSON.parse and JSON.stringify as the same
 * decimal value (`0.1` does, `1e3` does as `1000`; `1790000000000000001` and `1e400` do not). */
export function keptExactly(text: string): boolean {
  const value = Number(text);
  if (!Number.isFinite(value)) return false;
  // String(value) is what JSON.stringify writes: the shortest decimal that reads back as
  // the same double. The number is kept only if that decimal has `text`'s own value.
  const a = decimal(text);
  const b = decimal(String(value));
  return a.negative === b.negative && a.digits === b.digits && a.exponent === b.exponent;
}

/** One text for one value: the significant digits, then the exponent if not zero. */
function canonical(text: string): string {
  const { negative, digits, exponent } = decimal(text);
  return `${negative ? '-' : ''}${digits}${exponent === 0 ? '' : `e${exponent}`}`;
}

const NUMBER = /-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?/y;

/** Calls `each(start, end, isString)` for every string and number token of a JSON text. */
function tokens(json: string, each: (start: number, end: number, isString: boolean) => void): void {
  for (let i = 0; i < json.length; i++) {
    const c = json.charCodeAt(i);
    if (c === 0x22) {
      const start = i;
      // To the closing quote, past escapes.
      for (i++; i < json.length && json.charCodeAt(i) !== 0x22; i++) if (json.charCodeAt(i) === 0x5c) i++;
      each(start, i + 1, true);
      continue;
    }
    if (c === 0x2d || (c >= 0x30 && c <= 0x39)) {
      NUMBER.lastIndex = i;
      const m = NUMBER.exec(json);
      if (m === null) continue;
      each(i, i + m[0].length, false);
      i += m[0].length - 1;
    }
  }
}

/** `line` with every number a double would change written as a placeholder string, or
 * `line` itself when it has none (most lines). */
export function withPlaceholders(line: string): string {
  // A double keeps any decimal of up to 15 significant digits whose exponent has at most
  // two digits: only a longer run of digits, or a longer exponent, can lose anything.
  if (!/\d[\d.]{15}|[eE][+-]?\d{3}/.test(line)) return line;
  let out = '';
  let from = 0;
  tokens(line, (start, end, isString) => {
    if (isString) return;
    const text = line.slice(start, end);
    if (keptExactly(text)) return;
    out += line.slice(from, start) + JSON.stringify(PLACEHOLDER + canonical(text));
    from = end;
  });
  return from === 0 ? line : out + line.slice(from);
}

/** `json` (as `JSON.stringify` wrote it) with every placeholder string back as its number. */
export function withNumbers(json: string): string {
  if (!json.includes(PLACEHOLDER_JSON)) return json;
  const quoted = `"${PLACEHOLDER_JSON}`;
  let out = '';
  let from = 0;
  tokens(json, (start, end, isString) => {
    if (!isString || !json.startsWith(quoted, start)) return;
    const number = json.slice(start + quoted.length, end - 1);
    if (!/^-?\d+(?:e-?\d+)?$/.test(number)) return;
    out += json.slice(from, start) + number;
    from = end;
  });
  return from === 0 ? json : out + json.slice(from);
}

/** The number a placeholder stands for, if `value` is one. */
export function placeholderNumber(value: unknown): string | undefined {
  return typeof value === 'string' && value.startsWith(PLACEHOLDER) ? value.slice(PLACEHOLDER.length) : undefined;
}

/** Whether a message read from outside already has a string that looks like a placeholder. */
export function looksLikePlaceholder(value: unknown): boolean {
  if (typeof value === 'string') return value.startsWith(PLACEHOLDER);
  if (value === null || typeof value !== 'object') return false;
  if (Array.isArray(value)) return value.some(looksLikePlaceholder);
  return Object.entries(value).some(([k, v]) => k.startsWith(PLACEHOLDER) || looksLikePlaceholder(v));
}

/** Whether a raw JSON line could hold a NUL in a string (JSON writes it only as \u0000). */
export function mayHoldNul(line: string): boolean {
  return /\\u0000/i.test(line);
}
