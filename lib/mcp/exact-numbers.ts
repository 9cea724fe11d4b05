/**
 * Numbers the proxy would change. The SDK reads JSON with `JSON.parse`, which keeps
 * every number as a double: `1790000000000000001` arrives as `1790000000000000000`, is
 * forwarded so, and keys one call with `1790000000000000002`. A number whose value the
 * double does not carry exactly is found here, in the raw line, so that its request can
 * be refused before anything runs: never forward, nor guard, a number that was changed.
 */

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

const NUMBER = /-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?/y;

/** The numbers of a JSON text that JSON.parse does not keep exactly, as written. */
export function inexactNumbers(json: string): string[] {
  // Most lines have no number long enough to lose anything (a double keeps 15 digits).
  if (!/\d[\d.]{15}|[eE][+-]?\d/.test(json)) return [];
  const found: string[] = [];
  for (let i = 0; i < json.length; i++) {
    const c = json.charCodeAt(i);
    if (c === 0x22) {
      // A string: skip to its closing quote, past escapes.
      for (i++; i < json.length && json.charCodeAt(i) !== 0x22; i++) if (json.charCodeAt(i) === 0x5c) i++;
      continue;
    }
    if (c === 0x2d || (c >= 0x30 && c <= 0x39)) {
      NUMBER.lastIndex = i;
      const m = NUMBER.exec(json);
      if (m === null) continue;
      if (!keptExactly(m[0])) found.push(m[0]);
      i += m[0].length - 1;
    }
  }
  return found;
}
