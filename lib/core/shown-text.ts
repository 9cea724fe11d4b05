/**
 * Text from records as a person is shown it (the CLI, the MCP proxy's log, the inspector
 * page): keys chosen by outside callers, names, scopes, error messages that are a tool's
 * output. Raw, such text can act on what shows it: a C0 or C1 control retitles or clears a
 * terminal, moves the cursor over earlier lines or writes the clipboard (OSC 52); a
 * bidirectional control (U+202E and the like) reorders the text around it, so a key or a
 * status reads as something else (Trojan Source); a zero-width or other invisible
 * character hides a difference, so two keys look the same. Each of them is written as a
 * visible escape instead, and a backslash as two, so the text cannot forge an escape:
 *
 * - `\n`, `\r`, `\t`; `\xNN` for the other C0 controls, DEL and the C1 controls;
 * - `\u{202e}` (its code point in hex) for the format characters (bidirectional controls,
 *   zero-width characters, the BOM, the soft hyphen, tags), the other default-ignorable
 *   characters (variation selectors, Hangul fillers), spaces other than the space (which
 *   look like one), line and paragraph separators, lone surrogates and unassigned code points.
 *
 * The shown form of a key is also a form a person may give it back in (`inspect --key`,
 * the page's Key filter): see `keyIsAsGiven` and `keyStartsAsGiven`.
 */

/** What is written as an escape: the classes above (the space is itself). */
const INVISIBLE = '\\p{Cc}\\p{Cf}\\p{Cs}\\p{Cn}\\p{Zl}\\p{Zp}\\p{Zs}\\p{Default_Ignorable_Code_Point}';
const SHOWN_ESCAPED = new RegExp(`(?! )[\\\\${INVISIBLE}]`, 'gu');
/** The same, backslashes and line breaks left alone (see `invisiblesEscaped`). */
const STILL_RAW = new RegExp(`(?![ \\n])[${INVISIBLE}]`, 'gu');

function escape(c: string): string {
  if (c === '\\') return '\\\\';
  if (c === '\n') return '\\n';
  if (c === '\r') return '\\r';
  if (c === '\t') return '\\t';
  const code = c.codePointAt(0)!;
  return code <= 0x9f ? `\\x${code.toString(16).padStart(2, '0')}` : `\\u{${code.toString(16)}}`;
}

/** `text` with every control and invisible character written as a visible escape, and every backslash doubled. */
export function shownText(text: string): string {
  return text.replace(SHOWN_ESCAPED, escape);
}

/**
 * `text` with the control and invisible characters still raw escaped, its backslashes and
 * line breaks left alone: the last guard on a message built of parts escaped before (with
 * `shownText`) and parts that were not (a path, a store's error), which passes the
 * escaped parts unchanged. `as`: another escape (JSON's, for JSON text).
 */
export function invisiblesEscaped(text: string, as: (c: string) => string = escape): string {
  return text.replace(STILL_RAW, as);
}

/** Whether a record's `key` is `given`: the key itself, or the key as shown. */
export function keyIsAsGiven(key: string, given: string): boolean {
  return key === given || (given.includes('\\') && shownText(key) === given);
}

/** Whether a record's `key` starts with `given`: the key's start, or the start of the key as shown (an escape cut short included). */
export function keyStartsAsGiven(key: string, given: string): boolean {
  // Without a backslash, a start of the shown key is a start of the key itself.
  return key.startsWith(given) || (given.includes('\\') && shownText(key).startsWith(given));
}
