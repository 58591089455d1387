-- insert(1)
INSERT INTO "jobs" ("payload", "queue", "priority", "headers", "retry_after") VALUES ($1, $2, $3, $4, $5)

-- insert(3)
INSERT INTO "jobs" ("payload", "queue", "priority", "headers", "retry_after") VALUES ($1, $2, $3, $4, $5), ($6, $7, $8, $9, $10), ($11, $12, $13, $14, $15)

-- insertID
INSERT INTO "jobs" ("payload", "queue", "priority", "headers", "retry_after") VALUES ($1, $2, $3, $4, $5) RETURNING "id"
