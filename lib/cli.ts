#!/usr/bin/env node
/** The `idempotent-tools` command: look at and repair a store's records. */

import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline/promises';
import { parseArgs } from 'node:util';

import { IdempotencyError } from './errors.js';
import { SqliteStore, defaultStorePath } from './sqlite-store.js';
import type { IdempotencyRecord, Store } from './store.js';

const USAGE = `Usage: idempotent-tools [--db PATH | --redis URL] <command> [options]

Commands:
  inspect                 list all records, as a table
  inspect --key K         show one record in full
  clear                   delete all records (asks first, unless --yes)
  clear --key K           delete one record
  release --key K         free a stuck pending record, so the next call runs again
                          (check first that its side effect did not happen)
  prune                   delete expired records
  stats                   counts by status, the oldest pending record, store size
  mcp -- <command>        serve an MCP server on stdio with a retry guard on its tools
                          (idempotent-tools mcp --help)

Options:
  --db PATH               the SQLite store file (default: $IDEMPOTENT_TOOLS_DB,
                          else ~/.idempotent_tools/store.db)
  --redis URL             a Redis store instead: redis://[user:password@]host:port/db
                          or rediss:// for TLS
  --prefix P              the Redis store's key prefix (default: idempotent-tools:)
  --key K                 the record's key
  --json                  machine-readable output
  -y, --yes               clear all without asking
  -h, --help              this help
  -v, --version           the package version

Exit codes: 0 done, 1 failed (no such record, store error, refused), 2 bad usage.`;

class UsageError extends Error {}
class Refusal extends Error {}

const COMMANDS = new Set(['inspect', 'clear', 'release', 'prune', 'stats']);

function parse(argv: string[]) {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      strict: true,
      options: {
        db: { type: 'string' },
        redis: { type: 'string' },
        prefix: { type: 'string' },
        key: { type: 'string' },
        json: { type: 'boolean' },
        yes: { type: 'boolean', short: 'y' },
        help: { type: 'boolean', short: 'h' },
        version: { type: 'boolean', short: 'v' },
      },
    });
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  const { values, positionals } = parsed;
  if (values.help || values.version) return { values, command: undefined };
  if (positionals.length === 0) throw new UsageError('no command given');
  if (positionals.length > 1) throw new UsageError(`one command at a time, got: ${positionals.join(' ')}`);
  const command = positionals[0];
  if (!COMMANDS.has(command)) throw new UsageError(`unknown command "${command}"`);
  if (values.db !== undefined && values.redis !== undefined) throw new UsageError('give --db or --redis, not both');
  if (values.prefix !== undefined && values.redis === undefined) throw new UsageError('--prefix goes with --redis');
  if (values.key !== undefined && values.key.length === 0) throw new UsageError('--key needs a non-empty key');
  if (command === 'release' && values.key === undefined) throw new UsageError('release needs --key K');
  if ((command === 'prune' || command === 'stats') && values.key !== undefined) {
    throw new UsageError(`${command} does not take --key`);
  }
  if (values.yes && command !== 'clear') throw new UsageError('--yes goes with clear');
  return { values, command };
}

type Values = ReturnType<typeof parse>['values'];

async function openStore(values: Values): Promise<{ store: Store & Partial<SqliteStore>; where: string }> {
  if (values.redis !== undefined) {
    // Loaded only when asked for, so the SQLite path never touches Redis code.
    const { RedisStore } = await import('./redis-store.js');
    const store = new RedisStore({ url: values.redis, prefix: values.prefix });
    return { store, where: store.path };
  }
  const path = values.db ?? defaultStorePath();
  if (!existsSync(path)) {
    throw new Refusal(`no store file at ${path} (nothing has been recorded there); give --db PATH`);
  }
  const store = new SqliteStore({ path });
  await store.ready();
  return { store, where: store.path };
}

