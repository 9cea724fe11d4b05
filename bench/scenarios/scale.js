'use strict';
/**
 * Replay latency as the store grows. Each store file is filled directly with
 * better-sqlite3, using our schema (opened once by SqliteStore so the file is a real
 * store), with completed records under random keys, inserted in key order in one
 * transaction. Then 1000 real records are made through the wrapper (they land among
 * the filler at random places in the key index) and replayed round-robin. The stores
 * of every size are open at once and measured alternately.
 */

const crypto = require('node:crypto');
const fs = require('node:fs');
const path = require('node:path');
const Database = require('better-sqlite3');

const { compare, pool } = require('../lib/compare');
const { pkg, charge, freshArgs, tempDir, rmrf } = require('../lib/common');

function bulkFill(file, count) {
  const db = new Database(file);
  db.pragma('synchronous = OFF');
  const keys = Array.from({ length: count }, () => crypto.randomBytes(32).toString('hex')).sort();
  const fingerprint = crypto.randomBytes(32).toString('hex');
  const now = Date.now();
  const insert = db.prepare(
    `INSERT INTO records (key, name, fingerprint, status, token, result, error, attempts,
                          created_at, updated_at, expires_at, lease_expires_at)
     VALUES (?, 'charge', ?, 'completed', NULL, ?, NULL, 1, ?, ?, NULL, NULL)`,
  );
  db.transaction(() => {
    for (let i = 0; i < keys.length; i++) {
      insert.run(keys[i], fingerprint, `{"amount":${1000 + (i % 997)},"id":"ch_f${i}","ok":true}`, now, now);
    }
  })();
  db.pragma('wal_checkpoint(TRUNCATE)');
  db.close();
}

async function scale(ctx) {
  const { idempotent, SqliteStore } = pkg();
  const sizes = ctx.quick ? [1e3, 1e5] : [1e3, 1e5, 1e6];
  const sample = 1000;
  const rounds = ctx.quick ? 5 : 21;
  const n = ctx.quick ? 300 : 3000;
  const dir = tempDir('scale');
  const stores = [];
  const rows = [];
  try {
    for (const size of sizes) {
      const file = path.join(dir, `scale-${size}.db`);
      const t0 = performance.now();
      const opener = new SqliteStore({ path: file, durability: 'full' });
      await opener.ready();
      await opener.close();
      bulkFill(file, size - sample);
      const fillMs = performance.now() - t0;
      const store = new SqliteStore({ path: file, durability: 'full' });
      await store.ready();
      const wrapped = idempotent(charge, { store, name: 'charge' });
      const keys = Array.from({ length: sample }, () => freshArgs(`scale${size}`));
      await pool(sample, 64, (i) => wrapped(keys[i]));
      const bytes = fs.statSync(file).size;
      stores.push({ size, store, wrapped, keys, fillMs, bytes });
    }
    let at = 0;
    const res = await compare({
      rounds,
      n,
      baseline: `${sizes[0].toLocaleString('en-US')} records`,
      alts: stores.map((s) => ({
        name: `${s.size.toLocaleString('en-US')} records`,
        run: async (m) => {
          for (let i = 0; i < m; i++) await s.wrapped(s.keys[(at + i) % sample]);
          at += 13;
        },
      })),
    });
    res.forEach((r, i) => {
      r.records = stores[i].size;
      r.fileBytes = stores[i].bytes;
      r.fillMs = stores[i].fillMs;
      rows.push([r.name, (r.fileBytes / 1e6).toFixed(1), r.medianUsPerOp, r.opsPerSec, r.timeRatioVsBaseline]);
    });
    return {
      id: 'scale-replay',
      title: 'SQLite replay latency vs store size',
      note: `Filler rows bulk-inserted with better-sqlite3 into our schema (sorted keys, one transaction), plus ${sample} real records made through the wrapper and replayed round-robin; ${rounds} rounds of ${n} replays, sizes alternating.`,
      header: ['store size', 'file MB', 'median µs/replay', 'replays/s', 'time ratio vs 1k'],
      rows,
      data: res,
    };
  } finally {
    for (const s of stores) await s.store.close();
    rmrf(dir);
  }
}

module.exports = { scale };
