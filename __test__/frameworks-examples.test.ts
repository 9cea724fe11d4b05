// The offline framework examples run, and each charges exactly once.

import { describe, expect, it } from 'vitest';

import { runNode } from './helpers';

describe('framework examples', () => {
  for (const framework of ['langgraph', 'langchain', 'ai-sdk', 'openai-agents', 'mastra']) {
    it(`examples/${framework} runs offline and charges once`, async () => {
      const r = await runNode([`examples/${framework}/index.mjs`]);
      expect(r.stderr).toBe('');
      expect(r.code).toBe(0);
      expect(r.stdout).toMatch(/charges: 1\n/);
      expect(r.stdout).toMatch(/replayed/);
    });
  }

  it('examples/langgraph/confirm-act.mjs: confirm, act, confirm, act; each transfer once', async () => {
    const r = await runNode(['examples/langgraph/confirm-act.mjs']);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/transfers so far: 1\n[^]*transfers so far: 2\n/);
    expect(r.stdout).toMatch(/transfers: 2\n/);
  });
});
