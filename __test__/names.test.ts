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
