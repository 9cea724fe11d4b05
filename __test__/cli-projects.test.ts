// What `inspect` and `stats` show in a project matches what a call there would see
// (issue 19, finding 10): a project's store honours the records of the namespace ''
// (an older file, `new SqliteStore({ path })`, the MCP proxy), so the CLI lists them; and
// when the project or a filter hides records, it says how many and the flag that shows them.

import { spawn } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

import { ROOT, collect, lib, tempDir } from './helpers';

const { idempotent, SqliteStore } = lib;
const CLI = join(ROOT, 'dist', 'cli.js');

function project(root: string, name: string): string {
  const dir = join(root, name);
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name, private: true }));
  return dir;
}

function cli(cwd: string, db: string, args: string[]) {
  const env: Record<string, string | undefined> = { ...process.env, IDEMPOTENT_TOOLS_DB: db, NO_COLOR: '1' };
  delete env.IDEMPOTENT_TOOLS_NAMESPACE;
  return collect(spawn(process.execPath, [CLI, ...args], { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] }));
}

describe("inspect in a project: the records its calls honour, and what it leaves out", () => {
  it("lists the file's records without a project (a call there replays them), and counts the other projects' records", async () => {
    const root = tempDir();
    const db = join(root, 'store.db');
    const a = project(root, 'project-a');
    // A record without a project (as `new SqliteStore({ path })` and the MCP proxy write them) ...
    const plain = new SqliteStore({ path: db });
    const send = idempotent(async function sendWelcome(email: string) {
      return { email, by: 'plain' };
    }, { store: plain });
    await send('ada@example.com');
    await plain.close();
    // ... and one of another project.
    const b = new SqliteStore({ path: db, namespace: 'project-b' });
    await idempotent(async function other() {
      return 1;
    }, { store: b })();
    await b.close();

    // What a call in project A sees: the record without a project is replayed.
    const inA = new SqliteStore({ path: db, namespace: 'project-a' });
    let ran = false;
    const sendInA = idempotent(async function sendWelcome(email: string) {
      ran = true;
      return { email, by: 'project-a' };
    }, { store: inA });
    expect(await sendInA('ada@example.com')).toEqual({ email: 'ada@example.com', by: 'plain' });
    expect(ran).toBe(false);
    await inA.close();

    const json = await cli(a, db, ['inspect', '--json']);
    expect(json.code).toBe(0);
    expect(JSON.parse(json.stdout).map((r: { name: string; namespace: string }) => [r.name, r.namespace])).toEqual([['sendWelcome', '']]);

    const text = await cli(a, db, ['inspect']);
    expect(text.code).toBe(0);
    expect(text.stdout).toMatch(/sendWelcome/);
    expect(text.stdout).not.toMatch(/No records/);
    expect(text.stderr).toMatch(/1 record of other projects in .* is not shown.*--db /s);

    const filtered = await cli(a, db, ['inspect', '--status', 'failed']);
    expect(filtered.stdout).toMatch(/No records match in .* for project "project-a"\./);
    expect(filtered.stderr).toMatch(/1 more record in .* does not match --status; leave it out to see it\)/);

    const stats = await cli(a, db, ['stats']);
    expect(stats.stdout).toMatch(/project +"project-a"/);
    expect(stats.stdout).toMatch(/completed +1\b/);
    expect(stats.stdout).toMatch(/1 record of other projects not counted \(--db /);
    const statsJson = JSON.parse((await cli(a, db, ['stats', '--json'])).stdout);
    expect(statsJson).toMatchObject({ completed: 1, project: 'project-a', otherProjects: 1 });

    // Every project's, from the file itself: nothing hidden, nothing to say.
    const every = await cli(root, db, ['--db', db, 'inspect']);
    expect(every.stdout).toMatch(/sendWelcome/);
    expect(every.stdout).toMatch(/project-b/);
    expect(every.stderr).toBe('');
  });
});
