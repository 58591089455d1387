-- null-queue
SELECT "id" FROM "jobs" WHERE "processed_at" IS NULL AND "dead_at" IS NULL AND "queue" IS NULL LIMIT 1001

-- far-ahead
SELECT "id" FROM "jobs" WHERE "processed_at" IS NULL AND "dead_at" IS NULL AND "queue" = $1 AND "retry_after" > $2 LIMIT 1001
