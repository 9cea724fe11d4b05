/**
 * The applications' one door into the library: the CLI, the MCP proxy and the inspector
 * page import the library from here, never a module of core/ or stores/ directly. It is
 * the public API (index.ts) and, beside it, what only a tool that looks at records needs:
 * the listing filters (record-query), how a record's text is shown (shown-text), keyed-id lookups, the approval record names, the
 * environment's choice of store, SQLite's change watch for `inspect --follow`, how an MCP
 * call names itself (its client's idempotency key, numbers carried exactly), which the proxy
 * reads as `idempotent-tools/mcp-server` does, and the helpers' option that ends a wait when
 * its request is gone.
 */

export * from '../index.js';
export type { ApprovalRecord } from '../core/approvals.js';
export { parseDecisionName } from '../core/approval-names.js';
export { KEY_ID_SECRET_KEY, keyIdSecret, keyIdWith, looksDerived } from '../core/key-id.js';
export {
  QueryError,
  type RecordQuery,
  type RecordWithKeyId,
  findByKey,
  isDecisionStatus,
  keyIdSecrets,
  matches,
  parseQuery,
  queryRecords,
  recentRecords,
  statusLabel,
  withKeyIds,
} from '../core/record-query.js';
export { invisiblesEscaped, shownText } from '../core/shown-text.js';
export { storeFromEnvironment } from '../stores/default-store.js';
export { SqliteChangeWatch } from '../core/native.js';
export { BadCall, type CallParams, GUARD_ERROR, META_KEY_FIELDS, REPLAYED, clientKey, guardErrorOf, keyInArguments, toolCallIdOf, withClientKey } from '../integrations/mcp-call.js';
export { PLACEHOLDER, keptExactly, looksLikePlaceholder, mayHoldNul, placeholderNumber, withNumbers, withPlaceholders } from '../integrations/mcp-exact-numbers.js';
export { type CommandUpstream, type UrlUpstream, commandIdentity, urlIdentity } from '../integrations/mcp-identity.js';
// A duplicate waiting for a call in flight stops when its request is cancelled or its client
// leaves: the core's option for it, and how an MCP request's signals make one. Internal, as
// in core/options.ts: stripped from the shipped types, whose declarations it would otherwise
// name while they are gone (TypeScript 7 failed on dist/apps/library.d.ts).
/** @internal */
export { WAIT_SIGNAL, type WaitingOptions } from '../core/options.js';
export { eitherSignal } from '../integrations/mcp-wait.js';
export { MCP_HEADERS, MCP_POSTGRES_URL, MCP_PROXY_OWN, MCP_REDIS_URL, MCP_SCOPE, MCP_URL } from '../integrations/mcp-proxy-env.js';
export { isNumberedCallId } from '../integrations/identity.js';
