// The application of vercel.test.mjs: a node:http server for the bundles `workflow build`
// wrote (.well-known/workflow/v1/flow.js and step.js), on the local world (a folder of JSON
// files and an in-process queue that calls this server back). At boot the world re-queues the
// runs a killed server left unfinished.
import { writeSync } from 'node:fs';
import http from 'node:http';
import { createRequire } from 'node:module';

import { getRun, start } from 'workflow/api';
import { getWorld } from 'workflow/runtime';

const require = createRequire(import.meta.url);
const flow = require('./.well-known/workflow/v1/flow.js');
const step = require('./.well-known/workflow/v1/step.js');
const port = Number(process.env.PORT);

async function toWeb(req) {
  const chunks = [];
  for await (const c of req) chunks.push(c);
  const body = chunks.length ? Buffer.concat(chunks) : undefined;
  return new Request(`http://127.0.0.1:${port}${req.url}`, { method: req.method, headers: req.headers, body: req.method === 'GET' || req.method === 'HEAD' ? undefined : body });
}

async function send(res, response) {
  res.writeHead(response.status, Object.fromEntries(response.headers));
  res.end(Buffer.from(await response.arrayBuffer()));
}

const server = http.createServer(async (req, res) => {
  try {
    const url = new URL(req.url, `http://127.0.0.1:${port}`);
    if (url.pathname.startsWith('/.well-known/workflow/v1/flow')) return send(res, await flow.POST(await toWeb(req)));
    if (url.pathname.startsWith('/.well-known/workflow/v1/step')) return send(res, await step.POST(await toWeb(req)));
    if (url.pathname === '/start') {
      const run = await start({ workflowId: `workflow//./workflows/pay//${url.searchParams.get('flow')}` }, [url.searchParams.get('id')]);
      return send(res, Response.json({ runId: run.runId }));
    }
    if (url.pathname === '/result') return send(res, Response.json(await getRun(url.searchParams.get('run')).returnValue));
    res.writeHead(404).end();
  } catch (err) {
    res.writeHead(500).end(String(err?.stack ?? err));
  }
});
server.listen(port, '127.0.0.1', async () => {
  await getWorld().start?.();
  writeSync(1, `listening ${port}\n`);
});
