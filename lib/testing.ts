/**
 * `idempotent-tools/testing`: for tests of code that uses the package, a store held in
 * memory (`MemoryStore`), and for authors of a store of their own, the conformance suite
 * every built-in store passes (`storeConformance`).
 */

export { MemoryStore } from './stores/memory-store.js';
export type { MemoryStoreOptions } from './stores/memory-store.js';
export { storeConformance } from './stores/conformance.js';
export type { ConformanceTarget, Runner } from './stores/conformance.js';
