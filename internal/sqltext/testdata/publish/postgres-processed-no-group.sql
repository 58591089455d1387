-- insert(1)
INSERT INTO "jobs" ("payload", "retry_after") VALUES ($1, $2)

-- insert(3)
INSERT INTO "jobs" ("payload", "retry_after") VALUES ($1, $2), ($3, $4), ($5, $6)

-- insertID
INSERT INTO "jobs" ("payload", "retry_after") VALUES ($1, $2) RETURNING "id"

-- insert(1) notifying
WITH published AS (INSERT INTO "jobs" ("payload", "retry_after") VALUES ($1, $2)) SELECT pg_notify($3, '')

-- insert(3) notifying
WITH published AS (INSERT INTO "jobs" ("payload", "retry_after") VALUES ($1, $2), ($3, $4), ($5, $6)) SELECT pg_notify($7, '')
