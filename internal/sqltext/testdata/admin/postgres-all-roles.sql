-- stats
SELECT "queue", COUNT(CASE WHEN "processed_at" IS NULL AND "dead_at" IS NULL AND ("locked_until" IS NULL OR "locked_until" < $1) AND ("retry_after" IS NULL OR "retry_after" <= $2) THEN 1 END), COUNT(CASE WHEN "processed_at" IS NULL AND "dead_at" IS NULL AND ("locked_until" IS NULL OR "locked_until" < $3) AND "retry_after" > $4 THEN 1 END), COUNT(CASE WHEN "processed_at" IS NULL AND "dead_at" IS NULL AND "locked_until" >= $5 THEN 1 END), COUNT(CASE WHEN "processed_at" IS NULL AND "dead_at" IS NULL AND ("locked_until" IS NULL OR "locked_until" < $6) AND "attempt" > 0 THEN 1 END), COUNT(CASE WHEN "dead_at" IS NOT NULL THEN 1 END), COUNT(CASE WHEN "processed_at" IS NOT NULL AND "dead_at" IS NULL THEN 1 END), MIN(CASE WHEN "processed_at" IS NULL AND "dead_at" IS NULL AND ("locked_until" IS NULL OR "locked_until" < $7) AND "retry_after" <= $8 THEN "retry_after" END), COUNT(CASE WHEN "processed_at" IS NULL AND "dead_at" IS NULL AND ("locked_until" IS NULL OR "locked_until" < $9) AND "retry_after" IS NULL THEN 1 END) FROM "jobs" GROUP BY "queue" ORDER BY "queue"

-- dead
SELECT "id", "queue", COALESCE("attempt", 0), "dead_at", COALESCE("last_error", '') FROM "jobs" WHERE "dead_at" IS NOT NULL ORDER BY "dead_at" DESC, "id" DESC LIMIT $1

-- dead(after)
SELECT "id", "queue", COALESCE("attempt", 0), "dead_at", COALESCE("last_error", '') FROM "jobs" WHERE "dead_at" IS NOT NULL AND ("dead_at" < $1 OR "dead_at" = $2 AND "id" < $3) ORDER BY "dead_at" DESC, "id" DESC LIMIT $4

-- dead(queue, after)
SELECT "id", "queue", COALESCE("attempt", 0), "dead_at", COALESCE("last_error", '') FROM "jobs" WHERE "dead_at" IS NOT NULL AND "queue" = $1 AND ("dead_at" < $2 OR "dead_at" = $3 AND "id" < $4) ORDER BY "dead_at" DESC, "id" DESC LIMIT $5

-- pickDead
SELECT "id" FROM "jobs" WHERE "dead_at" IS NOT NULL AND "id" > $1 ORDER BY "id" LIMIT $2

-- pickDead(queue)
SELECT "id" FROM "jobs" WHERE "dead_at" IS NOT NULL AND "queue" = $1 AND "id" > $2 ORDER BY "id" LIMIT $3

-- requeue(3)
UPDATE "jobs" SET "dead_at" = NULL, "retry_after" = NULL, "attempt" = 0 WHERE "id" IN ($1, $2, $3) AND "dead_at" IS NOT NULL

-- purgeDead(3)
DELETE FROM "jobs" WHERE "id" IN ($1, $2, $3) AND "dead_at" IS NOT NULL

-- pickProcessed
SELECT "id" FROM "jobs" WHERE "processed_at" < $1 AND "id" > $2 ORDER BY "id" LIMIT $3

-- pickProcessed(queue)
SELECT "id" FROM "jobs" WHERE "processed_at" < $1 AND "queue" = $2 AND "id" > $3 ORDER BY "id" LIMIT $4

-- purgeProcessed(3)
DELETE FROM "jobs" WHERE "id" IN ($1, $2, $3) AND "processed_at" < $4
