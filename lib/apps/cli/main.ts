/** The `idempotent-tools` command: look at and repair a store's records. */

import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline/promises';
import { parseArgs } from 'node:util';

import { pollChanges, sqliteChanges } from './changes.js';
import { age, count as counted } from './format.js';
import { InspectRefusal, type OutputMode, type ProjectScope, callStats, inspect, recordByKey, visibleCount } from './inspect.js';
import { parsePort, ui } from './ui.js';
import { forTerminal as t, rawEscaped } from '../terminal-text.js';
import { IdempotencyError, QueryError, SqliteStore, defaultStorePath, parseQuery, projectNamespace, storeFromEnvironment, type Store } from '../library.js';

const USAGE = `Usage: idempotent-tools [--db PATH | --redis URL | --postgres URL] <command> [options]

Commands:
  inspect                 list all records, newest first, as a table
  inspect --key K         show one record in full (K: the key or a unique start of it)
  inspect --follow        print calls as they settle, until Ctrl-C
  clear                   delete all records (asks first, unless --yes)
  clear --key K           delete one record
  release --key K         free a stuck pending record: the next call takes it over as a
                          dead owner's claim, asks its reconcile option (if it has one)
                          whether the side effect happened, and runs again only if not
  release --key K --no-reconcile
                          free it as failed: the next call runs again without asking
                          (check first that its side effect did not happen)
  prune                   delete expired records
  stats                   counts by status, the oldest pending record, store size
  migrate                 create the Postgres table (for roles that may not create it)
  ui [--port N]           serve the inspector page on 127.0.0.1, behind a random token
                          in the URL it prints
  mcp -- <command>        serve an MCP server on stdio with a retry guard on its tools
                          (idempotent-tools mcp --help)

Options:
  --db PATH               the SQLite store file (default: $IDEMPOTENT_TOOLS_DB,
                          else ~/.idempotent_tools/store.db)
  --project P             the project whose SQLite records to use (default: this
                          project's, as the default store names it; with --db: every
                          project's)
  --redis URL             a Redis store instead: redis://[user:password@]host:port/db
                          or rediss:// for TLS (default: $IDEMPOTENT_TOOLS_REDIS_URL,
                          which keeps a password out of ps; --db overrides it)
  --prefix P              the Redis store's key prefix (default: $IDEMPOTENT_TOOLS_REDIS_PREFIX,
                          else idempotent-tools:)
  --cluster               the --redis URL is a node of a Redis Cluster
  --postgres URL          a PostgreSQL store: postgres://user[:password]@host/db
                          (default: $IDEMPOTENT_TOOLS_POSTGRES_URL; migrate and --table
                          use $DATABASE_URL when neither is given)
  --table T               the Postgres table (default: $IDEMPOTENT_TOOLS_POSTGRES_TABLE,
                          else idempotent_tools_records)
  --key K                 the record's key, or a unique start of it (as git takes hashes)
  --name N                inspect: only calls of the function named N
  --status S              inspect: only pending, completed or failed records; or the
                          approval decisions approved, edited or rejected, each with
                          its call's executions
  --scope T               inspect: only calls of the thread, conversation or run T
  --since D               inspect: only records changed in the last D (90s, 15m, 1h, 2d)
  --limit N               inspect: at most N records (the newest; the table's default
                          is 1000, --json and --jsonl print all)
  --json                  machine-readable output
  --jsonl                 inspect: one JSON record per line
  -y, --yes               clear all without asking
  -h, --help              this help
  -v, --version           the package version

Exit codes: 0 done, 1 failed (no such record, store error, refused), 2 bad usage.`;

class UsageError extends Error {}
class Refusal extends Error {}

const COMMANDS = new Set(['inspect', 'clear', 'release', 'prune', 'stats', 'migrate', 'ui']);

