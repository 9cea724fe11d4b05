// The native addon's API, as `napi build` generates it from the Rust sources (native/index.d.ts).
export * from './native/index.js';
