// A fake Messages API for the Claude Agent SDK, so that examples/claude-agent-sdk/quickstart.mjs
// runs offline: every prompt gets a call of send_payment (id toolu_01A09q90qw90lq917835lq9; on
// resume, the re-sent assistant message that made it), then "Paid.". Point the runtime at it
// with the environment `offlineClaude()` returns; with a real key you need none of this.
import { createServer } from 'node:http';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export async function offlineClaude() {
  const api = createServer(async (req, res) => {
    let body = '';
    for await (const chunk of req) body += chunk;
    const { tools = [], messages } = JSON.parse(body);
    const sinceReply = JSON.stringify(messages.slice(messages.findLastIndex((m) => m.role === 'assistant') + 1));
    const prompt = tools.length > 0 && /Pay order|Go on/.test(sinceReply) && !sinceReply.includes('tool_result');
    const block = prompt
      ? { type: 'tool_use', id: 'toolu_01A09q90qw90lq917835lq9', name: 'mcp__pay__send_payment', input: {}, json: '{"orderId":"o-42","cents":1999}' }
      : { type: 'text', text: '', delta: 'Paid.' };
    const event = (type, data) => res.write(`event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`);
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    event('message_start', { message: { id: 'msg_1', type: 'message', role: 'assistant', content: [], usage: { input_tokens: 1, output_tokens: 1 } } });
    const { json, delta, ...start } = block;
    event('content_block_start', { index: 0, content_block: start });
    event('content_block_delta', { index: 0, delta: json ? { type: 'input_json_delta', partial_json: json } : { type: 'text_delta', text: delta } });
    event('content_block_stop', { index: 0 });
    event('message_delta', { delta: { stop_reason: prompt ? 'tool_use' : 'end_turn' }, usage: { output_tokens: 1 } });
    event('message_stop', {});
    res.end();
  }).listen(0, '127.0.0.1');
  await new Promise((r) => api.once('listening', r));
  const home = mkdtempSync(join(tmpdir(), 'claude-'));
  const env = { ...process.env, HOME: home, ANTHROPIC_API_KEY: 'offline',
    ANTHROPIC_BASE_URL: `http://127.0.0.1:${api.address().port}`, CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1' };
  return { env, cwd: home, close: () => api.close() };
}
