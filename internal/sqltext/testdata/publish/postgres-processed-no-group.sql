-- insert(1)
WITH published AS (INSERT INTO "jobs" ("payload", "retry_after") VALUES ($1, $2)) SELECT pg_notify($3, '')

-- insert(3)
WITH published AS (INSERT INTO "jobs" ("payload", "retry_after") VALUES ($1, $2), ($3, $4), ($5, $6)) SELECT pg_notify($7, '')