function age(ms: number): string {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m`;
  if (s < 86400) return `${Math.floor(s / 3600)}h`;
  return `${Math.floor(s / 86400)}d`;
}

function expiry(r: IdempotencyRecord, now: number): string {
  return r.expiresAt === null ? 'never' : `in ${age(r.expiresAt - now)}`;
}

function table(records: IdempotencyRecord[]): string {
  const now = Date.now();
  const rows = [
    ['KEY', 'NAME', 'STATUS', 'ATTEMPTS', 'AGE', 'EXPIRES'],
    ...records.map((r) => [r.key, r.name, r.status, String(r.attempts), age(now - r.createdAt), expiry(r, now)]),
  ];
  const widths = rows[0].map((_, i) => Math.max(...rows.map((row) => row[i].length)));
  return rows.map((row) => row.map((cell, i) => (i === row.length - 1 ? cell : cell.padEnd(widths[i]))).join('  ')).join('\n');
}

function detail(r: IdempotencyRecord): string {
  const now = Date.now();
  const lines: Array<[string, string]> = [
    ['key', r.key],
    ['name', r.name],
    ['status', r.status],
    ['attempts', String(r.attempts)],
    ['created', `${new Date(r.createdAt).toISOString()} (${age(now - r.createdAt)} ago)`],
    ['updated', `${new Date(r.updatedAt).toISOString()} (${age(now - r.updatedAt)} ago)`],
    ['expires', r.expiresAt === null ? 'never' : new Date(r.expiresAt).toISOString()],
    ['fingerprint', r.fingerprint],
  ];
  if (r.leaseExpiresAt !== null) lines.push(['lease until', new Date(r.leaseExpiresAt).toISOString()]);
  if (r.error !== null) lines.push(['error', `${r.error.name}: ${r.error.message}`]);
  if (r.status === 'completed' && r.error === null) {
    lines.push(['result', r.result === undefined ? 'undefined' : JSON.stringify(r.result, null, 2)]);
  }
  const width = Math.max(...lines.map(([k]) => k.length));
  return lines.map(([k, v]) => `${k.padEnd(width)}  ${v}`).join('\n');
}

async function confirm(question: string): Promise<boolean> {
  const rl = createInterface({ input: process.stdin, output: process.stderr });
  try {
    return /^y(es)?$/i.test((await rl.question(question)).trim());
  } finally {
    rl.close();
  }
}

async function run(command: string, values: Values, out: (text: string) => void): Promise<void> {
  const { store, where } = await openStore(values);
  const key = values.key;
  const json = values.json === true;
  const missing = () => new Refusal(`no record with key ${key} in ${where}`);
  try {
    switch (command) {
      case 'inspect': {
        if (key !== undefined) {
          const r = await store.get(key);
          if (r === null) throw missing();
          out(json ? JSON.stringify(r, null, 2) : detail(r));
        } else {
          const records = await store.listRecords();
          out(json ? JSON.stringify(records, null, 2) : records.length === 0 ? `No records in ${where}.` : table(records));
        }
        return;
      }
      case 'clear': {
        if (key !== undefined) {
          if ((await store.clear(key)) === 0) throw missing();
          out(json ? JSON.stringify({ deleted: 1 }) : `Deleted the record ${key}.`);
          return;
        }
        if (!values.yes) {
          if (!process.stdin.isTTY) {
            throw new Refusal('refusing to delete every record without --yes (standard input is not a terminal to ask on)');
          }
          const count = (await store.listRecords()).length;
          if (!(await confirm(`Delete all ${count} records in ${where}? [y/N] `))) {
            out(json ? JSON.stringify({ deleted: 0 }) : 'Nothing deleted.');
            return;
          }
        }
        const deleted = await store.clear();
        out(json ? JSON.stringify({ deleted }) : `Deleted ${deleted} record${deleted === 1 ? '' : 's'}.`);
        return;
      }
      case 'release': {
        if (!(await store.release!(key!))) {
          const r = await store.get(key!);
          if (r === null) throw missing();
          throw new Refusal(`the record ${key} is ${r.status}, not pending: there is nothing to release`);
        }
        out(json ? JSON.stringify({ released: key }) : `Released ${key}: the next call with this key runs again.`);
        return;
      }
      case 'prune': {
        const deleted = await store.prune!();
        out(json ? JSON.stringify({ deleted }) : `Deleted ${deleted} expired record${deleted === 1 ? '' : 's'}.`);
        return;
      }
      case 'stats': {
        const s = await store.stats!();
        if (json) {
          out(JSON.stringify(s, null, 2));
        } else {
          const oldest = s.oldestPendingAt === null ? 'none' : `${age(Date.now() - s.oldestPendingAt)} old`;
          const size = s.sizeBytes === null ? 'unknown' : `${(s.sizeBytes / 1024).toFixed(1)} KiB`;
          out(
            [
              `store      ${where}`,
              `completed  ${s.completed}`,
              `pending    ${s.pending} (oldest: ${oldest})`,
              `failed     ${s.failed}`,
              `expired    ${s.expired} (delete them with: idempotent-tools prune)`,
              `size       ${size}`,
            ].join('\n'),
          );
        }
        return;
      }
    }
  } finally {
    await store.close();
  }
}

function version(): string {
  return JSON.parse(readFileSync(join(__dirname, '..', 'package.json'), 'utf8')).version;
}

export async function main(argv: string[]): Promise<number> {
  // A program of its own on top of the library; loaded only when asked for.
  if (argv[0] === 'mcp') return (await import('./mcp/cli.js')).main(argv.slice(1));
  const out = (text: string) => process.stdout.write(text + '\n');
  const err = (text: string) => process.stderr.write(text + '\n');
  let parsed;
  try {
    parsed = parse(argv);
  } catch (e) {
    if (!(e instanceof UsageError)) throw e;
    err(`idempotent-tools: ${e.message}\n\n${USAGE}`);
    return 2;
  }
  if (parsed.values.help) {
    out(USAGE);
    return 0;
  }
  if (parsed.values.version) {
    out(version());
    return 0;
  }
  try {
    await run(parsed.command!, parsed.values, out);
    return 0;
  } catch (e) {
    if (e instanceof Refusal || e instanceof IdempotencyError || e instanceof TypeError || e instanceof RangeError) {
      const message = e.message.replace(/^idempotent-tools: /, '');
      err(`idempotent-tools: ${message}`);
      return 1;
    }
    throw e;
  }
}

if (require.main === module) {
  main(process.argv.slice(2)).then(
    (code) => {
      process.exitCode = code;
    },
    (e) => {
      process.stderr.write(`idempotent-tools: unexpected error: ${e instanceof Error ? e.message : String(e)}\n`);
      process.exitCode = 1;
    },
  );
}
