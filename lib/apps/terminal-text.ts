/**
 * Text from records (keys chosen by outside callers, names, scopes, error messages that
 * are a tool's output) on its way to a terminal. Raw, a C0 or C1 control character lets
 * whoever chose that text retitle or clear the terminal, move the cursor over earlier
 * lines, or write the clipboard (OSC 52). Every human-readable line the CLI and the MCP
 * proxy print goes through `forTerminal`; `--json` output stays exact.
 */

/** C0 controls, DEL and C1 controls (U+0080–U+009F). */
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/g;

/**
 * `text` with every control character written as a visible escape (`\n`, `\t`, `\r`, or
 * `\xNN`), and every backslash doubled so an escape cannot be forged by the text itself.
 */
export function forTerminal(text: string): string {
  return text.replace(/\\/g, '\\\\').replace(CONTROL, (c) => {
    if (c === '\n') return '\\n';
    if (c === '\r') return '\\r';
    if (c === '\t') return '\\t';
    return `\\x${c.charCodeAt(0).toString(16).padStart(2, '0')}`;
  });
}
