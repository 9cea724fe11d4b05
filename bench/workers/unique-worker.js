'use strict';
/**
 * One process of the many-process scenario: opens the shared store file, waits for the
 * parent's "go", makes `count` unique calls with `inFlight` outstanding, and reports how
 * long that took.
 */
const path = require('node:path');
const { pool } = require('../lib/compare');
const { pkg, charge } = require('../lib/common');

const [file, durability, count, inFlight, impl] = process.argv.slice(2);

(async () => {
  let call;
  let close;
  if (impl === 'hand') {
    const { openHandRolledDb, handRolledIdempotent } = require('../lib/handrolled');
    const db = openHandRolledDb(file, durability);
    call = handRolledIdempotent(db, 'charge', charge);
    close = async () => db.close();
  } else {
    const { idempotent, SqliteStore } = pkg();
    const store = new SqliteStore({ path: file, durability });
    await store.ready();
    call = idempotent(charge, { store, name: 'charge' });
    close = () => store.close();
  }
  let seq = 0;
  const args = () => ({ customer: `cus_${process.pid}`, amount: 1000, currency: 'eur', n: ++seq, memo: path.basename(file) });
  await call(args()); // the first call opens everything
  process.send({ ready: true });
  process.once('message', async () => {
    const t0 = performance.now();
    await pool(Number(count), Number(inFlight), () => call(args()));
    const ms = performance.now() - t0;
    await close();
    process.send({ ms, count: Number(count) });
  });
})().catch((err) => {
  console.error(err);
  process.exit(1);
});
