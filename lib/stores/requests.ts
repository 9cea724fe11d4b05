/**
 * What one call's request must be before it joins a batch that crosses into Rust. The
 * native stores send the calls of one turn of the event loop together (batch.ts for SQLite
 * and PostgreSQL, one string per turn for Redis), and there a request that cannot cross (a
 * string napi would change, a field napi cannot convert, a length that breaks Redis's
 * framing) would fail every call of the batch. So each request is checked here, per call,
 * before it is queued: a bad one is refused alone, with a TypeError naming its field, and
 * never joins (nor holds up) a batch. The fields are the Store interface's (core/store.ts);
 * the strings are held to exact-strings.ts's rule, and to the store's own rule for the
 * text it is given, if it has one (PostgreSQL: no U+0000).
 */

import { checkWellFormed } from '../core/exact-strings.js';
import { RefusedInputError } from '../core/refused-input.js';
import type { AcquireRequest, SettleRequest } from '../core/store.js';

/**
 * A store's own rule for the strings it is given as they are (keys, names, fingerprints,
 * tokens, result texts): throws `RefusedInputError` naming `field`. JSON texts the store
 * makes itself (meta, errors) escape what a rule could refuse.
 */
export type TextRule = (value: string, field: string, where: string) => void;

function kind(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  return typeof value;
}

function refuse(where: string, field: string, what: string, value: unknown): never {
  throw new RefusedInputError(
    `idempotent-tools: ${where}: "${field}" must be ${what}, not ${kind(value)} ` +
      '(a request of the Store interface; see "Your own store" in docs/stores.md)',
  );
}

function text(value: unknown, field: string, where: string, rule: TextRule | undefined): void {
  if (typeof value !== 'string') refuse(where, field, 'a string', value);
  checkWellFormed(value, field, where);
  rule?.(value, field, where);
}

function optionalText(value: unknown, field: string, where: string, rule: TextRule | undefined): void {
  if (value === undefined || value === null) return;
  if (typeof value !== 'string') refuse(where, field, 'a string or absent', value);
  checkWellFormed(value, field, where);
  rule?.(value, field, where);
}

function number(value: unknown, field: string, where: string): void {
  if (typeof value !== 'number') refuse(where, field, 'a number', value);
}

function optionalNumber(value: unknown, field: string, where: string): void {
  if (value !== undefined && value !== null && typeof value !== 'number') refuse(where, field, 'a number or absent', value);
}

/** Checks an acquire; returns its `meta` as the JSON text that crosses (undefined without meta). */
export function checkAcquire(r: AcquireRequest, where: string, rule?: TextRule): string | undefined {
  if (r === null || typeof r !== 'object') refuse(where, 'request', 'an object', r);
  text(r.key, 'key', where, rule);
  text(r.name, 'name', where, rule);
  text(r.fingerprint, 'fingerprint', where, rule);
  number(r.leaseMs, 'leaseMs', where);
  optionalNumber(r.ttlMs, 'ttlMs', where);
  if (typeof r.force !== 'boolean') refuse(where, 'force', 'true or false', r.force);
  if (r.meta === undefined || r.meta === null) return undefined;
  let meta: string | undefined;
  try {
    meta = JSON.stringify(r.meta);
  } catch (err) {
    throw new RefusedInputError(`idempotent-tools: ${where}: "meta" must be JSON data (${(err as Error)?.message ?? err})`);
  }
  if (typeof meta !== 'string') refuse(where, 'meta', 'JSON data (an object)', r.meta);
  return meta;
}

/** Checks a complete or fail. */
export function checkSettle(r: SettleRequest, where: string, rule?: TextRule): void {
  if (r === null || typeof r !== 'object') refuse(where, 'request', 'an object', r);
  text(r.key, 'key', where, rule);
  text(r.token, 'token', where, rule);
  optionalText(r.resultJson, 'resultJson', where, rule);
  const e = r.error as unknown;
  if (e !== undefined && e !== null) {
    const { name, message } = e as { name?: unknown; message?: unknown };
    if (typeof e !== 'object' || typeof name !== 'string' || typeof message !== 'string') {
      refuse(where, 'error', '{ name, message } (two strings) or absent', e);
    }
  }
  optionalNumber(r.ttlMs, 'ttlMs', where);
  optionalNumber(r.durationMs, 'durationMs', where);
}

/** Checks a renewal. */
export function checkRenew(key: string, token: string, leaseMs: number, where: string, rule?: TextRule): void {
  text(key, 'key', where, rule);
  text(token, 'token', where, rule);
  number(leaseMs, 'leaseMs', where);
}
