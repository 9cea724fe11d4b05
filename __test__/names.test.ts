// Two different functions under one name on one store would share every record (the
// SMS would return the email's result and never be sent): refused at wrap time.

import { describe, expect, it } from 'vitest';

import { lib, tempDb } from './helpers';

const { idempotent, SqliteStore } = lib;

describe('one name, one function, per store', () => {
  it('email.send and sms.send on one store: the second wrap is a TypeError that says to pass name', async () => {
    const store = new SqliteStore({ path: tempDb() });
    const email = { send: async (to: string) => `email to ${to}` };
    const sms = { send: async (to: string) => `sms to ${to}` };
    idempotent(email.send, { store });
    expect(() => idempotent(sms.send, { store })).toThrow(/the name "send" is already used on this store by another function; pass the "name" option/);
    const sendSms = idempotent(sms.send, { store, name: 'sms.send' });
    expect(await sendSms('bob')).toBe('sms to bob');
    await store.close();
  });

  it('the same function wrapped again, or rebuilt from the same source per request, is fine', () => {
    const store = new SqliteStore({ path: tempDb() });
    async function charge(order: string) {
      return order;
    }
    idempotent(charge, { store });
    expect(() => idempotent(charge, { store })).not.toThrow();
    const build = () => idempotent(async function lookup(id: string) { return id; }, { store });
    build();
    expect(() => build()).not.toThrow();
  });

  it('the same name on other stores, and on the default store, is its own registry', () => {
    const a = new SqliteStore({ path: tempDb() });
    const b = new SqliteStore({ path: tempDb() });
    idempotent(async function notify() { return 1; }, { store: a });
    expect(() => idempotent(async function notify() { return 2; }, { store: b })).not.toThrow();
    idempotent(async function uniqueDefaultName() { return 1; });
    expect(() => idempotent(async function uniqueDefaultName() { return 2; })).toThrow(/pass the "name" option/);
  });
});

