/**
 * The project a process belongs to, so that the default store (one file shared by every
 * project of the user) keeps each project's records apart: two projects that call the
 * same function with the same arguments must each run their own call.
 */

import { readFileSync, realpathSync } from 'node:fs';
import { dirname, join, resolve, sep } from 'node:path';

/**
 * The current project's namespace: `IDEMPOTENT_TOOLS_NAMESPACE` when set (non-empty); else,
 * given a folder, the folder's project (the CLI's `inspect` in a project); else the
 * program's project, whatever folder it was started from (`programProject`).
 *
 * A folder's project is the `name` of the nearest package.json that has one, walking up from
 * it, else the folder's absolute path.
 */
export function projectNamespace(cwd?: string): string {
  const fromEnv = process.env.IDEMPOTENT_TOOLS_NAMESPACE;
  if (fromEnv !== undefined && fromEnv !== '') return fromEnv;
  return cwd === undefined ? programProject() : folderProject(cwd);
}

/**
 * The program's project: the same wherever the program is started from (a cron job, a
 * service unit, `node /srv/app/worker.js` from `/`), since a program started from another
 * folder is the same program and must replay its calls. Read from its entry script
 * (`process.argv[1]`, or pm2's `pm_exec_path`), symlinks resolved:
 * - a script under `node_modules` (a test runner, `tsx`, `pm2`, a bin of a dependency runs
 *   the program): the package whose `node_modules` that is (the first one in the path, so
 *   pnpm's nested stores count as the project's), else, for a tool installed globally, the
 *   folder the program was started in;
 * - any other script: the nearest package.json name from the script's folder up, else that
 *   folder's absolute path;
 * - no script (the REPL, `node -e`): the folder the program was started in.
 */
export function programProject(): string {
  const entry = entryScript();
  if (entry === undefined) return folderProject(process.cwd());
  let found = byEntry.get(entry);
  if (found === undefined) {
    const modules = entry.indexOf(`${sep}node_modules${sep}`);
    if (modules !== -1) found = nearestPackageName(entry.slice(0, modules) || sep) ?? folderProject(process.cwd());
    else found = nearestPackageName(dirname(entry)) ?? dirname(entry);
    byEntry.set(entry, found);
  }
  return found;
}

/** The program's entry script, its real path; undefined when there is none. */
function entryScript(): string | undefined {
  const given = process.env.pm_exec_path || process.argv[1];
  if (given === undefined || given === '' || given === '-') return undefined;
  try {
    return realpathSync(resolve(given));
  } catch {
    return resolve(given);
  }
}

const byEntry = new Map<string, string>();

/** A folder's project: its nearest package.json name, else its absolute path. */
function folderProject(cwd: string): string {
  const start = resolve(cwd);
  let found = byFolder.get(start);
  if (found === undefined) {
    found = nearestPackageName(start) ?? start;
    byFolder.set(start, found);
  }
  return found;
}

/** Found once per folder: tools are often wrapped anew per request, each asking again. */
const byFolder = new Map<string, string>();

function nearestPackageName(start: string): string | undefined {
  for (let dir = start; ; dir = dirname(dir)) {
    const name = packageName(join(dir, 'package.json'));
    if (name !== undefined || dirname(dir) === dir) return name;
  }
}

/** The `name` of the package.json at `file`; undefined when there is none, it has no
 * name (a folder's `{"type": "module"}` marker), or it cannot be read as JSON. */
function packageName(file: string): string | undefined {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    return undefined;
  }
  try {
    const { name } = JSON.parse(text) as { name?: unknown };
    return typeof name === 'string' && name !== '' ? name : undefined;
  } catch {
    return undefined;
  }
}
