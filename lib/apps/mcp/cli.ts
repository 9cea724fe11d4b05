/**
 * `idempotent-tools mcp [store] [--window 10m] [--config F] [--log] -- <command> [args...]`:
 * parses the command line, opens the store, spawns the server and runs the proxy on stdio.
 * Loaded only for this subcommand, so the MCP SDK never loads with the library.
 */

import { createHash } from 'node:crypto';
import { parseArgs } from 'node:util';

import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';

import * as pkg from '../library.js';
import { forTerminal } from '../terminal-text.js';
import { MCP_SCOPE, commandIdentity, urlIdentity } from '../library.js';
import { ConfigError, loadConfig, parseDuration } from './policy.js';
import { DEFAULT_MAX_MESSAGE_BYTES } from './lines.js';
import { HEADER_NAME, MCP_HEADERS, MCP_POSTGRES_URL, MCP_REDIS_URL, MCP_URL, given, headersFromEnvironment, upstreamEnvironment, withHeaders } from './environment.js';
import { GUARD_ERROR, McpProxy } from './proxy.js';
import { keepPruned } from './retention.js';
import { downstreamStdio, exactFetch, upstreamStdio } from './stdio.js';
import { type Store } from '../library.js';

export const MCP_USAGE = `Usage: idempotent-tools mcp [store] [options] -- <command> [args...]
       idempotent-tools mcp [store] [options] --url http://host/mcp

Runs the MCP server <command> as a child and serves it on stdio, every message forwarded,
with a retry guard on tools/call: a repeat of a side-effecting call within the window
(same server, tool and arguments, or the same _meta.idempotencyKey) gets the first call's
stored result instead of running again; a repeat while the first runs waits for it.
A client's cancel or timeout of a guarded call is not forwarded: the call finishes, its
result is recorded, and the retry gets it (a config rule "cancel": "forward" forwards it).

Store (default: $IDEMPOTENT_TOOLS_MCP_REDIS_URL or $IDEMPOTENT_TOOLS_MCP_POSTGRES_URL, else
$IDEMPOTENT_TOOLS_REDIS_URL or $IDEMPOTENT_TOOLS_POSTGRES_URL, which keep a password out of
the process list; else the SQLite file $IDEMPOTENT_TOOLS_DB, else ~/.idempotent_tools/store.db):
  --db PATH               a SQLite store file
  --redis URL             a Redis store (redis://host:6379/0), shared by many hosts
  --prefix P              the Redis store's key prefix
  --postgres URL          a Postgres store (postgres://user@host/db)
  --table T               the Postgres store's table

Options:
  --window D              how long a repeat counts as a retry (default 10m; 30s, 2h, 1d)
  --tool-call-id          a call that carries its client's tool call id in _meta (the
                          Claude Agent SDK's and Claude Code's "claudecode/toolUseId") is
                          that id and its arguments: a re-sent call replays, two calls
                          with the same arguments and other ids both run
  --config FILE           per-tool rules (JSON; see the README's MCP section)
  --url URL               the upstream server over Streamable HTTP instead of a command
                          (default: $IDEMPOTENT_TOOLS_MCP_URL)
  --header 'Name: value'  a header sent with every request to --url (repeatable); a
                          token belongs in $IDEMPOTENT_TOOLS_MCP_HEADERS instead, a JSON
                          object ({"Authorization": "Bearer <token>"}), out of the
                          process list. Variables IDEMPOTENT_TOOLS_MCP_* are the proxy's
                          own: the server it runs does not get them
  --max-message SIZE      the largest message read from the server or the client
                          (default 64mb; 512kb, 1gb): a larger answer is dropped and its
                          call answered with an error, the session goes on
  --log                   one line per tools/call on stderr: executed, replayed, passed
  -h, --help              this help`;

class UsageError extends Error {}

