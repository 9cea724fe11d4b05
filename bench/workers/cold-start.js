'use strict';
/**
 * A fresh process: import the library, open a new store file, make the first (unique)
 * call. Prints the time from the first line of this script to the call's result.
 */
const t0 = performance.now();
const path = require('node:path');
const [impl, file] = process.argv.slice(2);

async function charge(args) {
  return { ok: true, id: `ch_${args.n}` };
}

(async () => {
  let close;
  let call;
  if (impl === 'hand') {
    const { openHandRolledDb, handRolledIdempotent } = require('../lib/handrolled');
    const db = openHandRolledDb(file, 'full');
    call = handRolledIdempotent(db, 'charge', charge);
    close = async () => db.close();
  } else {
    const { idempotent, SqliteStore } = require(path.resolve(__dirname, '..', '..'));
    const store = new SqliteStore({ path: file, durability: 'full' });
    call = idempotent(charge, { store, name: 'charge' });
    close = () => store.close();
  }
  const tImport = performance.now();
  await call({ customer: 'cus_1', n: 1 });
  const tFirst = performance.now();
  await close();
  process.stdout.write(JSON.stringify({ importMs: tImport - t0, firstCallMs: tFirst - t0 }) + '\n');
})();
