-- insert(1)
INSERT INTO "jobs" ("payload", "queue", "priority", "headers", "retry_after", "account", "region") VALUES ($1, $2, $3, $4, $5, $6, $7)

-- insert(3)
INSERT INTO "jobs" ("payload", "queue", "priority", "headers", "retry_after", "account", "region") VALUES ($1, $2, $3, $4, $5, $6, $7), ($8, $9, $10, $11, $12, $13, $14), ($15, $16, $17, $18, $19, $20, $21)

-- insertID
INSERT INTO "jobs" ("payload", "queue", "priority", "headers", "retry_after", "account", "region") VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING "id"

-- insert(1) notifying
WITH published AS (INSERT INTO "jobs" ("payload", "queue", "priority", "headers", "retry_after", "account", "region") VALUES ($1, $2, $3, $4, $5, $6, $7)) SELECT pg_notify($8, '')

-- insert(3) notifying
WITH published AS (INSERT INTO "jobs" ("payload", "queue", "priority", "headers", "retry_after", "account", "region") VALUES ($1, $2, $3, $4, $5, $6, $7), ($8, $9, $10, $11, $12, $13, $14), ($15, $16, $17, $18, $19, $20, $21)) SELECT pg_notify($22, '')
