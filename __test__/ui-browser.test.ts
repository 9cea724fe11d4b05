// The inspector page in a real browser: Debian's chromium driven by playwright-core.

import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { type BrowserContext, type Page, chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { ROOT, lib, lineFrom, tempDb, tempDir } from './helpers';

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const CLI = join(ROOT, 'dist', 'cli.js');
// In CI a missing browser is a failure (.ci/browser.sh installs it); elsewhere the test says why it cannot run.
const canRun = existsSync(CHROMIUM) || process.env.CI === 'true';


let db: string;
let server: ChildProcess;
let url: string;
let context: BrowserContext;
let page: Page;
let emailKeyId: string;

/** A record as a framework call leaves it: claimed with its thread in `meta`, then settled (or not). */
async function call(store: InstanceType<typeof lib.SqliteStore>, key: string, name: string, scope: string, end: 'complete' | 'fail' | 'none', leaseMs = 3_600_000) {
  const claim = await store.acquire({
    key, name, fingerprint: `fp-${key}`, leaseMs, force: false,
    meta: { scope, toolCallId: `call_${key}`, framework: 'langgraph', argsPreview: `["${key}"]` },
  });
  if (!claim.acquired) throw new Error(`${key} was already claimed`);
  if (end === 'complete') await store.complete({ key, token: claim.token, resultJson: `{"done":"${key}"}`, durationMs: 840 });
  if (end === 'fail') await store.fail({ key, token: claim.token, error: { name: 'Error', message: 'bank said no' }, durationMs: 95 });
}

beforeAll(async () => {
  if (!canRun) return;
  db = tempDb();
  const store = new lib.SqliteStore({ path: db });
  await call(store, 'refund-t7-a', 'refund', 'thread-7', 'complete');
  await call(store, 'refund-t7-stuck', 'refund', 'thread-7', 'none');
  await call(store, 'charge-t7', 'charge_card', 'thread-7', 'complete');
  await call(store, 'refund-t8', 'refund', 'thread-8', 'fail');
  await call(store, 'email-t8', 'send_email', 'thread-8', 'complete');
  await call(store, 'refund-t77', 'refund', 'thread-77', 'none');
  await call(store, 'crm-t9', 'sync_crm', 'thread-9', 'none', 1); // its owner is gone: the lease ran out
  emailKeyId = await lib.keyId(store, 'email-t8'); // what an event of email-t8 would carry
  await store.close();

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

const rowKeys = () => page.locator('#records tbody tr[data-key]').evaluateAll((rows) => rows.map((r) => (r as HTMLElement).dataset.key).sort());

describe.runIf(canRun)('the inspector page, in chromium', () => {
  it('refuses the page and its API without the token, or with a wrong one', async () => {
    const origin = new URL(url).origin;
    for (const target of [`${origin}/`, `${origin}/?token=wrong`, `${origin}/api/records`, `${origin}/app.js`]) {
      const response = await page.goto(target);
      expect(response?.status(), target).toBe(403);
      expect(await page.textContent('body')).toMatch(/Forbidden/);
    }
    const post = await page.request.post(`${origin}/api/release`, { data: { key: 'refund-t7-stuck' } });
    expect(post.status()).toBe(403);
  });

  it('opens with the token and lists the records', async () => {
    await page.goto(url);
    await page.locator('#filters select[name=since]').selectOption('');
    await expect.poll(rowKeys).toEqual(['charge-t7', 'crm-t9', 'email-t8', 'refund-t7-a', 'refund-t7-stuck', 'refund-t77', 'refund-t8']);
    await expect.poll(() => page.locator('tr[data-key="crm-t9"] td.lease').textContent()).toMatch(/^stuck: ran out \d+s ago, owner not heard from since$/);
    // The README's picture: INSPECTOR_SCREENSHOT=docs/inspector.png npx vitest run __test__/ui-browser.test.ts
    if (process.env.INSPECTOR_SCREENSHOT) {
      await page.click('tr[data-key="refund-t8"] button.details');
      await page.locator('tr[data-detail-of="refund-t8"]').waitFor();
      await page.screenshot({ path: process.env.INSPECTOR_SCREENSHOT });
    }
  });

  it('shows each record\'s keyed id under its key, and in Details (issue 31 item 5)', async () => {
    await page.goto(url);
    await page.locator('#filters select[name=since]').selectOption('');
    await expect.poll(rowKeys).toHaveLength(7);
    const id = await page.locator('tr[data-key="email-t8"]').getAttribute('data-key-id');
    expect(id).toBe(emailKeyId);
    expect(await page.locator('tr[data-key="email-t8"] td.key .kid').textContent()).toBe(emailKeyId);
    await page.click('tr[data-key="email-t8"] button.details');
    await expect.poll(() => page.locator('tr[data-detail-of="email-t8"]').textContent()).toContain(`keyed id   ${emailKeyId}`);
  });

  it('Details fetches the record with its result, which the list leaves out (issue 21 item 6)', async () => {
    await page.goto(url);
    await page.locator('#filters select[name=since]').selectOption('');
    await expect.poll(rowKeys).toHaveLength(7);
    await page.click('tr[data-key="charge-t7"] button.details');
    await expect.poll(() => page.locator('tr[data-detail-of="charge-t7"]').textContent()).toMatch(/result\s+\{\s+"done": "charge-t7"\s+\}/);
    await page.click('tr[data-key="charge-t7"] button.details'); // closed again
    await expect.poll(() => page.locator('tr[data-detail-of="charge-t7"]').count()).toBe(0);
  });

  it('lists only the thread asked for', async () => {
    await page.goto(url);
    await page.locator('#filters select[name=since]').selectOption('');
    await expect.poll(rowKeys).toHaveLength(7);
    await page.fill('#filters input[name=scope]', 'thread-7');
    await page.click('#filters button[type=submit]');
    await expect.poll(rowKeys).toEqual(['charge-t7', 'refund-t7-a', 'refund-t7-stuck']);
    // The filter is kept in the address: a reload shows the same thread.
    expect(new URL(page.url()).searchParams.get('scope')).toBe('thread-7');
    await page.reload();
    await expect.poll(rowKeys).toEqual(['charge-t7', 'refund-t7-a', 'refund-t7-stuck']);
    // The timeline has a row per tool of that thread.
    await expect.poll(() => page.locator('#timeline .tl-row').evaluateAll((rows) => rows.map((r) => (r as HTMLElement).dataset.tool))).toEqual(['charge_card', 'refund']);
    const stuck = page.locator('tr[data-key="refund-t7-stuck"]');
    await expect.poll(() => stuck.locator('td.lease').textContent()).toMatch(/held, \d+m left/);
  });

  it('releases a stuck record behind a confirmation: a claim nobody holds, which the next call takes over (and asks reconcile)', async () => {
    await page.goto(url);
    await page.locator('#filters select[name=since]').selectOption('');
    await page.fill('#filters input[name=key]', 'refund-t7-');
    await page.locator('#filters select[name=status]').selectOption('pending');
    await expect.poll(rowKeys).toEqual(['refund-t7-stuck']);
    expect(new URL(page.url()).searchParams.get('key')).toBe('refund-t7-');
    await page.reload(); // the filters are kept in the address
    await expect.poll(rowKeys).toEqual(['refund-t7-stuck']);
    const release = page.locator('tr[data-key="refund-t7-stuck"] button.release');

    await release.click(); // asked, and cancelled: nothing happens
    await page.locator('#confirm').waitFor({ state: 'visible' });
    expect(await page.textContent('#confirm-detail')).toContain('refund-t7-stuck');
    await page.click('#confirm-cancel');
    await page.locator('#confirm').waitFor({ state: 'hidden' });
    await expect.poll(rowKeys).toEqual(['refund-t7-stuck']);

    await release.click();
    expect(await page.textContent('#confirm-text')).toContain('asks its reconcile option');
    await page.click('#confirm-ok');
    // Still pending, its lease run out: the next call takes it over.
    await expect.poll(() => page.locator('tr[data-key="refund-t7-stuck"] td.lease').textContent()).toMatch(/^stuck: ran out \d+s ago, owner not heard from since$/);

    const store = new lib.SqliteStore({ path: db });
    try {
      const released = await store.get('refund-t7-stuck');
      expect(released?.status).toBe('pending');
      expect(released!.leaseExpiresAt!).toBeLessThanOrEqual(Date.now());
      expect((await store.get('refund-t77'))?.status).toBe('pending'); // another thread's record is untouched
    } finally {
      await store.close();
    }
  });
});