/** Where the store's URL came from when no flag gave it (an environment variable): errors about it name that. */
let storeSource: string | undefined;

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
        project: { type: 'string' },
        cluster: { type: 'boolean' },
        postgres: { type: 'string' },
        table: { type: 'string' },
        key: { type: 'string' },
        json: { type: 'boolean' },
        jsonl: { type: 'boolean' },
        name: { type: 'string' },
        status: { type: 'string' },
        scope: { type: 'string' },
        since: { type: 'string' },
        limit: { type: 'string' },
        follow: { type: 'boolean' },
        'no-reconcile': { type: 'boolean' },
        port: { type: 'string' },
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
  if ([values.db, values.redis, values.postgres].filter((v) => v !== undefined).length > 1) {
    throw new UsageError('give one of --db, --redis and --postgres');
  }
  if ((command === 'migrate' || values.table !== undefined) && (values.db !== undefined || values.redis !== undefined)) {
    throw new UsageError(`${command === 'migrate' ? 'migrate' : '--table'} goes with --postgres`);
  }
  if (values.redis === undefined && values.db === undefined && values.postgres === undefined) {
    // No store flag: the store the library's defaultStore() uses, from the same variables.
    let choice;
    try {
      choice = storeFromEnvironment();
    } catch (err) {
      throw new UsageError((err as Error).message.replace(/^idempotent-tools: /, ''));
    }
    if (choice.kind === 'redis') {
      values.redis = choice.url;
      values.prefix ??= choice.prefix;
      storeSource = 'IDEMPOTENT_TOOLS_REDIS_URL (in the environment)';
    } else if (choice.kind === 'postgres') {
      values.postgres = choice.url;
      values.table ??= choice.table;
      storeSource = 'IDEMPOTENT_TOOLS_POSTGRES_URL (in the environment)';
    }
  }
  if (values.prefix !== undefined && values.redis === undefined) throw new UsageError('--prefix goes with --redis');
  if (values.project !== undefined && values.redis !== undefined) throw new UsageError('--project goes with the SQLite store, not --redis');
  if (values.cluster && values.redis === undefined) throw new UsageError('--cluster goes with --redis');
  if (values.key !== undefined && values.key.length === 0) throw new UsageError('--key needs a non-empty key');
  if (command === 'release' && values.key === undefined) throw new UsageError('release needs --key K');
  if (values['no-reconcile'] && command !== 'release') throw new UsageError('--no-reconcile goes with release');
  if ((command === 'prune' || command === 'stats' || command === 'migrate') && values.key !== undefined) {
    throw new UsageError(`${command} does not take --key`);
  }
  if (values.yes && command !== 'clear') throw new UsageError('--yes goes with clear');
  for (const flag of ['name', 'status', 'scope', 'since', 'limit', 'jsonl', 'follow'] as const) {
    if (values[flag] !== undefined && command !== 'inspect') throw new UsageError(`--${flag} goes with inspect`);
  }
  if (values.port !== undefined && command !== 'ui') throw new UsageError('--port goes with ui');
  if (command === 'ui' && (values.key !== undefined || values.json)) throw new UsageError('ui takes no --key or --json: the page has its own filters');
  let port;
  try {
    port = parsePort(values.port);
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  if (values.json && values.jsonl) throw new UsageError('give --json or --jsonl, not both');
  if (values.follow && values.key !== undefined) throw new UsageError('--follow prints every settle; filter it with --name, --status or --scope, not --key');
  let query;
  try {
    query = parseQuery(values);
  } catch (err) {
    if (err instanceof QueryError) throw new UsageError(err.message);
    throw err;
  }
  return { values, command, query, port };
}

type Values = ReturnType<typeof parse>['values'];

type OpenedStore = {
  store: Store & Partial<SqliteStore> & { migrate?(): Promise<boolean> };
  /** The place the CLI reads, as its messages name it (file and project, server and prefix, table). */
  where: string;
  retention: Retention;
  project?: ProjectScope;
  /** Where else records may be when none are found here (another prefix or table). */
  elsewhere?: string;
};

