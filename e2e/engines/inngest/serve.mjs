// The Inngest endpoint (inngest/node's serve) that inngest.test.mjs drives as the executor does.
import { writeSync } from 'node:fs';
import http from 'node:http';

import { serve } from 'inngest/node';

import { inngest, many, pay } from './functions.mjs';

const server = http.createServer(serve({ client: inngest, functions: [pay, many] }));
server.listen(Number(process.env.PORT), '127.0.0.1', () => writeSync(1, `listening ${server.address().port}\n`));
