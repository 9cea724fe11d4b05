/** `idempotent-tools ui`: serves the inspector page for the store until interrupted. */

import { forTerminal } from '../terminal-text.js';
import { serveInspector } from '../ui/server.js';
import { type Store } from '../library.js';

export async function ui(store: Store, where: string, port: number | undefined, out: (text: string) => void): Promise<void> {
  // In its own process the page sees records only; replays are counted by a server inside the application.
  const inspector = await serveInspector({ store, where, port, liveEvents: false });
  out(`The inspector for ${forTerminal(where)} is at:\n\n    ${inspector.url}\n\nOnly this machine can reach it, and only with the token in the URL. Ctrl-C to stop.`);
  await new Promise<void>((done) => {
    process.once('SIGINT', done);
    process.once('SIGTERM', done);
  });
  await inspector.close();
}

/** `--port N`: a whole number from 0 (any free port) to 65535. */
export function parsePort(text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  const n = Number(text);
  if (!/^\d+$/.test(text) || n > 65535) throw new Error(`--port ${JSON.stringify(text)} is not a port; give a number from 1 to 65535 (or 0 for any free port)`);
  return n;
}