interface Parsed {
  values: {
    db?: string;
    redis?: string;
    prefix?: string;
    postgres?: string;
    table?: string;
    window?: string;
    'tool-call-id'?: boolean;
    config?: string;
    url?: string;
    header?: string[];
    'max-message'?: string;
    log?: boolean;
    help?: boolean;
  };
  command: string[];
  /** For an HTTP server: the headers of `--header` and `IDEMPOTENT_TOOLS_MCP_HEADERS`. */
  headers: Record<string, string>;
}

function parse(argv: string[]): Parsed {
  const dash = argv.indexOf('--');
  const own = dash === -1 ? argv : argv.slice(0, dash);
  const command = dash === -1 ? [] : argv.slice(dash + 1);
  let parsed;
  try {
    parsed = parseArgs({
      args: own,
      allowPositionals: true,
      strict: true,
      options: {
        db: { type: 'string' },
        redis: { type: 'string' },
        prefix: { type: 'string' },
        postgres: { type: 'string' },
        table: { type: 'string' },
        window: { type: 'string' },
        'tool-call-id': { type: 'boolean' },
        config: { type: 'string' },
        url: { type: 'string' },
        header: { type: 'string', multiple: true },
        'max-message': { type: 'string' },
        log: { type: 'boolean' },
        help: { type: 'boolean', short: 'h' },
      },
    });
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  const { values, positionals } = parsed;
  if (values.help) return { values, command, headers: {} };
  if (positionals.length > 0) {
    throw new UsageError(`put the server's command after "--": idempotent-tools mcp -- ${positionals.join(' ')}`);
  }
  const stores = ['db', 'redis', 'postgres'].filter((s) => values[s as keyof typeof values] !== undefined);
  if (stores.length > 1) throw new UsageError(`give one store, not ${stores.map((s) => `--${s}`).join(' and ')}`);
  if (values.url !== undefined && command.length > 0) throw new UsageError('give the server as a command after "--" or as --url, not both');
  // The server's URL from the environment (a token in its query stays out of the process list).
  const envUrl = given(process.env, MCP_URL);
  if (envUrl !== undefined && values.url === undefined && command.length > 0) {
    throw new UsageError(`${MCP_URL} is set, and a command is given after "--": give the server one way (unset ${MCP_URL} for a command)`);
  }
  const url = values.url ?? envUrl;
  if (values.header !== undefined && url === undefined) throw new UsageError('--header goes with --url');
  if (given(process.env, MCP_HEADERS) !== undefined && url === undefined) {
    throw new UsageError(`${MCP_HEADERS} goes with an HTTP server (--url or ${MCP_URL}); a command's server gets its own environment`);
  }
  if (url === undefined && command.length === 0) {
    throw new UsageError('no MCP server given: idempotent-tools mcp -- <command> [args...] (or --url URL)');
  }
  const headers = url === undefined ? {} : headersFrom(values.header ?? []);
  return { values: storeChoice({ ...values, url }), command, headers };
}

/** The store the flags name, else the one the environment names (a password in the
 * client config's `env` block stays out of the process list): the proxy's own variables
 * first, then the library's; else the SQLite file. */
function storeChoice(values: Parsed['values']): Parsed['values'] {
  let chosen = values;
  if (values.db === undefined && values.redis === undefined && values.postgres === undefined) {
    const [redisVar, postgresVar] =
      given(process.env, MCP_REDIS_URL) !== undefined || given(process.env, MCP_POSTGRES_URL) !== undefined
        ? [MCP_REDIS_URL, MCP_POSTGRES_URL]
        : ['IDEMPOTENT_TOOLS_REDIS_URL', 'IDEMPOTENT_TOOLS_POSTGRES_URL'];
    const redis = given(process.env, redisVar);
    const postgres = given(process.env, postgresVar);
    if (redis !== undefined && postgres !== undefined) {
      throw new UsageError(
        `both ${redisVar} and ${postgresVar} are set, and no store flag says which to use: unset one, or give --db, --redis or --postgres`,
      );
    }
    // With the same prefix and table variables as the library's defaultStore() and the CLI.
    const prefix = values.prefix ?? (redis !== undefined ? process.env.IDEMPOTENT_TOOLS_REDIS_PREFIX || undefined : undefined);
    const table = values.table ?? (postgres !== undefined ? process.env.IDEMPOTENT_TOOLS_POSTGRES_TABLE || undefined : undefined);
    chosen = { ...values, redis, postgres, prefix, table };
  }
  if (chosen.prefix !== undefined && chosen.redis === undefined) throw new UsageError('--prefix goes with --redis (or IDEMPOTENT_TOOLS_REDIS_URL)');
  if (chosen.table !== undefined && chosen.postgres === undefined) throw new UsageError('--table goes with --postgres (or IDEMPOTENT_TOOLS_POSTGRES_URL)');
  return chosen;
}

async function openStore(values: Parsed['values']): Promise<{ store: Store; description: string }> {
  if (values.redis !== undefined) {
    const store = new pkg.RedisStore({ url: values.redis, prefix: values.prefix });
    return { store, description: `Redis ${store.path}${values.prefix === undefined ? '' : ` (prefix ${values.prefix})`}` };
  }
  if (values.postgres !== undefined) {
    const store = new pkg.PostgresStore(values.table === undefined ? { url: values.postgres } : { url: values.postgres, table: values.table });
    return { store, description: `Postgres ${store.path} (table ${store.table})` };
  }
  // Not defaultStore(): that one is scoped to the project of the current folder, and MCP
  // clients start proxies from any folder; every proxy of a server must share its records.
  const store = new pkg.SqliteStore(values.db === undefined ? {} : { path: values.db });
  await store.ready();
  return { store, description: `SQLite ${store.path}` };
}

const SIZE_UNITS: Record<string, number> = { b: 1, kb: 1024, mb: 1024 ** 2, gb: 1024 ** 3 };

/** `"64mb"`, `"512kb"`, `"1gb"`, `"1000000"` (bytes) → bytes. */
function parseSize(text: string): number {
  const m = /^\s*(\d+(?:\.\d+)?)\s*(b|kb|mb|gb)?\s*$/i.exec(text);
  const bytes = m === null ? NaN : Math.floor(Number(m[1]) * SIZE_UNITS[(m[2] ?? 'b').toLowerCase()]);
  if (!(bytes >= 1024)) throw new UsageError(`--max-message must be a size of at least 1kb, such as 64mb or 512kb, not ${JSON.stringify(text)}`);
  return bytes;
}

/** The headers of `--header` flags, over those of `IDEMPOTENT_TOOLS_MCP_HEADERS`. */
function headersFrom(flags: string[]): Record<string, string> {
  const fromEnvironment = headersFromEnvironment(process.env, (message) => {
    throw new UsageError(message);
  });
  const headers: Record<string, string> = {};
  for (const flag of flags) {
    const colon = flag.indexOf(':');
    const name = colon === -1 ? '' : flag.slice(0, colon).trim();
    if (!HEADER_NAME.test(name)) {
      throw new UsageError(`--header must be "Name: value", such as "Authorization: Bearer <token>", not ${JSON.stringify(flag)}`);
    }
    headers[name] = flag.slice(colon + 1).trim();
  }
  return withHeaders(fromEnvironment, headers);
}

interface Upstream {
  transport: Transport;
  /** For messages: the command line or the URL. */
  description: string;
  /** For keys: a digest of everything that configures the server (see identity.ts). */
  id: string;
}

/** The server's identity, and who its calls belong to when the proxy is told (`IDEMPOTENT_TOOLS_MCP_SCOPE`): two users' proxies of one configuration are two servers in keys. */
function scoped(id: string): string {
  const scope = given(process.env, MCP_SCOPE);
  return scope === undefined ? id : createHash('sha256').update(JSON.stringify([id, scope])).digest('hex');
}

function upstreamFor(parsed: Parsed, limit: number, log: (line: string) => void): Upstream {
  if (parsed.values.url !== undefined) {
    let url: URL;
    try {
      url = new URL(parsed.values.url);
    } catch {
      throw new UsageError(`--url must be a URL such as http://127.0.0.1:3001/mcp, not ${JSON.stringify(parsed.values.url)}`);
    }
    const headers = parsed.headers;
    return {
      transport: new StreamableHTTPClientTransport(url, { requestInit: { headers }, fetch: exactFetch }),
      // For messages and the log: without a user, a password or a query (a token may be there).
      description: `${url.protocol}//${url.host}${url.pathname}${url.search === '' ? '' : '?…'}`,
      id: scoped(urlIdentity({ url: url.href, headers })),
    };
  }
  const [command, ...args] = parsed.command;
  // The whole environment: the server is the user's, configured the way they run it; but not
  // the proxy's own variables (its store's password, an HTTP server's headers).
  const env = upstreamEnvironment(process.env);
  return {
    transport: upstreamStdio({ command, args, env, stderr: 'inherit' }, limit, log, GUARD_ERROR),
    description: parsed.command.join(' '),
    id: scoped(commandIdentity({ command, args, cwd: process.cwd(), env })),
  };
}

/** Every line the proxy prints, escaped: tool names, keys and errors are others' text. */
export function printable(text: string): string {
  return text.split('\n').map(forTerminal).join('\n');
}

export async function main(argv: string[]): Promise<number> {
  const err = (text: string) => process.stderr.write(printable(text) + '\n');
  let parsed: Parsed;
  let config;
  try {
    parsed = parse(argv);
    if (parsed.values.help) {
      process.stdout.write(MCP_USAGE + '\n');
      return 0;
    }
    const window = parsed.values.window === undefined ? undefined : parseDuration(parsed.values.window, '--window');
    config = loadConfig({ window, file: parsed.values.config, toolCallId: parsed.values['tool-call-id'] });
  } catch (e) {
    if (!(e instanceof UsageError || e instanceof ConfigError)) throw e;
    err(`idempotent-tools mcp: ${e.message}\n\n${MCP_USAGE}`);
    return 2;
  }

  let store: Store;
  let storeDescription: string;
  try {
    ({ store, description: storeDescription } = await openStore(parsed.values));
  } catch (e) {
    err(`idempotent-tools mcp: ${(e as Error).message.replace(/^idempotent-tools: /, '')}`);
    return 1;
  }
  const log = (line: string) => {
    if (parsed.values.log) err(`idempotent-tools mcp: ${line}`);
  };
  log(`store: ${storeDescription}`);
  let upstream;
  let limit = DEFAULT_MAX_MESSAGE_BYTES;
  try {
    if (parsed.values['max-message'] !== undefined) limit = parseSize(parsed.values['max-message']);
    upstream = upstreamFor(parsed, limit, log);
  } catch (e) {
    if (!(e instanceof UsageError)) throw e;
    err(`idempotent-tools mcp: ${e.message}\n\n${MCP_USAGE}`);
    await store.close().catch(() => {});
    return 2;
  }
  const { transport, description, id } = upstream;
  log(
    config.server === undefined
      ? `server identity: ${id.slice(0, 16)} (a digest of its ${parsed.values.url === undefined ? 'command, arguments, folder and environment' : 'URL and headers'}; the config's "server" names it to share records on purpose)`
      : `server identity: "${config.server}" (the config's "server")`,
  );
  const proxy = new McpProxy({
    config,
    store,
    upstreamDescription: description,
    upstreamId: id,
    log: parsed.values.log ? (line) => err(line) : undefined,
    print: err,
  });
  try {
    await proxy.start(transport, downstreamStdio(limit, log));
  } catch (e) {
    err(`idempotent-tools mcp: cannot start the MCP server (${description}): ${(e as Error).message}`);
    await store.close().catch(() => {});
    return 1;
  }
  const stopPruning = keepPruned(store, log);
  void proxy.done.then(stopPruning);
  // The client closing our stdin is the end of the session: close the server with it.
  process.stdin.once('end', () => void proxy.finish());
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    process.once(signal, () => void proxy.shutdown(0));
  }
  const code = await proxy.done;
  // Whatever still holds the event loop (a stuck child's pipe) must not keep us alive.
  setTimeout(() => process.exit(code), 2000).unref();
  return code;
}
