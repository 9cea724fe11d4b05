// The framework subpaths as users load them: require and import, no framework code loaded.

import { describe, expect, it } from 'vitest';

import { runNode } from './helpers';

const SUBPATHS: Record<string, string[]> = {
  'idempotent-tools/langgraph': ['idempotentTool', 'toolCallContext', 'threadStepContext', 'stripTaskIds', 'idempotentToolsMiddleware'],
  'idempotent-tools/langchain': ['idempotentToolsMiddleware'],
  'idempotent-tools/ai-sdk': ['idempotentTool', 'idempotentTools'],
  'idempotent-tools/openai-agents': ['idempotentTool', 'idempotentTools'],
  'idempotent-tools/mastra': ['idempotentTool', 'idempotentTools'],
  'idempotent-tools/claude-agent-sdk': ['idempotentTools', 'idempotentCanUseTool', 'idempotentMcpServers'],
  'idempotent-tools/mcp-server': ['idempotentServer', 'idempotentTool'],
};

describe('framework subpaths', () => {
  it('require and import give the helpers, and load nothing from node_modules', async () => {
    const r = await runNode(['-e', `
      const before = new Set(Object.keys(require.cache));
      const subpaths = ${JSON.stringify(SUBPATHS)};
      const missing = [];
      for (const [p, names] of Object.entries(subpaths)) {
        const m = require(p);
        for (const n of names) if (typeof m[n] !== 'function') missing.push(p + ' ' + n);
      }
      const loaded = Object.keys(require.cache).filter((f) => !before.has(f) && f.includes('node_modules'));
      console.log(JSON.stringify({ missing, loaded }));`], { env: { HOME: '/nonexistent-home' } });
    expect(r.stderr).toBe('');
    expect(JSON.parse(r.stdout)).toEqual({ missing: [], loaded: [] });
    const esm = await runNode(['--input-type=module', '-e', `
      import { idempotentTool, toolCallContext, threadStepContext } from 'idempotent-tools/langgraph';
      import { idempotentTool as a } from 'idempotent-tools/ai-sdk';
      import { idempotentTool as o } from 'idempotent-tools/openai-agents';
      import { idempotentTool as m } from 'idempotent-tools/mastra';
      import { idempotentToolsMiddleware } from 'idempotent-tools/langchain';
      import { idempotentToolsMiddleware as fromLanggraph, idempotentTool as lg } from 'idempotent-tools/langgraph';
      import { idempotentTools as at } from 'idempotent-tools/ai-sdk';
      import { idempotentTools as ot } from 'idempotent-tools/openai-agents';
      import { idempotentTools as mt } from 'idempotent-tools/mastra';
      import { idempotentTools as ct, idempotentCanUseTool } from 'idempotent-tools/claude-agent-sdk';
      import { idempotentServer, idempotentTool as st } from 'idempotent-tools/mcp-server';
      console.log([idempotentTool, toolCallContext, threadStepContext, a, o, m, idempotentToolsMiddleware, at, ot, mt, ct, idempotentCanUseTool, idempotentServer, st].every((f) => typeof f === 'function') && fromLanggraph === idempotentToolsMiddleware && lg === idempotentTool);`]);
    expect(esm.stderr).toBe('');
    expect(esm.stdout.trim()).toBe('true');
  });

  it('the core import loads no integration', async () => {
    const r = await runNode(['-e', `
      require('idempotent-tools');
      console.log(JSON.stringify(Object.keys(require.cache).filter((f) => f.includes('integrations'))));`]);
    expect(JSON.parse(r.stdout)).toEqual([]);
  });
});
