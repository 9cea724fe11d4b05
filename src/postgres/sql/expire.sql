-- expire: gives the settled rows among $1 the expiry $2 (epoch ms): a step's record expires
-- with its completed call (see lib/core/step.ts). A pending row is left alone (it never
-- expires while unresolved). The number of rows changed is the answer.
-- $1 keys  $2 expires at.
UPDATE {table} SET expires_at = $2::bigint
WHERE key = ANY($1::text[]) AND status <> 'pending'
