/**
 * Input refused for one call: a string that cannot cross into the native addon exactly
 * (exact-strings.ts), a request field of the wrong type (../stores/requests.ts), text a
 * store cannot hold (U+0000 in PostgreSQL). A `TypeError` (its name says so) for that call
 * alone: never a `StoreError`, which says the store failed and which callers retry, and
 * never a failure of the other calls that share its turn, batch or connection.
 */
export class RefusedInputError extends TypeError {
  override name = 'TypeError';
}
