/**
 * What `npm test` needs, made ready before any test file runs, so that the README's test
 * command passes on a fresh machine with nothing run first (issue 25): the Redis tests
 * start their own redis-server, and PostgreSQL's database is made here. When something
 * cannot be had, the run stops at once with one message naming it and the command that
 * provides it, instead of dozens of failing tests.
 *
 * PostgreSQL: the server at IDEMPOTENT_TOOLS_TEST_PG (default
 * postgres://postgres@127.0.0.1:5432/pg_helper) gets its database created when missing. When
 * no such server lets us in (none running, or one that asks for a password, as Debian's
 * package leaves it) and the variable was not set, a private server is started in a temp
 * folder (initdb, pg_ctl) for this run and stopped at its end.
 */

import { execFileSync, spawnSync } from 'node:child_process';
import { Client } from 'pg';

const DEFAULT_PG = 'postgres://postgres@127.0.0.1:5432/pg_helper';

function missing(what: string, fix: string): never {
  throw new Error(`npm test needs ${what}.\n  ${fix}`);
}

function checkRedis(): void {
  const bin = process.env.IDT_REDIS_SERVER || 'redis-server';
  if (spawnSync(bin, ['--version']).status !== 0) {
    missing(`${bin} on PATH (the Redis tests start their own servers)`, 'Install it: apt-get install redis-server (Debian, Ubuntu) or brew install redis (macOS).');
  }
}

function checkPgBinaries(): void {
  let ok = false;
  try {
    ok = execFileSync('pg_config', ['--bindir'], { encoding: 'utf8' }).trim() !== '';
  } catch {
    ok = false;
  }
  if (!ok) {
    missing('PostgreSQL\'s server programs (pg_config, initdb, pg_ctl: the outage tests start private servers)', 'Install them: apt-get install postgresql (Debian, Ubuntu) or brew install postgresql (macOS).');
  }
}

/** Connects to `url`'s server, on its maintenance database; null when it does not let us in. */
async function admin(url: string): Promise<Client | null> {
  const u = new URL(url);
  u.pathname = '/postgres';
  const client = new Client({ connectionString: u.href, connectionTimeoutMillis: 3000 });
  try {
    await client.connect();
    return client;
  } catch {
    await client.end().catch(() => {});
    return null;
  }
}

async function ensureDatabase(client: Client, url: string): Promise<void> {
  const db = decodeURIComponent(new URL(url).pathname.slice(1));
  const { rows } = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [db]);
  if (rows.length === 0) {
    try {
      await client.query(`CREATE DATABASE "${db.replace(/"/g, '""')}"`);
    } catch (err) {
      if ((err as { code?: string }).code !== '42P04') throw err; // made meanwhile by another run
    }
  }
}

/**
 * A second SQLite client that is not ours: the tests that hold the file's lock from another
 * program, or write a file as an older version did, use python3's sqlite3 module.
 */
function checkPython(): void {
  if (spawnSync('python3', ['-c', 'import sqlite3']).status !== 0) {
    missing('python3 with its sqlite3 module (a second SQLite client for the locking tests)', 'Install it: apt-get install python3 (Debian, Ubuntu); macOS has it with the Xcode command line tools.');
  }
}

export default async function setup(): Promise<() => Promise<void>> {
  checkRedis();
  checkPgBinaries();
  checkPython();
  const given = process.env.IDEMPOTENT_TOOLS_TEST_PG;
  const url = given ?? DEFAULT_PG;
  let client = await admin(url);
  let privateServer: { stop(): void } | undefined;
  if (client === null) {
    if (given !== undefined) {
      missing(`the PostgreSQL server of IDEMPOTENT_TOOLS_TEST_PG=${given}`, 'Start it, or unset IDEMPOTENT_TOOLS_TEST_PG to let the tests start a private server.');
    }
    // No server lets us in at the default address: one of our own for this run.
    const { PgServer } = await import('./postgres-server');
    const server = await PgServer.start();
    privateServer = server;
    const privateUrl = `postgres://postgres@127.0.0.1:${server.port}/pg_helper`;
    process.env.IDEMPOTENT_TOOLS_TEST_PG = privateUrl; // the test workers inherit it
    client = await admin(privateUrl);
    if (client === null) missing('a PostgreSQL server', `A private server was started at port ${server.port} but does not let us in; see its log in ${server.dir}.`);
    await ensureDatabase(client, privateUrl);
  } else {
    await ensureDatabase(client, url);
  }
  await client.end();
  return async () => {
    privateServer?.stop();
  };
}
