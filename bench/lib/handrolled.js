'use strict';
/**
 * The alternative most users would write first: an idempotency decorator on
 * better-sqlite3, written the way such code usually is: JSON.stringify the arguments,
 * SHA-256 them with node:crypto, SELECT the key, and on a miss run the function and
 * INSERT its result in a transaction. (It has no in-flight claim, so two concurrent
 * calls with one key both run: it does less work per unique call than idempotent-tools,
 * which writes a claim before running and the result after.)
 */

const { createHash } = require('node:crypto');
const Database = require('better-sqlite3');

/** Opens a database the way the decorator's users would: WAL, and the given synchronous level. */
function openHandRolledDb(path, durability) {
  const db = new Database(path);
  db.pragma('journal_mode = WAL');
  db.pragma(`synchronous = ${durability === 'normal' ? 'NORMAL' : 'FULL'}`);
  db.pragma('busy_timeout = 5000');
  db.exec(`CREATE TABLE IF NOT EXISTS idempotency (
    key TEXT PRIMARY KEY,
    result TEXT,
    created_at INTEGER NOT NULL
  )`);
  return db;
}

function handRolledIdempotent(db, name, fn) {
  const select = db.prepare('SELECT result FROM idempotency WHERE key = ?');
  const insert = db.prepare('INSERT OR REPLACE INTO idempotency (key, result, created_at) VALUES (?, ?, ?)');
  const save = db.transaction((key, json) => insert.run(key, json, Date.now()));
  return async (...args) => {
    const key = createHash('sha256').update(name).update(JSON.stringify(args)).digest('hex');
    const row = select.get(key);
    if (row !== undefined) return row.result === null ? undefined : JSON.parse(row.result);
    const result = await fn(...args);
    save(key, result === undefined ? null : JSON.stringify(result));
    return result;
  };
}

module.exports = { openHandRolledDb, handRolledIdempotent };
