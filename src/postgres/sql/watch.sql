-- watch: a 'block' waiter, already LISTENing, asks for a NOTIFY when this key's pending
-- claim is settled, and learns the claim's tag (SHA-256 of its token): the payload that
-- NOTIFY will carry (settle.sql, release.sql), which names the claim without naming the key.
-- Zero rows: the key is not pending (any more): look at it again.
-- $1 key.
UPDATE {table} SET watched = true
WHERE key = $1::text AND status = 'pending'
RETURNING encode(sha256(convert_to(token, 'UTF8')), 'hex') AS tag
