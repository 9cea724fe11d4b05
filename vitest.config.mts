import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['__test__/**/*.test.ts'],
    // Checks redis-server and PostgreSQL and makes the test database (or a private server);
    // then builds the native binary with the test hooks, for the tests that use them.
    globalSetup: ['__test__/global-setup.ts', '__test__/test-hooks-setup.ts'],
    // Mastra 1.x is not a dev dependency (it declares Node >= 22.13): .ci/mastra.sh installs it
    // into its fixture and runs those files by name, so npm test leaves them out instead of skipping them.
    exclude: process.env.IDEMPOTENT_TOOLS_MASTRA_E2E === '1' ? [] : ['__test__/frameworks-mastra-agent.test.ts', '__test__/approvals-mastra.test.ts', '**/node_modules/**'],
    // Child processes, real files and a real Redis: generous limits, never timing assertions.
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: 'forks',
  },
});