// One place, one registry (issue 29, item 3): where records go decides which names are
// taken, whatever the store object and however its URL is written.
describe('one name, one function, per place where records live', () => {
  const { defaultStore, setDefaultStore, RedisStore } = lib;
  const email = { send: async (to: string) => `email to ${to}` };
  const sms = { send: async (to: string) => `sms to ${to}` };

  it('a wrapper made without store and one given defaultStore(): one place, so the second wrap is the TypeError (either order)', () => {
    const a = { send: async (to: string) => `a ${to}` };
    const b = { send: async (to: string) => `b ${to}` };
    // Unique names per test: the registry is the process's.
    Object.defineProperty(a.send, 'name', { value: 'sendViaDefault1' });
    Object.defineProperty(b.send, 'name', { value: 'sendViaDefault1' });
    idempotent(a.send);
    expect(() => idempotent(b.send, { store: defaultStore() })).toThrow(/the name "sendViaDefault1" is already used on this store by another function/);
    const c = { send: async (to: string) => `c ${to}` };
    const d = { send: async (to: string) => `d ${to}` };
    Object.defineProperty(c.send, 'name', { value: 'sendViaDefault2' });
    Object.defineProperty(d.send, 'name', { value: 'sendViaDefault2' });
    idempotent(c.send, { store: defaultStore() });
    expect(() => idempotent(d.send)).toThrow(/the name "sendViaDefault2" is already used on this store/);
  });

  it('the store given to setDefaultStore and a wrapper made without store: one place, whichever is wrapped first', async () => {
    const store = new SqliteStore({ path: tempDb() });
    try {
      setDefaultStore(store);
      idempotent(email.send, { name: 'notify.send' });
      expect(() => idempotent(sms.send, { store, name: 'notify.send' })).toThrow(/already used on this store/);
      // Made before setDefaultStore moved the default: the name follows it there at once.
      setDefaultStore(null);
      idempotent(email.send, { name: 'notify.later' });
      setDefaultStore(store);
      expect(() => idempotent(sms.send, { store, name: 'notify.later' })).toThrow(/already used on this store/);
    } finally {
      setDefaultStore(null);
      await store.close();
    }
  });

  it('a wrapper made without store whose default moves onto a place where its name is taken: its call is the TypeError, and nothing runs', async () => {
    const store = new SqliteStore({ path: tempDb() });
    let sent = 0;
    const sendEmail = idempotent(async function mailer(to: string) { sent++; return `email to ${to}`; }, { name: 'moved.send' });
    const sendSms = idempotent(async function texter(to: string) { return `sms to ${to}`; }, { store, name: 'moved.send' });
    expect(await sendSms('bob')).toBe('sms to bob');
    try {
      setDefaultStore(store);
      await expect(sendEmail('bob')).rejects.toThrow(/the name "moved.send" is already used on this store by another function/);
      expect(sent).toBe(0);
    } finally {
      setDefaultStore(null);
      await store.close();
    }
  });

  it('RedisStores on one server, database and prefix are one place however the URL is written (port and database defaults, case, password)', () => {
    // Nothing connects: a RedisStore opens its connection on first use.
    const place = (url: string, prefix?: string) => new RedisStore({ url, prefix });
    const wrapOn = (url: string, prefix?: string) => {
      const first = async function first() { return 1; };
      const second = async function second() { return 2; };
      const name = `redis.${Math.random()}`;
      idempotent(first, { store: place('redis://127.0.0.1:6379/10', prefix), name });
      return () => idempotent(second, { store: place(url, prefix), name });
    };
    expect(wrapOn('redis://127.0.0.1/10')).toThrow(/already used on this store/);
    expect(wrapOn('redis://127.0.0.1:6379/010')).toThrow(/already used on this store/);
    expect(wrapOn('redis://:secret@127.0.0.1:6379/10')).toThrow(/already used on this store/);
    expect(wrapOn('redis://127.0.0.1:6379/10/', 'app:')).toThrow(/already used on this store/);
    // Other places: another database, port, host, user, prefix or scheme.
    expect(wrapOn('redis://127.0.0.1:6379/11')).not.toThrow();
    expect(wrapOn('redis://127.0.0.1:6380/10')).not.toThrow();
    expect(wrapOn('redis://127.0.0.2:6379/10')).not.toThrow();
    expect(wrapOn('redis://alice@127.0.0.1:6379/10')).not.toThrow();
    expect(wrapOn('rediss://127.0.0.1:6379/10')).not.toThrow();
    const first = async function first() { return 1; };
    const second = async function second() { return 2; };
    idempotent(first, { store: place('redis://127.0.0.1:6379/10', 'a:'), name: 'prefixed' });
    expect(() => idempotent(second, { store: place('redis://127.0.0.1:6379/10', 'b:'), name: 'prefixed' })).not.toThrow();
    // The default database is 0: no path and "/0" are one place.
    idempotent(first, { store: place('redis://localhost'), name: 'db0' });
    expect(() => idempotent(second, { store: place('redis://LOCALHOST:6379/0'), name: 'db0' })).toThrow(/already used on this store/);
  });

  it('the environment\'s Redis URL and a RedisStore of the same server spelled otherwise: one place', () => {
    const before = process.env.IDEMPOTENT_TOOLS_REDIS_URL;
    process.env.IDEMPOTENT_TOOLS_REDIS_URL = 'redis://127.0.0.1/13';
    try {
      idempotent(async function fromEnv() { return 1; }, { name: 'env.redis' });
      expect(() => idempotent(async function other() { return 2; }, { store: new RedisStore({ url: 'redis://127.0.0.1:6379/13' }), name: 'env.redis' })).toThrow(
        /already used on this store/,
      );
    } finally {
      if (before === undefined) delete process.env.IDEMPOTENT_TOOLS_REDIS_URL;
      else process.env.IDEMPOTENT_TOOLS_REDIS_URL = before;
    }
  });
});
