/**
 * The compiled Rust addon (loaded by binding.js: a prebuilt platform package, or a build from source in native/), with every entry point
 * guarded at load: no string reaches Rust unless it can arrive exactly (see
 * exact-strings.ts). The guard wraps the addon's own exports object in place, so every
 * function, class constructor, static and method, including ones added later, goes
 * through it, whichever module imports the addon.
 */
import binding = require('../../binding.js');

import { checkArguments } from './exact-strings.js';

/** Names of positional arguments, for messages (requests and options are objects whose fields name themselves). */
const PARAMS: Record<string, readonly string[]> = {
  renew: ['key', 'token', 'leaseMs'],
  release: ['key', 'reconcile'],
  expireSettled: ['keys', 'expiresAt'],
  clear: ['key'],
  get: ['key'],
  peekReplay: ['key', 'fingerprint'],
  listRecords: ['status', 'limit'],
  callHashes: ['name', 'context', 'payload'],
  replayCall: ['name', 'context', 'payload'],
  keyId: ['secret', 'key'],
  watch: ['key'],
  postgresSql: ['table'],
  fingerprint: ['name', 'payload'],
};

const GUARDED = Symbol.for('idempotent-tools.exact-strings');

type AnyFunction = (...args: unknown[]) => unknown;

function guardFunction(fn: AnyFunction, name: string, where: string): AnyFunction {
  const params = PARAMS[name];
  // `arguments`, not a rest parameter: no array is built on the replay fast path.
  const guarded = function (this: unknown) {
    const args = arguments as unknown as unknown[];
    checkArguments(args, params, where);
    return fn.apply(this, args);
  };
  Object.defineProperty(guarded, 'name', { value: fn.name });
  Object.defineProperty(guarded, GUARDED, { value: true });
  return guarded;
}

function guardMethods(target: object, where: (method: string) => string): void {
  for (const method of Object.getOwnPropertyNames(target)) {
    if (method === 'constructor') continue;
    const descriptor = Object.getOwnPropertyDescriptor(target, method);
    const value = descriptor?.value;
    if (typeof value !== 'function' || (value as unknown as Record<symbol, unknown>)[GUARDED]) continue;
    if (!descriptor!.configurable && !descriptor!.writable) throw new Error(`idempotent-tools: cannot guard ${where(method)}`);
    Object.defineProperty(target, method, { ...descriptor, value: guardFunction(value, method, where(method)) });
  }
}

function isClass(fn: AnyFunction): boolean {
  const proto = (fn as { prototype?: object }).prototype;
  return proto !== undefined && Object.getOwnPropertyNames(proto).some((n) => n !== 'constructor');
}

function guardBinding(exports: Record<string, unknown>): void {
  for (const name of Object.keys(exports)) {
    const value = exports[name];
    if (typeof value !== 'function' || (value as unknown as Record<symbol, unknown>)[GUARDED]) continue;
    if (isClass(value as AnyFunction)) {
      const cls = value as AnyFunction & { prototype: object };
      guardMethods(cls.prototype, (m) => `${name}.${m}`);
      // Static methods of napi classes are neither writable nor configurable, and a proxy of
      // the class itself must hand them out unchanged; so the proxy stands on a stand-in
      // and forwards everything to the class, handing out guarded statics.
      const statics = new Map<PropertyKey, AnyFunction>();
      const standIn = function () {} as unknown as AnyFunction;
      const guarded: AnyFunction = new Proxy(standIn, {
        construct(_, args, newTarget) {
          checkArguments(args, undefined, `new ${name}`);
          return Reflect.construct(cls, args, newTarget === guarded ? cls : newTarget);
        },
        apply(_, thisArg, args) {
          return Reflect.apply(cls, thisArg, args);
        },
        get(_, prop) {
          if (prop === GUARDED) return true;
          const value = Reflect.get(cls, prop, cls);
          if (typeof value !== 'function' || prop === 'prototype' || !Object.hasOwn(cls, prop)) return value;
          let g = statics.get(prop);
          if (g === undefined) statics.set(prop, (g = guardFunction(value as AnyFunction, String(prop), `${name}.${String(prop)}`)));
          return g;
        },
        has(_, prop) {
          return Reflect.has(cls, prop);
        },
      });
      exports[name] = guarded;
    } else {
      exports[name] = guardFunction(value as AnyFunction, name, name);
    }
  }
}

guardBinding(binding as unknown as Record<string, unknown>);

export = binding;