/** How expired records leave a store: said by `stats`, and by `inspect` when some are still there. */
interface Retention {
  summary: string;
  /** Absent: `inspect` does not ask (Redis: its stats read every record, and expired ones vanish by themselves). */
  advice?: (count: number) => string;
}

const PRUNE_BY_HAND: Retention = {
  summary: "expired records are deleted by the application's stores (when made, then every minute), or now by: idempotent-tools prune",
  advice: (n) => `delete ${n === 1 ? 'it' : 'them'} with: idempotent-tools prune`,
};

async function openStore(values: Values, command: string): Promise<OpenedStore> {
  if (values.redis !== undefined) {
    // Through the library's door (apps/library.ts), like everything the CLI uses.
    const { RedisStore } = await import('../library.js');
    let store;
    try {
      store = new RedisStore({ url: values.redis, prefix: values.prefix, ...(values.cluster ? { cluster: true } : {}) });
    } catch (e) {
      // A malformed URL is bad usage, named where it came from.
      throw new UsageError(`${storeSource ?? '--redis'}: ${(e as Error).message.replace(/^RedisStore: /, '')}`);
    }
    const retention: Retention = { summary: 'Redis deletes expired records itself (each record has an expiry)' };
    // The place is the server, its database and the prefix; a Redis store keeps no projects
    // apart (every process of an application shares its prefix), so there is no project to name.
    const prefix = JSON.stringify(store.prefix);
    const elsewhere =
      `(${t(store.path)} under prefix ${t(prefix)} holds every project's records of that prefix: a RedisStore keeps no ` +
      'projects apart. Records written under another prefix? give --prefix P: the prefix option of your RedisStore, ' +
      'or IDEMPOTENT_TOOLS_REDIS_PREFIX)';
    return { store, where: `${store.path} under prefix ${prefix}`, retention, elsewhere };
  }
  if (values.postgres !== undefined || values.table !== undefined || command === 'migrate') {
    const { PostgresStore } = await import('../library.js');
    const url = values.postgres ?? process.env.DATABASE_URL;
    if (url === undefined || url === '') throw new Refusal('give --postgres URL (or set DATABASE_URL)');
    // Inspection sees what is there: this store deletes nothing by itself (`prune` does).
    let store;
    try {
      store = new PostgresStore({ url, table: values.table, createTable: false, pruneIntervalMs: 0 });
    } catch (e) {
      // A URL from the environment is named by its variable; what the flags gave goes on as before.
      if (storeSource === undefined) throw e;
      throw new UsageError(`${storeSource}: ${(e as Error).message.replace(/^PostgresStore: /, '')}`);
    }
    const elsewhere = `(records in another table? give --table T: the table option of your PostgresStore, or IDEMPOTENT_TOOLS_POSTGRES_TABLE)`;
    return { store, where: `${store.path} table ${store.table}`, retention: PRUNE_BY_HAND, elsewhere };
  }
  const path = values.db ?? defaultStorePath();
  if (!existsSync(path)) {
    throw new Refusal(`no store file at ${path} (nothing has been recorded there); give --db PATH`);
  }
  // The default file holds every project's records: show this project's (the folder the CLI
  // is run in: the project of the programs kept there), as their default store sees them. A
  // file named with --db: every project's, unless --project says which.
  const project = values.project ?? (values.db === undefined ? projectNamespace(process.cwd()) : undefined);
  const store = new SqliteStore(project === undefined ? { path, allNamespaces: true } : { path, namespace: project });
  await store.ready();
  const retention: Retention = {
    summary: 'expired records are deleted when a store opens, and every minute while one is open',
    advice: (n) => `an open store deletes ${n === 1 ? 'it' : 'them'} within a minute, or now: idempotent-tools prune`,
  };
  if (project === undefined) return { store, where: store.path, retention };
  // The file may hold other projects' records, which this view leaves out: say so.
  const otherProjects = async () => {
    const every = new SqliteStore({ path, allNamespaces: true });
    try {
      return ((await visibleCount(every)) ?? 0) - ((await visibleCount(store)) ?? 0);
    } finally {
      await every.close();
    }
  };
  return { store, where: store.path, retention, project: { name: project, path: store.path, otherProjects } };
}

