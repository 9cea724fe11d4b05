/**
 * The keys and names the package keeps for its own records: the keyed-id secret
 * (`idempotent-tools:key-id-secret`, key-id.ts) and the approval decisions (keys
 * `approval|…`, names `approval:…`, approvals.ts). A call under one of them could plant or
 * overwrite such a record (a caller who controls a key, an Idempotency-Key header, could
 * choose the keyed-id secret), so calls are refused them with a TypeError before anything
 * runs. The package writes these records through the store interface directly, never
 * through `idempotent()`.
 */

/** Keys that start with these are the package's own. */
export const RESERVED_KEY_PREFIXES: readonly string[] = ['idempotent-tools:', 'approval|'];
/** Names that start with these are the package's own. */
export const RESERVED_NAME_PREFIXES: readonly string[] = ['idempotent-tools:', 'approval:'];

function shown(value: string): string {
  return JSON.stringify(value.length > 80 ? `${value.slice(0, 77)}...` : value);
}

/** A TypeError when `key` is one of the package's own keys (`where` names how it was given). */
export function checkCallKey(key: string, where: string): void {
  const prefix = RESERVED_KEY_PREFIXES.find((p) => key.startsWith(p));
  if (prefix === undefined) return;
  throw new TypeError(
    `idempotent-tools: ${where} ${shown(key)} is reserved: keys starting with "${prefix}" are the package's own records ` +
      `(${prefix === 'approval|' ? 'approval decisions' : 'the keyed-id secret and the like'}), and a call may not use them. ` +
      'Use another key (a key from an Idempotency-Key header needs a prefix of your own, such as `order:${key}`).',
  );
}

/** A TypeError when `name` is one of the package's own names. */
export function checkCallName(name: string): void {
  const prefix = RESERVED_NAME_PREFIXES.find((p) => name.startsWith(p));
  if (prefix === undefined) return;
  throw new TypeError(
    `idempotent(): the name ${shown(name)} is reserved: names starting with "${prefix}" are the package's own records ` +
      `(${prefix === 'approval:' ? 'approval decisions' : 'the keyed-id secret and the like'}). Pass another "name".`,
  );
}
