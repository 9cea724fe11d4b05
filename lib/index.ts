/**
 * idempotent-tools: wrap a side-effecting tool so that a retried, replayed or resumed
 * call returns the first call's stored result instead of running again.
 */

export { idempotent } from './idempotent.js';
export type { IdempotentFunction } from './idempotent.js';
export type { IdempotentOptions, OnDuplicate, ReconcileAttempt, ReconcileOutcome } from './options.js';
export { currentKey } from './call-context.js';
export { step } from './step.js';
export { SqliteStore, defaultStorePath } from './sqlite-store.js';
export { defaultStore, setDefaultStore } from './default-store.js';
export { projectNamespace } from './project.js';
export { RedisStore } from './redis-store.js';
export type { RedisStoreOptions } from './redis-store.js';
export { PostgresStore } from './postgres-store.js';
export type { PostgresStoreOptions } from './postgres-store.js';
export type { SqliteStoreOptions } from './sqlite-store.js';
export {
  IdempotencyError,
  DuplicateInFlightError,
  InFlightTimeoutError,
  KeyMismatchError,
  StoreError,
  LeaseLostError,
  ApprovalMismatchError,
  ApprovalConflictError,
  ToolCallRejectedError,
} from './errors.js';
export { recordApproval } from './approvals.js';
export type { ApprovalDecision, ApprovalInput, ApprovalRecord, RecordedApproval } from './approvals.js';
export { CHANNEL_NAME } from './events.js';
export { keyId } from './key-id.js';
export type { IdempotencyEvent, IdempotencyEventType } from './events.js';
export type {
  Store,
  IdempotencyRecord,
  RecordStatus,
  RecordError,
  ReplayHit,
  AcquireRequest,
  AcquireResult,
  SettleRequest,
  ListOptions,
  StoreStats,
} from './store.js';
