-- stats
SELECT '', COUNT(CASE WHEN "dead_at" IS NULL THEN 1 END), 0, 0, 0, COUNT(CASE WHEN "dead_at" IS NOT NULL THEN 1 END), 0, NULL, COUNT(CASE WHEN "dead_at" IS NULL THEN 1 END) FROM "jobs"

-- dead
SELECT "id", '', 0, "dead_at", '' FROM "jobs" WHERE "dead_at" IS NOT NULL ORDER BY "dead_at" DESC, "id" DESC LIMIT $1

-- dead(after)
SELECT "id", '', 0, "dead_at", '' FROM "jobs" WHERE "dead_at" IS NOT NULL AND ("dead_at" < $1 OR "dead_at" = $2 AND "id" < $3) ORDER BY "dead_at" DESC, "id" DESC LIMIT $4

-- pickDead
SELECT "id" FROM "jobs" WHERE "dead_at" IS NOT NULL AND "id" > $1 ORDER BY "id" LIMIT $2

-- requeue(3)
UPDATE "jobs" SET "dead_at" = NULL WHERE "id" IN ($1, $2, $3) AND "dead_at" IS NOT NULL

-- purgeDead(3)
DELETE FROM "jobs" WHERE "id" IN ($1, $2, $3) AND "dead_at" IS NOT NULL
