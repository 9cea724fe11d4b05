-- clear: one record ($1 key), or every record ($1 NULL).
DELETE FROM {table} WHERE $1::text IS NULL OR key = $1::text
