-- stats
SELECT '', COUNT(CASE WHEN `processed_at` IS NULL AND (`retry_after` IS NULL OR `retry_after` <= ?) THEN 1 END), COUNT(CASE WHEN `processed_at` IS NULL AND `retry_after` > ? THEN 1 END), 0, COUNT(CASE WHEN `processed_at` IS NULL AND `attempt` > 0 THEN 1 END), 0, COUNT(CASE WHEN `processed_at` IS NOT NULL THEN 1 END), MIN(CASE WHEN `processed_at` IS NULL AND `retry_after` <= ? THEN `retry_after` END), COUNT(CASE WHEN `processed_at` IS NULL AND `retry_after` IS NULL THEN 1 END) FROM `jobs`

-- pickProcessed
SELECT `id` FROM `jobs` WHERE `processed_at` < ? AND `id` > ? ORDER BY `id` LIMIT ?

-- purgeProcessed(3)
DELETE FROM `jobs` WHERE `id` IN (?, ?, ?) AND `processed_at` < ?
