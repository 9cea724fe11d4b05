/**
 * Text from records (keys chosen by outside callers, names, scopes, error messages that
 * are a tool's output) on its way to a terminal. Raw, a C0 or C1 control character lets
 * whoever chose that text retitle or clear the terminal, move the cursor over earlier
 * lines, or write the clipboard (OSC 52); a bidirectional control reorders what the
 * operator reads (Trojan Source), and an invisible character hides a difference. Every
 * human-readable line the CLI and the MCP proxy print goes through `forTerminal`, which
 * writes each of them as a visible escape (`\n`, `\x1b`, `\u{202e}`; the library's
 * `shownText`, which the inspector page and `--key` share); `--json` output stays exact.
 */

import { invisiblesEscaped, shownText } from './library.js';

/**
 * `text` with every control and invisible character written as a visible escape (`\n`,
 * `\t`, `\r`, `\xNN`, or `\u{…}`), and every backslash doubled so an escape cannot be
 * forged by the text itself. A key shown so is taken back by `inspect --key`.
 */
export function forTerminal(text: string): string {
  return shownText(text);
}

/**
 * The last guard on the way to the terminal: any control or invisible character still raw
 * (other than the line breaks the CLI writes) is escaped. Text from records is escaped
 * field by field before (`forTerminal`); this catches what else reaches a message (a path,
 * a store's error). Backslashes are left alone, so text escaped before passes unchanged.
 */
export function rawEscaped(text: string): string {
  return invisiblesEscaped(text);
}
