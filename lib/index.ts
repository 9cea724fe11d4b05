/**
 * idempotent-tools: wrap a side-effecting tool so that a retried, replayed or resumed
 * call returns the first call's stored result instead of running again.
 */

export { idempotent } from './core/idempotent.js';
export type { IdempotentFunction } from './core/idempotent.js';
export type { IdempotentOptions, OnDuplicate, ReconcileAttempt, ReconcileOutcome } from './core/options.js';
export { currentKey } from './core/call-context.js';
export { step } from './core/step.js';
export { SqliteStore, defaultStorePath } from './stores/sqlite-store.js';
export { defaultStore, setDefaultStore } from './core/default-store.js';
// The environment's choice of default store (IDEMPOTENT_TOOLS_DB, _REDIS_URL, _POSTGRES_URL),
// registered with core/ as this module loads.
import './stores/default-store.js';
export { projectNamespace } from './stores/project.js';
export { RedisStore } from './stores/redis-store.js';
export type { RedisStoreOptions } from './stores/redis-store.js';
export { PostgresStore } from './stores/postgres-store.js';
export type { PostgresStoreOptions } from './stores/postgres-store.js';
export type { SqliteStoreOptions } from './stores/sqlite-store.js';
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
  UnstorableResultError,
} from './core/errors.js';
export { recordApproval } from './core/approvals.js';
export type { ApprovalDecision, ApprovalInput, ApprovalRecord, RecordedApproval } from './core/approvals.js';
export { CHANNEL_NAME } from './core/events.js';
export { keyId } from './core/key-id.js';
export type { IdempotencyEvent, IdempotencyEventType } from './core/events.js';
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
  ReleaseOptions,
  StoreStats,
} from './core/store.js';
