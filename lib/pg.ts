/**
 * `idempotent-tools/pg`: `idempotentTx(fn, { pool })`, the record and the side effect's
 * writes in one PostgreSQL transaction (stores/pg-tx.ts).
 */

export { idempotentTx } from './stores/pg-tx.js';
export type { IdempotentTxOptions, TxClient, TxPool } from './stores/pg-tx.js';
