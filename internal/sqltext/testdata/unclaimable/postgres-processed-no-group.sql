-- far-ahead
SELECT "id" FROM "jobs" WHERE "processed_at" IS NULL AND "retry_after" > $1 LIMIT 1001
