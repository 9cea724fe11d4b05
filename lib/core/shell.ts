/**
 * A command an error suggests must be safe to paste into a shell: a key such as
 * `email-1|mailer|4f2a…` pasted bare runs `mailer` as a command. One quoting rule for
 * every suggestion the library makes.
 */

/** `value` as one word of a POSIX shell command: bare when it is only safe characters, else single-quoted. */
export function shellWord(value: string): string {
  if (/^[A-Za-z0-9_@%+=:,./-]+$/.test(value)) return value;
  return `'${value.replace(/'/g, `'\\''`)}'`;
}

/** The command that deletes one record, to paste. */
export function clearCommand(key: string): string {
  return `npx idempotent-tools clear --key ${shellWord(key)}`;
}
