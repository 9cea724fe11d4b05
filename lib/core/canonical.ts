/**
 * The one encoding of arguments, contexts and results, and so the one rule of what the
 * wrapper accepts: a value this walk encodes is one the stores keep and give back
 * exactly; anything else is refused here, before anything is written.
 *
 * Two orders from one walk: canonical (object keys sorted) for keys and fingerprints,
 * and the value's own order (as `JSON.stringify` writes it) for stored results, so a
 * replay gives back the first call's JSON text. No whitespace, and only values that
 * JSON keeps unchanged. Anything
 * JSON would silently drop or flatten (functions, symbols, `undefined` in an array,
 * NaN, Infinity, BigInt, Map, Set, typed arrays, class instances without `toJSON`,
 * cycles) is refused with the path where it sits, because two different calls that
 * encode alike would share a key and one of them would silently not run.
 *
 * This walk happens in JavaScript, not in Rust: only JavaScript can call `toJSON`, run
 * getters and see through proxies exactly as `JSON.stringify` would, and V8 builds the
 * string faster than converting the value into Rust across napi. Rust hashes the text.
 */

/**
 * Arrays and objects nested inside each other, at most. Every store must keep any text
 * this walk writes (serde_json, which the stores' Rust side parses with, stops at 128),
 * and no tool's arguments or result come near it.
 */
export const MAX_DEPTH = 100;

/** Sorted object keys (for hashing) or the value's own key order (for storing). */
type Order = 'sorted' | 'own';

/** A value that cannot take part, with the path segments from where it sits upwards. */
export class Unencodable extends Error {
  readonly segments: Array<string | number> = [];
  /** How to return the value instead (a result's fix), when there is a specific one. */
  fix?: string;
  constructor(readonly what: string) {
    super(what);
  }

  /** `args[1].tags` for root `args` and segments [1, 'tags']. */
  pathFrom(root: string): string {
    let path = root;
    for (let i = this.segments.length - 1; i >= 0; i--) {
      const s = this.segments[i];
      path += typeof s === 'number' ? `[${s}]` : /^[A-Za-z_$][\w$]*$/.test(s) ? `.${s}` : `[${JSON.stringify(s)}]`;
    }
    return path;
  }
}

/** Encodes `value` with object keys sorted; throws `Unencodable` naming what was wrong and where. */
export function canonicalJson(value: unknown): string {
  return encode(value, '', [], 'sorted', 0);
}

/**
 * `canonicalJson` of an argument list the wrapper built itself (a rest parameter, or a
 * slice of one): a plain array without extra properties or another prototype by
 * construction, so only its elements are walked. Every call encodes one, replays included.
 */
export function canonicalArgsJson(args: unknown[]): string {
  return encodeElements(args, [args], 'sorted', 1);
}

/**
 * Encodes a result in its own key order (the text `JSON.stringify` gives), under the same
 * rules, and one more: a replay gives back the parsed text, so the result must be a value
 * that text gives back as itself. An object with `toJSON()` (a `Date`, a `Buffer`, a
 * decimal or date library's instance) is a key's part as its JSON, but as a result it
 * would come back as something else (a `Date` as a string): refused, with how to return it.
 */
export function resultJson(value: unknown): string {
  return encode(value, '', [], 'own', 0);
}

function encode(value: unknown, keyName: string, ancestors: object[], order: Order, depth: number): string {
  switch (typeof value) {
    case 'string':
      return quoted(value);
    case 'number':
      if (Number.isFinite(value)) return String(value);
      throw new Unencodable(`${value} (JSON would turn it into null)`);
    case 'boolean':
      return value ? 'true' : 'false';
    case 'undefined':
      throw new Unencodable('undefined (JSON would drop it or turn it into null)');
    case 'bigint':
      throw new Unencodable('a BigInt (JSON cannot encode it)');
    case 'symbol':
      throw new Unencodable('a symbol (JSON would drop it)');
    case 'function':
      throw new Unencodable('a function (JSON would drop it)');
    default:
      if (value === null) return 'null';
      try {
        return encodeObject(value as object, keyName, ancestors, order, depth);
      } catch (err) {
        if (err instanceof Unencodable) throw err;
        // A proxy trap or a getter threw while we looked at the object itself.
        throw new Unencodable(`an object that could not be read (${errorText(err)})`);
      }
  }
}

