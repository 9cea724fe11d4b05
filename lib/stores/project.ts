/**
 * The project a process belongs to, so that the default store (one file shared by every
 * project of the user) keeps each project's records apart: two projects that call the
 * same function with the same arguments must each run their own call.
 */

import { readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';

/**
 * The current project's namespace: `IDEMPOTENT_TOOLS_NAMESPACE` when set (non-empty),
 * else the `name` of the nearest package.json that has one, walking up from `cwd`
 * (default `process.cwd()`), else the absolute path of `cwd` itself.
 */
export function projectNamespace(cwd: string = process.cwd()): string {
  const fromEnv = process.env.IDEMPOTENT_TOOLS_NAMESPACE;
  if (fromEnv !== undefined && fromEnv !== '') return fromEnv;
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
