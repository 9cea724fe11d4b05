// The native loader (binding.js): which binary it picks, and what it says when none fits.
// A child process stands on another platform by redefining process.arch before the loader runs.

import { describe, expect, it } from 'vitest';

import { runNode } from './helpers';

function loadAs(arch: string, env: Record<string, string> = {}) {
  return runNode([
    '-e',
    `Object.defineProperty(process, 'arch', { value: ${JSON.stringify(arch)} });
     try { require('./binding.js'); console.log('loaded'); }
     catch (e) { console.log(JSON.stringify({ code: e.code, message: e.message })); }`,
  ], { env });
}

describe('the native loader', () => {
  it('loads the build in native/ on this machine', async () => {
    const r = await runNode(['-e', `console.log(typeof require('./binding.js').NativeSqliteStore)`]);
    expect(r.stderr).toBe('');
    expect(r.stdout.trim()).toBe('function');
  });

  it('on a platform we do not ship, names it and says how to build from source', async () => {
    const r = await loadAs('riscv64');
    const { code, message } = JSON.parse(r.stdout);
    expect(code).toBe('IDEMPOTENT_TOOLS_NO_BINARY');
    expect(message).toMatch(/no native binary loads for this platform, linux-riscv64-(gnu|musl)/);
    expect(message).toContain('idempotent-tools-linux-riscv64-');
    expect(message).toContain('not installed');
    expect(message).toMatch(/Prebuilt platforms: .*linux-x64-gnu.*win32-x64-msvc/);
    expect(message).toContain('npm install (it builds the addon into native/), then, in your project, npm install <path of that clone>');
    expect(message).not.toContain('npm skipped it');
  });

  it('on a platform we ship whose package is missing, says npm skipped it', async () => {
    const r = await loadAs('arm64');
    const { message } = JSON.parse(r.stdout);
    expect(message).toMatch(/linux-arm64-(gnu|musl)/);
    expect(message).toContain('npm skipped it');
    expect(message).toContain('--omit=optional');
  });

  it('reports why an explicit NAPI_RS_NATIVE_LIBRARY_PATH did not load', async () => {
    const r = await loadAs('riscv64', { NAPI_RS_NATIVE_LIBRARY_PATH: '/nonexistent/addon.node' });
    const { message } = JSON.parse(r.stdout);
    expect(message).toContain('NAPI_RS_NATIVE_LIBRARY_PATH=/nonexistent/addon.node: Cannot find module');
  });
});
