-- stats
SELECT '', COUNT(CASE WHEN "processed_at" IS NULL AND ("retry_after" IS NULL OR "retry_after" <= $1) THEN 1 END), COUNT(CASE WHEN "processed_at" IS NULL AND "retry_after" > $2 THEN 1 END), 0, COUNT(CASE WHEN "processed_at" IS NULL AND "attempt" > 0 THEN 1 END), 0, COUNT(CASE WHEN "processed_at" IS NOT NULL THEN 1 END), MIN(CASE WHEN "processed_at" IS NULL AND "retry_after" <= $3 THEN "retry_after" END), COUNT(CASE WHEN "processed_at" IS NULL AND "retry_after" IS NULL THEN 1 END) FROM "jobs"

-- pickProcessed
SELECT "id" FROM "jobs" WHERE "processed_at" < $1 AND "id" > $2 ORDER BY "id" LIMIT $3

-- purgeProcessed(3)
DELETE FROM "jobs" WHERE "id" IN ($1, $2, $3) AND "processed_at" < $4
