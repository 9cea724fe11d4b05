/**
 * PostgreSQL for the tests. The shared server (IDEMPOTENT_TOOLS_TEST_PG, default
 * postgres://postgres@127.0.0.1:5432/pg_helper; `.ci/postgres.sh` makes sure it answers
 * and the database exists) holds each test's own table; `PgServer.start()` runs a private
 * server on a free port (initdb, pg_ctl) that a test may stop and restart. As root, the
 * server runs as the `postgres` OS user (PostgreSQL refuses to run as root).
 */

import { execFileSync, spawnSync } from 'node:child_process';
import { chmodSync, chownSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from 'pg';

export const PG_URL = process.env.IDEMPOTENT_TOOLS_TEST_PG ?? 'postgres://postgres@127.0.0.1:5432/pg_helper';

let tables = 0;
const made: string[] = [];

/** A table name no other test uses (dropped by `dropTables`). */
export function uniqueTable(): string {
  const name = `t_${process.pid}_${++tables}_${Math.random().toString(36).slice(2, 8)}`;
  made.push(name);
  return name;
}

/** Runs one statement on the shared server with a short-lived client. */
export async function sql(text: string, values: unknown[] = [], url = PG_URL) {
  const client = new Client({ connectionString: url });
  await client.connect();
  try {
    return await client.query(text, values);
  } finally {
    await client.end();
  }
}

export async function dropTables(): Promise<void> {
  const names = made.splice(0);
  if (names.length > 0) await sql(`DROP TABLE IF EXISTS ${names.map((n) => `"${n}"`).join(', ')}`);
}

function freePort(): Promise<number> {
  return new Promise((done, fail) => {
    const server = createServer();
    server.once('error', fail);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => done(port));
    });
  });
}

const BIN = execFileSync('pg_config', ['--bindir'], { encoding: 'utf8' }).trim();
const asRoot = process.getuid?.() === 0;

/** Runs a server binary, as the `postgres` OS user when we are root. */
function pgTool(tool: string, args: string[]): void {
  const command = asRoot ? 'runuser' : join(BIN, tool);
  const argv = asRoot ? ['-u', 'postgres', '--', join(BIN, tool), ...args] : args;
  const r = spawnSync(command, argv, { encoding: 'utf8', cwd: tmpdir() });
  if (r.status !== 0) throw new Error(`${tool} ${args.join(' ')} failed (${r.status}): ${r.stderr || r.stdout}`);
}

/** A private PostgreSQL server in a temp folder, on a free port. */
export class PgServer {
  private constructor(
    readonly dir: string,
    readonly port: number,
  ) {}

  get url(): string {
    return `postgres://postgres@127.0.0.1:${this.port}/postgres`;
  }

  static async start(): Promise<PgServer> {
    const dir = mkdtempSync(join(tmpdir(), 'idempotent-tools-pg-'));
    chmodSync(dir, 0o700);
    if (asRoot) {
      const id = (flag: string) => Number(execFileSync('id', [flag, 'postgres'], { encoding: 'utf8' }).trim());
      chownSync(dir, id('-u'), id('-g'));
    }
    pgTool('initdb', ['-D', join(dir, 'data'), '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--no-sync']);
    const server = new PgServer(dir, await freePort());
    server.begin();
    return server;
  }

  /** Starts the server (again) and waits until it accepts connections. */
  begin(): void {
    pgTool('pg_ctl', [
      '-D', join(this.dir, 'data'), '-l', join(this.dir, 'log'), '-w', '-t', '30',
      '-o', `-p ${this.port} -k ${this.dir} -c listen_addresses=127.0.0.1 -c fsync=off`, 'start',
    ]);
  }

  /** Stops the server at once (open connections are cut). */
  halt(): void {
    pgTool('pg_ctl', ['-D', join(this.dir, 'data'), '-m', 'immediate', '-w', 'stop']);
  }

  stop(): void {
    try {
      this.halt();
    } catch {
      // already stopped
    }
    rmSync(this.dir, { recursive: true, force: true });
  }
}
