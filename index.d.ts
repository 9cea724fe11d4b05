// The public types of idempotent-tools, compiled from lib/ into dist/.
export * from './dist/index.js';
