/**
 * Keyed ids: how events, traces and logs name a record without carrying a derived key.
 *
 * A derived key is an unsalted SHA-256 of the name and the arguments: whoever reads it in
 * a trace can recover a low-entropy argument (a PIN, the last four digits of an SSN) by
 * hashing every guess. Telemetry gets `kid_` + an HMAC of the key under a secret that
 * lives in the store itself instead, so only someone who can read the store (and so its
 * results already) can turn ids back into records: the CLI (`inspect --key kid_…`) and
 * the inspector page do.
 *
 * The secret is an ordinary record under a reserved key, written once through the store
 * interface (acquire, then complete: the first writer wins), so every store has one,
 * built in or written by a user, with no schema change; stored keys never change, so an
 * upgrade never re-runs a finished call.
 */

import { randomBytes } from 'node:crypto';

import * as native from './native.js';
import { clearCommand } from './shell.js';
import type { IdempotencyRecord, Store } from './store.js';

/** What every keyed id starts with. */
export const KEY_ID_PREFIX = 'kid_';

/** The reserved key (and name) of the record that holds a store's key-id secret. */
export const KEY_ID_SECRET_KEY = 'idempotent-tools:key-id-secret';

/** A derived key's shape: 64 lowercase hex digits. */
const DERIVED = /^[0-9a-f]{64}$/;
const SECRET = /^[0-9a-f]{64}$/;

/** Whether `key` has a derived key's shape (an explicit key of that shape is treated alike). */
export function looksDerived(key: string): boolean {
  return DERIVED.test(key);
}

/**
 * A record of the package's own, not a call: key and name under `idempotent-tools:` (the
 * keyed-id secret; the turns of OpenAI Agents calls whose model gives no response ids).
 * Calls may not use these (reserved.ts); listings by the CLI and the page leave them out.
 */
export function isInternalRecord(r: Pick<IdempotencyRecord, 'key' | 'name'>): boolean {
  return r.key.startsWith('idempotent-tools:') && r.name.startsWith('idempotent-tools:');
}

let secretFingerprint: string | undefined;
/** The fingerprint the secret's own record is claimed with (its name, no arguments). */
function keyIdSecretFingerprint(): string {
  return (secretFingerprint ??= native.fingerprint(KEY_ID_SECRET_KEY, null));
}

/**
 * The secret a record holds, when the record is the secret's own: completed at the
 * reserved key, under the secret's name and fingerprint, its result 64 hex digits. Any
 * other record there (written through the store interface by other means, by a version
 * that let calls use the key) is not a secret, whatever it holds: were it read, whoever
 * wrote it could reverse the keyed ids in traces.
 */
export function secretOf(r: Pick<IdempotencyRecord, 'key' | 'name' | 'status' | 'result' | 'fingerprint'> | null): string | null {
  if (r === null || r.key !== KEY_ID_SECRET_KEY || r.name !== KEY_ID_SECRET_KEY || r.status !== 'completed') return null;
  if (r.fingerprint !== keyIdSecretFingerprint()) return null;
  return typeof r.result === 'string' && SECRET.test(r.result) ? r.result : null;
}

/**
 * The built-in stores leave the secret's record out of `listRecords` and `listRecent`
 * (it is the library's, not a call); a listing asked with this symbol set keeps it.
 */
export const WITH_KEY_ID_SECRET = Symbol.for('idempotent-tools.with-key-id-secret');

/** `records` without the package's own records (the secret's among them), unless `options` asks for them (WITH_KEY_ID_SECRET). */
export function withoutKeyIdSecret<T extends Pick<IdempotencyRecord, 'key' | 'name'>>(records: T[], options?: object): T[] {
  if (options !== undefined && (options as Record<symbol, unknown>)[WITH_KEY_ID_SECRET] === true) return records;
  return records.some(isInternalRecord) ? records.filter((r) => !isInternalRecord(r)) : records;
}

/**
 * A store whose protocol methods cannot write the secret as they are (idempotentTx's,
 * whose acquire opens the call's transaction) gives a view of itself that can: the
 * same statements, each on its own.
 */
export const KEY_ID_SECRET = Symbol.for('idempotent-tools.key-id-secret');
type SecretWriter = Pick<Store, 'get' | 'acquire' | 'complete'>;
interface OwnSecretWriter {
  [KEY_ID_SECRET](): SecretWriter;
}

const loaded = new WeakMap<object, string>();
/** Stores whose reserved key was found holding another record (warned once). */
const warned = new WeakSet<object>();
const loading = new WeakMap<object, Promise<string | null>>();

