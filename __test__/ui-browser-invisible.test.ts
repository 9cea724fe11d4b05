// Issue 36 finding 9, on the inspector page: a key, name, scope or error text holding a
// bidirectional control (U+202E) was put into the page as it is, and the browser reordered
// it inside its cell (a key or a status that reads as something else); a zero-width space
// made two keys look the same. The page now shows each such character as a visible escape
// (`\u{202e}`, marked), as the CLI does, and its Key filter takes a key as shown.

import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { type BrowserContext, type Page, chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { ROOT, lib, lineFrom, tempDir } from './helpers';

const require = createRequire(import.meta.url);
const ui: typeof import('../dist/apps/ui/server.js') = require(join(ROOT, 'dist', 'apps', 'ui', 'server.js'));

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const CLI = join(ROOT, 'dist', 'cli.js');
// In CI a missing browser is a failure (.ci/browser.sh installs it); elsewhere the test says why it cannot run.
const canRun = existsSync(CHROMIUM) || process.env.CI === 'true';

/** Raw, any of them: bidi controls, zero-width characters, BOM, soft hyphen, NBSP, line separators. */
const RAW_INVISIBLE = /[\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c\u200b-\u200d\u2060\ufeff\u00ad\u00a0\u2028\u2029]/;

const KEYS = { rlo: 'invoice-\u202egpj.exe', zwsp: 'pay\u200bment', plain: 'payment', stuck: 'stuck\u2066-1' };
const SHOWN = { rlo: 'invoice-\\u{202e}gpj.exe', zwsp: 'pay\\u{200b}ment', plain: 'payment', stuck: 'stuck\\u{2066}-1' };

let db: string;

beforeAll(async () => {
  const folder = join(tempDir(), 'store\u202e');
  mkdirSync(folder);
  db = join(folder, 'store.db');
  const store = new lib.SqliteStore({ path: db });
  const meta = { scope: 'thread\u2067-7', toolCallId: 'call\u200b1', framework: 'langgraph', argsPreview: '["a\u202eb"]' };
  const claim = (key: string, leaseMs = 60_000) => store.acquire({ key, name: 'refund\u202e', fingerprint: 'fp', leaseMs, force: false, meta });
  const rlo = await claim(KEYS.rlo);
  if (!rlo.acquired) throw new Error('not acquired');
  await store.fail({ key: KEYS.rlo, token: rlo.token, error: { name: 'Error', message: 'declined\u202e ko: ok' } });
  for (const key of [KEYS.zwsp, KEYS.plain]) {
    const c = await claim(key);
    if (c.acquired) await store.complete({ key, token: c.token, resultJson: JSON.stringify({ s: 'a\u202eb' }) });
  }
  await claim(KEYS.stuck, 3_600_000);
  await store.close();
});

describe("the page's API", () => {
  it('its key filter takes a key as shown, and the key itself', async () => {
    const store = new lib.SqliteStore({ path: db });
    const inspector = await ui.serveInspector({ store, where: 'test store' });
    try {
      const keys = async (key: string) => {
        const res = await fetch(`${new URL(inspector.url).origin}/api/records?since=&key=${encodeURIComponent(key)}`, { headers: { 'x-inspector-token': inspector.token } });
        return ((await res.json()) as { records: Array<{ key: string }> }).records.map((r) => r.key).sort();
      };
      // Before: a key as shown found nothing.
      expect(await keys(SHOWN.zwsp)).toEqual([KEYS.zwsp]);
      expect(await keys(SHOWN.rlo)).toEqual([KEYS.rlo]);
      expect(await keys('pay')).toEqual([KEYS.zwsp, KEYS.plain].sort());
      expect(await keys(KEYS.zwsp)).toEqual([KEYS.zwsp]);
    } finally {
      await inspector.close();
      await store.close();
    }
  });
});

describe.runIf(canRun)('the inspector page, in chromium, shows them visibly', () => {
  let server: ChildProcess;
  let url: string;
  let context: BrowserContext;
  let page: Page;

  beforeAll(async () => {
    server = spawn(process.execPath, [CLI, '--db', db, 'ui'], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    url = (await lineFrom(server, /http:\/\/127\.0\.0\.1:\d+\/\?token=/)).trim();
    context = await chromium.launchPersistentContext(tempDir(), {
      executablePath: CHROMIUM,
      headless: true,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
        '--disable-background-networking', '--disable-component-update', '--disable-sync'],
      viewport: { width: 1280, height: 760 },
    });
    page = context.pages()[0] ?? (await context.newPage());
  });

  afterAll(async () => {
    await context?.close();
    server?.kill('SIGINT');
  });

  const row = (key: string) => page.locator(`#records tbody tr[data-key="${key}"]`);
  const rowKeys = () => page.locator('#records tbody tr[data-key]').evaluateAll((rows) => rows.map((r) => (r as HTMLElement).dataset.key).sort());
  /** What the page shows (its rendered text, tooltips included), where no raw invisible character may be. */
  const shownText = () =>
    page.evaluate(() => document.body.innerText + [...document.querySelectorAll('[title]')].map((e) => e.getAttribute('title')).join('\n'));

  async function open() {
    await page.goto(url);
    await page.locator('#filters select[name=since]').selectOption('');
    await expect.poll(rowKeys).toHaveLength(4);
  }

  it('the table, the timeline and the store: escapes, marked, and nothing raw', async () => {
    await open();
    // Before: the raw characters, which the browser acted on.
    expect(await shownText()).not.toMatch(RAW_INVISIBLE);
    expect(await row(KEYS.rlo).locator('td.key').innerText()).toContain(SHOWN.rlo.slice(0, 16));
    expect(await row(KEYS.rlo).locator('td.key').getAttribute('title')).toContain(SHOWN.rlo);
    expect(await row(KEYS.zwsp).locator('td.key').innerText()).toContain(SHOWN.zwsp);
    expect(await row(KEYS.plain).locator('td.key').innerText()).toMatch(/^payment\b/);
    // Each escape is marked, so that it reads as a character the text holds, not as text.
    expect(await row(KEYS.zwsp).locator('td.key .esc').allInnerTexts()).toEqual(['\\u{200b}']);
    const cells = await row(KEYS.rlo).locator('td').allInnerTexts();
    expect(cells).toEqual(expect.arrayContaining(['refund\\u{202e}', 'failed', 'thread\\u{2067}-7', 'call\\u{200b}1']));
    expect(await page.locator('#where').innerText()).toContain('store\\u{202e}');
    await expect.poll(() => page.locator('#timeline .tl-name').allInnerTexts()).toEqual(['refund\\u{202e}']);
  });

  it('Details: the key, arguments and error as shown, the result with JSON escapes', async () => {
    await open();
    await page.click(`tr[data-key="${KEYS.rlo}"] button.details`);
    const detail = page.locator(`tr[data-detail-of="${KEYS.rlo}"]`);
    await expect.poll(() => detail.innerText()).toContain(`key        ${SHOWN.rlo}`);
    const text = await detail.innerText();
    expect(text).toContain('error      Error: declined\\u{202e} ko: ok');
    expect(text).toContain('arguments  ["a\\u{202e}b"]');
    expect(text).not.toMatch(RAW_INVISIBLE);
    await page.click(`tr[data-key="${KEYS.zwsp}"] button.details`);
    const result = page.locator(`tr[data-detail-of="${KEYS.zwsp}"]`);
    await expect.poll(() => result.innerText()).toMatch(/result\s+\{\s+"s": "a\\u202eb"\s+\}/);
    expect(await result.innerText()).not.toMatch(RAW_INVISIBLE);
  });

  it('the Key filter takes a key as the page shows it', async () => {
    await open();
    await page.fill('#filters input[name=key]', SHOWN.zwsp);
    await page.click('#filters button[type=submit]');
    await expect.poll(rowKeys).toEqual([KEYS.zwsp]);
  });

  it('the confirmation and an error name the key as shown', async () => {
    await open();
    await page.click(`tr[data-key="${KEYS.stuck}"] button.release`);
    await expect.poll(() => page.locator('#confirm-detail').innerText()).toContain(`Key: ${SHOWN.stuck}`);
    expect(await page.locator('#confirm-text').innerText()).toContain('"refund\\u{202e}"');
    expect(await page.locator('#confirm').innerText()).not.toMatch(RAW_INVISIBLE);
    // Gone meanwhile: the server's error names the key.
    const store = new lib.SqliteStore({ path: db });
    await store.clear(KEYS.stuck);
    await store.close();
    await page.click('#confirm-ok');
    await expect.poll(() => page.locator('#error').innerText()).toContain(`no record with key ${SHOWN.stuck}`);
    expect(await page.locator('#error').innerText()).not.toMatch(RAW_INVISIBLE);
  });
});
