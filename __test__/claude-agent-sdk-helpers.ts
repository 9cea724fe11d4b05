/**
 * The real Claude Agent SDK runtime against a fake Messages API on 127.0.0.1: each
 * `POST /v1/messages` that offers tools is answered with what the test's `model` returns
 * for it (tool_use blocks or text), streamed as server-sent events in the Messages API's
 * order; requests without tools (titles and the like) get a line of text.
 */

import { mkdtempSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export type Block = { type: 'text'; text: string } | { type: 'tool_use'; id: string; name: string; input: Record<string, unknown> };

/** A request the runtime sent, as the fake saw it. */
export interface ApiRequest {
  messages: Array<{ role: string; content: unknown }>;
  tools?: unknown[];
}

/** The tool results in the last message of a request: what the model is told. */
export function toolResults(request: ApiRequest): Array<{ tool_use_id: string; content: unknown; is_error?: boolean }> {
  const last = request.messages.at(-1);
  const content = Array.isArray(last?.content) ? (last!.content as Array<{ type?: string }>) : [];
  return content.filter((c) => c.type === 'tool_result') as never;
}

export interface FakeApi {
  url: string;
  requests: ApiRequest[];
  close(): Promise<void>;
}

export function fakeMessagesApi(model: (request: ApiRequest) => Block[] | Promise<Block[]>): Promise<FakeApi> {
  const requests: ApiRequest[] = [];
  const server = createServer(async (req, res) => {
    let body = '';
    for await (const chunk of req) body += chunk;
    if (req.method !== 'POST' || !req.url?.startsWith('/v1/messages')) {
      res.writeHead(404).end();
      return;
    }
    const json = JSON.parse(body) as ApiRequest & { model: string };
    const offersTools = Array.isArray(json.tools) && json.tools.length > 0;
    if (offersTools) requests.push(json);
    const blocks = offersTools ? await model(json) : [{ type: 'text' as const, text: 'A title' }];
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    const send = (event: string, data: Record<string, unknown>) => res.write(`event: ${event}\ndata: ${JSON.stringify({ type: event, ...data })}\n\n`);
    send('message_start', {
      message: { id: `msg_${requests.length}`, type: 'message', role: 'assistant', model: json.model, content: [], stop_reason: null, stop_sequence: null, usage: { input_tokens: 1, output_tokens: 1 } },
    });
    blocks.forEach((b, index) => {
      if (b.type === 'text') {
        send('content_block_start', { index, content_block: { type: 'text', text: '' } });
        send('content_block_delta', { index, delta: { type: 'text_delta', text: b.text } });
      } else {
        send('content_block_start', { index, content_block: { type: 'tool_use', id: b.id, name: b.name, input: {} } });
        send('content_block_delta', { index, delta: { type: 'input_json_delta', partial_json: JSON.stringify(b.input) } });
      }
      send('content_block_stop', { index });
    });
    send('message_delta', { delta: { stop_reason: blocks.some((b) => b.type === 'tool_use') ? 'tool_use' : 'end_turn', stop_sequence: null }, usage: { output_tokens: 1 } });
    send('message_stop', {});
    res.end();
  });
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      resolve({ url: `http://127.0.0.1:${port}`, requests, close: () => new Promise((done) => server.close(() => done())) });
    }),
  );
}

/** The environment the runtime needs offline: the fake API, a key, no other traffic, a HOME of its own (sessions live under it). */
export function offlineEnv(api: FakeApi, home = mkdtempSync(join(tmpdir(), 'idempotent-tools-claude-'))): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined && !k.startsWith('ANTHROPIC_') && !k.startsWith('CLAUDE')) env[k] = v;
  return {
    ...env,
    HOME: home,
    ANTHROPIC_BASE_URL: api.url,
    ANTHROPIC_API_KEY: 'sk-ant-test',
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
    DISABLE_AUTOUPDATER: '1',
  };
}

/** The model's turn: a call of the tool, or the answer after a tool result. */
export function lastIsToolResult(request: ApiRequest): boolean {
  return toolResults(request).length > 0;
}
