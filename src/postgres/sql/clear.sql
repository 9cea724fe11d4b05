-- clear: one record ($1 key), or every record ($1 NULL). The rows are locked in key order
-- first, the order acquire.sql claims in: a clear of every record beside a batch of claims
-- never waits on it in a cycle (a plain DELETE locks in the table's physical order).
WITH locked AS (
  SELECT key FROM {table}
  WHERE $1::text IS NULL OR key = $1::text
  ORDER BY key COLLATE "C"
  FOR UPDATE
)
DELETE FROM {table} AS r USING locked WHERE r.key = locked.key