/** What `release` did, and what the next call with the key will do. */
function releasedMessage(key: string, attempts: number, reconcile: boolean): string {
  const fenced = 'If its old owner is still running, its result will be refused.';
  if (!reconcile) {
    return `Released ${t(key)} as failed: the next call with this key runs the function again (attempt ${attempts + 1}) without asking reconcile. ${fenced}`;
  }
  return (
    `Released ${t(key)}: nobody holds its claim now. The next call with this key takes it over (attempt ${attempts + 1}) as it takes ` +
    "over a dead owner's claim: it asks the function's reconcile option whether the side effect happened, and records that " +
    `result instead of running; without reconcile (or when it answers no) the function runs again. ${fenced}`
  );
}

async function confirm(question: string): Promise<boolean> {
  const rl = createInterface({ input: process.stdin, output: process.stderr });
  try {
    return /^y(es)?$/i.test((await rl.question(question)).trim());
  } finally {
    rl.close();
  }
}

async function run(parsed: ReturnType<typeof parse>, out: (text: string) => void, err: (text: string) => void): Promise<void> {
  const { values, query } = parsed;
  const command = parsed.command!;
  const { store, where, retention, project, elsewhere } = await openStore(values, command);
  let key = values.key;
  const json = values.json === true;
  const missing = () => new Refusal(`no record with key ${t(key!)} in ${t(where)}`);
  try {
    switch (command) {
      case 'inspect': {
        const mode: OutputMode = values.jsonl ? 'jsonl' : json ? 'json' : 'text';
        const follow = values.follow
          ? () => (store instanceof SqliteStore ? sqliteChanges(store.path) : Promise.resolve(pollChanges()))
          : undefined;
        await inspect(store, where, { query: query!, mode, out, err, follow, project, elsewhere, expiredAdvice: retention.advice, countHidden: retention.advice !== undefined });
        return;
      }
      case 'ui': {
        await ui(store, where, parsed.port, out);
        return;
      }
      case 'clear': {
        if (key !== undefined) {
          key = (await recordByKey(store, where, key, elsewhere)).key;
          if ((await store.clear(key)) === 0) throw missing();
          out(json ? JSON.stringify({ deleted: 1 }) : `Deleted the record ${t(key)}.`);
          return;
        }
        if (!values.yes) {
          if (!process.stdin.isTTY) {
            throw new Refusal('refusing to delete every record without --yes (standard input is not a terminal to ask on)');
          }
          // Counted as clear() deletes: expired records that still exist included (the
          // store's key-id secret goes too, but it is not a call's record).
          const s = await callStats(store);
          const count = s ? s.pending + s.completed + s.failed + s.expired : (await store.listRecords()).length;
          if (!(await confirm(`Delete ${count === 1 ? 'the 1 record' : `all ${count} records`} in ${t(where)}? [y/N] `))) {
            out(json ? JSON.stringify({ deleted: 0 }) : 'Nothing deleted.');
            return;
          }
        }
        const deleted = await store.clear();
        out(json ? JSON.stringify({ deleted }) : `Deleted ${counted(deleted, 'record')}.`);
        return;
      }
      case 'release': {
        const before = await recordByKey(store, where, key!, elsewhere);
        key = before.key;
        const reconcile = values['no-reconcile'] !== true;
        if (!(await store.release!(key, { reconcile }))) {
          const r = await store.get(key!);
          if (r === null) throw missing();
          throw new Refusal(`the record ${t(key)} is ${r.status}, not pending: there is nothing to release`);
        }
        out(json ? JSON.stringify({ released: key, reconcile }) : releasedMessage(key, before.attempts, reconcile));
        return;
      }
      case 'prune': {
        const deleted = await store.prune!();
        out(json ? JSON.stringify({ deleted }) : `Deleted ${counted(deleted, 'expired record')}.`);
        return;
      }
      case 'migrate': {
        const created = await store.migrate!();
        out(json ? JSON.stringify({ created }) : created ? `Created ${t(where)}.` : `${t(where)} is there and up to date.`);
        return;
      }
      case 'stats': {
        // Calls' records only: the store's key-id secret is the library's own.
        const s = (await callStats(store))!;
        const others = project === undefined ? 0 : await project.otherProjects();
        if (json) {
          out(JSON.stringify(project === undefined ? s : { ...s, project: project.name, otherProjects: others }, null, 2));
        } else {
          const oldest = s.oldestPendingAt === null ? 'none' : `${age(Date.now() - s.oldestPendingAt)} old`;
          const size = s.sizeBytes === null ? 'unknown' : `${(s.sizeBytes / 1024).toFixed(1)} KiB`;
          const kept = s.pending + s.completed + s.failed + s.expired;
          out(
            [
              `store      ${t(where)}`,
              ...(project === undefined
                ? []
                : [`project    ${t(JSON.stringify(project.name))} (what its calls see: its own records and the file's records without a project)` +
                  (others > 0 ? `; ${counted(others, 'record')} of other projects not counted (--db ${t(project.path)} counts every project's)` : '')]),
              `kept       ${counted(kept, 'record')} (${s.completed} completed, ${s.pending} pending, ${s.failed} failed; ${s.expired} expired, not yet deleted)`,
              `completed  ${s.completed}`,
              `pending    ${s.pending} (oldest: ${oldest})`,
              `failed     ${s.failed}`,
              `expired    ${s.expired} (delete them with: idempotent-tools prune)`,
              `retention  ${retention.summary}`,
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
  return JSON.parse(readFileSync(join(__dirname, '..', '..', '..', 'package.json'), 'utf8')).version;
}

export async function main(argv: string[]): Promise<number> {
  // A program of its own on top of the library; loaded only when asked for.
  if (argv[0] === 'mcp') return (await import('../mcp/cli.js')).main(argv.slice(1));
  let exact = false; // --json and --jsonl: stdout is machine-readable, written exactly
  const out = (text: string) => process.stdout.write((exact ? text : rawEscaped(text)) + '\n');
  const err = (text: string) => process.stderr.write(rawEscaped(text) + '\n');
  let parsed;
  try {
    parsed = parse(argv);
  } catch (e) {
    if (!(e instanceof UsageError)) throw e;
    err(`idempotent-tools: ${e.message}\n\n${USAGE}`);
    return 2;
  }
  exact = parsed.values.json === true || parsed.values.jsonl === true;
  if (parsed.values.help) {
    out(USAGE);
    return 0;
  }
  if (parsed.values.version) {
    out(version());
    return 0;
  }
  try {
    await run(parsed, out, err);
    return 0;
  } catch (e) {
    if (e instanceof UsageError) {
      err(`idempotent-tools: ${e.message}\n\n${USAGE}`);
      return 2;
    }
    if (e instanceof Refusal || e instanceof InspectRefusal || e instanceof IdempotencyError || e instanceof TypeError || e instanceof RangeError) {
      const message = e.message.replace(/^idempotent-tools: /, '');
      err(`idempotent-tools: ${message}`);
      return 1;
    }
    throw e;
  }
}

/** Runs the command with the process's arguments, and sets its exit code. */
export function runFromArgv(): void {
  main(process.argv.slice(2)).then(
    (code) => {
      process.exitCode = code;
    },
    (e) => {
      process.stderr.write(`idempotent-tools: unexpected error: ${rawEscaped(e instanceof Error ? e.message : String(e))}\n`);
      process.exitCode = 1;
    },
  );
}
