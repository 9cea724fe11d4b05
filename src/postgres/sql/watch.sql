-- watch: a 'block' waiter, already LISTENing, asks for a NOTIFY when this key's pending
-- claim is settled. Zero rows: the key is not pending (any more): look at it again.
-- $1 key.
UPDATE {table} SET watched = true
WHERE key = $1::text AND status = 'pending'
RETURNING key
