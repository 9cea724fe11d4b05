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

  it('examples/approvals: approve, reject and edit, each turn run again and approved; only approved payments run, once', async () => {
    const r = await runNode(['examples/approvals/index.mjs']);
    expect(r.code).toBe(0);
    // The one thing on stderr: the ApprovalMismatchError warning for the developer (case 3).
    expect(r.stderr.split('\n').filter((l) => l !== '' && !l.includes('--trace-warnings'))).toEqual([expect.stringMatching(/IdempotentToolsWarning: .*is approved for other arguments/)]);
    expect(r.stdout).toMatch(/payments: \[100\] \(want \[100\]\)\n[^]*payments: \[\] \(want \[\]\)\n[^]*payments: \[50\] \(want \[50\]\)\n/);
    expect(r.stdout).toMatch(/event: refused/);
  });

  it('examples/langgraph/confirm-act.mjs: confirm, act, confirm, act; each transfer once', async () => {
    const r = await runNode(['examples/langgraph/confirm-act.mjs']);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/transfers so far: 1\n[^]*transfers so far: 2\n/);
    expect(r.stdout).toMatch(/transfers: 2\n/);
  });
});