function encodeObject(value: object, keyName: string, ancestors: object[], order: Order, depth: number): string {
  if (ancestors.includes(value)) throw new Unencodable('a reference back to one of its own containers (a cycle)');
  if (depth >= MAX_DEPTH || ancestors.length >= 2 * MAX_DEPTH) {
    throw new Unencodable(`nested more than ${MAX_DEPTH} levels deep (arrays and objects inside each other)`);
  }

  if (value instanceof Date && Number.isNaN(value.getTime())) {
    throw new Unencodable('an invalid Date (JSON would turn it into null)');
  }
  const toJSON = (value as { toJSON?: unknown }).toJSON;
  // 'own' order is a stored result's (resultJson): see there.
  if (typeof toJSON === 'function' && order === 'own') throw changesOnReplay(value);
  if (typeof toJSON === 'function') {
    let replaced: unknown;
    try {
      replaced = toJSON.call(value, keyName);
    } catch (err) {
      throw new Unencodable(`an object whose toJSON() threw (${errorText(err)})`);
    }
    ancestors.push(value);
    try {
      return encode(replaced, keyName, ancestors, order, depth);
    } finally {
      ancestors.pop();
    }
  }

  ancestors.push(value);
  try {
    if (Array.isArray(value)) return encodeArray(value, ancestors, order, depth + 1);
    const proto = Object.getPrototypeOf(value);
    if (proto !== Object.prototype && proto !== null) throw new Unencodable(describeInstance(value, proto));
    return encodePlainObject(value as Record<string, unknown>, ancestors, order, depth + 1);
  } finally {
    ancestors.pop();
  }
}

function encodeArray(array: unknown[], ancestors: object[], order: Order, depth: number): string {
  const extra = extraArrayProperty(array);
  if (extra !== undefined) {
    throw new Unencodable(`an array with an own property ${extra} besides its elements (JSON would drop it; a RegExp match array is one)`);
  }
  // Array.prototype is itself an array (in every realm); a subclass's prototype is not.
  const proto = Object.getPrototypeOf(array);
  if (!Array.isArray(proto)) {
    throw new Unencodable(`an instance of ${proto?.constructor?.name || 'an Array subclass'} (JSON would keep only its elements, not its type)`);
  }
  return encodeElements(array, ancestors, order, depth);
}

/** `[...]` of an array's elements; `ancestors` already holds the array. */
function encodeElements(array: unknown[], ancestors: object[], order: Order, depth: number): string {
  let out = '[';
  for (let i = 0; i < array.length; i++) {
    try {
      if (!(i in array)) throw new Unencodable('a hole in a sparse array (JSON would turn it into null)');
      out += (i === 0 ? '' : ',') + encode(array[i], String(i), ancestors, order, depth);
    } catch (err) {
      throw within(err, i);
    }
  }
  return out + ']';
}

/** The first own property of an array that is neither an index nor `length`, if any. */
function extraArrayProperty(array: unknown[]): string | undefined {
  const names = Object.getOwnPropertyNames(array);
  // An array with no extra properties has exactly its indices and `length`: the usual case costs one count.
  if (names.length === array.length + 1) return undefined;
  for (const n of names) {
    if (n === 'length' || !Object.prototype.propertyIsEnumerable.call(array, n)) continue;
    const i = Number(n);
    if (!(Number.isInteger(i) && i >= 0 && i < array.length && String(i) === n)) return JSON.stringify(n);
  }
  for (const s of Object.getOwnPropertySymbols(array)) {
    if (Object.prototype.propertyIsEnumerable.call(array, s)) return String(s);
  }
  return undefined;
}

function encodePlainObject(object: Record<string, unknown>, ancestors: object[], order: Order, depth: number): string {
  const symbols = Object.getOwnPropertySymbols(object);
  for (const s of symbols) {
    if (Object.prototype.propertyIsEnumerable.call(object, s)) {
      throw new Unencodable(`an object with a symbol key ${String(s)} (JSON would drop it)`);
    }
  }
  const keys = order === 'sorted' ? sortedInPlace(Object.keys(object)) : Object.keys(object);
  let out = '{';
  let first = true;
  for (const k of keys) {
    try {
      const v = object[k];
      // JSON leaves out a property whose value is undefined; so do we: `{a: 1, b: undefined}`
      // and `{a: 1}` are the same call (an optional field left unset).
      if (v === undefined) continue;
      out += (first ? '' : ',') + quoted(k) + ':' + encode(v, k, ancestors, order, depth);
      first = false;
    } catch (err) {
      throw within(err, k);
    }
  }
  return out + '}';
}

/**
 * `keys.sort()`, the same order (UTF-16 code units), for an object's own keys. A few keys
 * are sorted where they lie: `Array.prototype.sort` copies the array into a work area of
 * its own first, and every call sorts the keys of its arguments.
 */
function sortedInPlace(keys: string[]): string[] {
  if (keys.length > INSERTION_SORTED) return keys.sort();
  for (let i = 1; i < keys.length; i++) {
    const k = keys[i];
    let j = i - 1;
    for (; j >= 0 && keys[j] > k; j--) keys[j + 1] = keys[j];
    keys[j + 1] = k;
  }
  return keys;
}