/** The keyed id of `key` under `secret`. */
export function keyIdWith(secret: string, key: string): string {
  return KEY_ID_PREFIX + native.keyId(secret, key);
}

/** The store's secret if this process has read it already (no waiting). */
export function cachedKeyIdSecret(store: Store): string | undefined {
  return loaded.get(store);
}

// Not unref'd: a call waits on it (another process writing the secret), and a process whose
// only work is that call must not exit under it.
const settle = (ms: number) => new Promise((done) => setTimeout(done, ms));

/** Reads the secret through the store interface; with `create`, writes one when there is none. */
async function readOrCreate(given: Store, create: boolean): Promise<string | null> {
  const own = (given as unknown as Partial<OwnSecretWriter>)[KEY_ID_SECRET];
  const store: SecretWriter = typeof own === 'function' ? own.call(given) : given;
  // Another process may be writing it right now (a pending claim): look again shortly,
  // for as long as that claim's lease (after which it is taken over).
  for (let attempt = 0; attempt < 200; attempt++) {
    const found = secretOf(await store.get(KEY_ID_SECRET_KEY));
    if (found !== null || !create) return found;
    const claim = await store.acquire({
      key: KEY_ID_SECRET_KEY,
      name: KEY_ID_SECRET_KEY,
      fingerprint: keyIdSecretFingerprint(),
      leaseMs: 5_000,
      force: false,
    });
    if (claim.acquired) {
      const secret = randomBytes(32).toString('hex');
      if (await store.complete({ key: KEY_ID_SECRET_KEY, token: claim.token, resultJson: JSON.stringify(secret) })) return secret;
      continue;
    }
    const theirs = secretOf(claim.record);
    if (theirs !== null) return theirs;
    const r = claim.record;
    if (r.name !== KEY_ID_SECRET_KEY || r.fingerprint !== keyIdSecretFingerprint() || r.status === 'completed') {
      // Not the secret, and never to become it (a record that is not its own holds the
      // key): no keyed id can be made until it is cleared. Telemetry then carries ids
      // that resolve nowhere; it never falls back to the derived key.
      const message =
        `the reserved key ${KEY_ID_SECRET_KEY} holds a record that is not the store's keyed-id secret (name ${JSON.stringify(r.name)}, ` +
        `status ${r.status}); it is ignored. Clear it (${clearCommand(KEY_ID_SECRET_KEY)}) so that a secret can be made`;
      if (!warned.has(given)) {
        warned.add(given);
        process.emitWarning(`idempotent-tools: ${message}`, { type: 'IdempotentToolsWarning', code: 'IDEMPOTENT_TOOLS_KEY_ID_SECRET' });
      }
      throw new Error(message);
    }
    await settle(25); // the secret's own claim, being written by another process
  }
  throw new Error(`the record ${KEY_ID_SECRET_KEY} stayed unresolved; clear it (${clearCommand(KEY_ID_SECRET_KEY)})`);
}

/**
 * The store's key-id secret, read (and, with `create`, made) once per store object.
 * Null when the store holds none and `create` is false.
 */
export async function keyIdSecret(store: Store, { create = true }: { create?: boolean } = {}): Promise<string | null> {
  const known = loaded.get(store);
  if (known !== undefined) return known;
  if (!create) {
    // A look only (the CLI resolving an id): nothing is written, and a miss is not kept.
    const found = await readOrCreate(store, false);
    if (found !== null) loaded.set(store, found);
    return found;
  }
  let pending = loading.get(store);
  if (pending === undefined) {
    pending = readOrCreate(store, true).then(
      (s) => {
        loaded.set(store, s!);
        return s;
      },
      (err) => {
        loading.delete(store); // a store outage: the next call tries again
        throw err;
      },
    );
    loading.set(store, pending);
  }
  return pending;
}

/**
 * The keyed id that events, traces and logs carry for `key` in `store` (`kid_` and 24 hex
 * digits). `idempotent-tools inspect --key <id>` and the inspector page find the record by it.
 */
export async function keyId(store: Store, key: string): Promise<string> {
  if (typeof key !== 'string') throw new TypeError('keyId(store, key): key must be a string');
  const secret = await keyIdSecret(store);
  return keyIdWith(secret!, key);
}

/**
 * How telemetry names `key`: an explicit key as given (the caller chose it, and
 * `inspect --key` takes it), a derived one by its keyed id.
 */
export function keyForTelemetry(secret: string, key: string, derived: boolean): string {
  return derived ? keyIdWith(secret, key) : key;
}
