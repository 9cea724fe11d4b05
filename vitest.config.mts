import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['__test__/**/*.test.ts'],
    // Child processes, real files and a real Redis: generous limits, never timing assertions.
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: 'forks',
  },
});
