-- stats: counts by status (expired rows counted apart), the oldest pending claim, and
-- the table's size on disk with its indexes.
WITH now AS (
  SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint AS ms
), r AS (
  SELECT t.status, t.created_at,
         t.status <> 'pending' AND coalesce(t.expires_at <= now.ms, false) AS expired
  FROM {table} AS t, now
)
SELECT count(*) FILTER (WHERE NOT expired AND status = 'pending') AS pending,
       count(*) FILTER (WHERE NOT expired AND status = 'completed') AS completed,
       count(*) FILTER (WHERE NOT expired AND status = 'failed') AS failed,
       count(*) FILTER (WHERE expired) AS expired,
       min(created_at) FILTER (WHERE NOT expired AND status = 'pending') AS oldest_pending_at,
       pg_total_relation_size('{table_text}'::regclass) AS size_bytes
FROM r