/** More keys than this go to `sort()`: insertion sort's work grows with the square. */
const INSERTION_SORTED = 16;

/**
 * `JSON.stringify(text)`, the same text. A short string with nothing to escape (most keys
 * and ids) is quoted here: a call into the JSON builtin costs more than the scan, and every
 * call, replays included, encodes a handful of such strings.
 */
function quoted(text: string): string {
  if (text.length > SCANNED_LENGTH) return JSON.stringify(text);
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    // What JSON.stringify escapes: control characters, '"', '\\', and (well-formed
    // JSON.stringify) any surrogate, of which only a lone one is escaped: it decides.
    if (c < 0x20 || c === 0x22 || c === 0x5c || (c >= 0xd800 && c <= 0xdfff)) return JSON.stringify(text);
  }
  return '"' + text + '"';
}

/** Longer strings go to JSON.stringify at once: its own scan is faster than a loop here. */
const SCANNED_LENGTH = 64;

function within(err: unknown, segment: string | number): Unencodable {
  const problem = err instanceof Unencodable ? err : new Unencodable(`a value that could not be read (${errorText(err)})`);
  problem.segments.push(segment);
  return problem;
}

function describeInstance(value: object, proto: object): string {
  if (value instanceof Map) return 'a Map (JSON would turn it into {})';
  if (value instanceof Set) return 'a Set (JSON would turn it into {})';
  if (ArrayBuffer.isView(value) || value instanceof ArrayBuffer) {
    return `a ${proto.constructor?.name ?? 'typed array'} (JSON would flatten it)`;
  }
  if (value instanceof Promise) return 'a Promise (await it before the call)';
  if (value instanceof String || value instanceof Number || value instanceof Boolean) {
    return `a boxed ${proto.constructor.name} (new ${proto.constructor.name}(...)); pass the primitive value`;
  }
  const name = typeof proto.constructor === 'function' && proto.constructor.name ? proto.constructor.name : 'an unnamed class';
  return `an instance of ${name} without toJSON() (JSON would keep only its own fields, not its type)`;
}

/**
 * `value` with every object that has `toJSON()` (a `Date`, ...) replaced by what it returns,
 * as `JSON.stringify` would, and nothing else changed (containers are copied only where
 * something inside them was replaced). For the framework helpers: a framework turns a
 * tool's result into text for the model, so a `Date` there is its ISO string either way;
 * handing the framework that string on the first call too makes the first call and its
 * replays one value. Anything else JSON cannot keep is left for `resultJson` to refuse.
 */
export function withToJsonApplied(value: unknown, depth = 0, seen: object[] = []): unknown {
  if (value === null || typeof value !== 'object' || depth > MAX_DEPTH || seen.includes(value)) return value;
  const toJSON = (value as { toJSON?: unknown }).toJSON;
  if (typeof toJSON === 'function') {
    try {
      return withToJsonApplied(toJSON.call(value, ''), depth + 1, seen);
    } catch {
      return value; // resultJson says what went wrong
    }
  }
  seen.push(value);
  try {
    if (Array.isArray(value)) {
      let copy: unknown[] | undefined;
      value.forEach((v, i) => {
        const w = withToJsonApplied(v, depth + 1, seen);
        if (w !== v) (copy ??= [...value])[i] = w;
      });
      return copy ?? value;
    }
    const proto = Object.getPrototypeOf(value);
    if (proto !== Object.prototype && proto !== null) return value;
    let copy: Record<string, unknown> | undefined;
    for (const [k, v] of Object.entries(value)) {
      const w = withToJsonApplied(v, depth + 1, seen);
      if (w !== v) (copy ??= { ...(value as Record<string, unknown>) })[k] = w;
    }
    return copy ?? value;
  } finally {
    seen.pop();
  }
}

/** A result part with `toJSON()`: what a replay would give back instead, and how to return it. */
function changesOnReplay(value: object): Unencodable {
  if (value instanceof Date) {
    const problem = new Unencodable('a Date, which a replay would give back as a string (its JSON), so the first call and its replays would return different values');
    problem.fix = 'return the date as a string (date.toISOString()) or a number (date.getTime()), and make it a Date where you use it';
    return problem;
  }
  const proto = Object.getPrototypeOf(value) as { constructor?: { name?: string } } | null;
  const name = proto?.constructor?.name || 'an object';
  const problem = new Unencodable(`an instance of ${name} with toJSON(), which a replay would give back as what toJSON() returns, not as ${name === 'an object' ? 'that object' : `a ${name}`}`);
  problem.fix = 'return what toJSON() returns (value.toJSON()), or the fields you need, and rebuild the object where you use it';
  return problem;
}

function errorText(err: unknown): string {
  try {
    return err instanceof Error ? `${err.name}: ${err.message}` : String(err);
  } catch {
    return 'an unprintable error';
  }
}
