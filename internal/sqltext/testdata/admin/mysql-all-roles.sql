-- stats
SELECT `queue`, COUNT(CASE WHEN `processed_at` IS NULL AND `dead_at` IS NULL AND (`locked_until` IS NULL OR `locked_until` < ?) AND (`retry_after` IS NULL OR `retry_after` <= ?) THEN 1 END), COUNT(CASE WHEN `processed_at` IS NULL AND `dead_at` IS NULL AND (`locked_until` IS NULL OR `locked_until` < ?) AND `retry_after` > ? THEN 1 END), COUNT(CASE WHEN `processed_at` IS NULL AND `dead_at` IS NULL AND `locked_until` >= ? THEN 1 END), COUNT(CASE WHEN `processed_at` IS NULL AND `dead_at` IS NULL AND (`locked_until` IS NULL OR `locked_until` < ?) AND `attempt` > 0 THEN 1 END), COUNT(CASE WHEN `dead_at` IS NOT NULL THEN 1 END), COUNT(CASE WHEN `processed_at` IS NOT NULL AND `dead_at` IS NULL THEN 1 END), MIN(CASE WHEN `processed_at` IS NULL AND `dead_at` IS NULL AND (`locked_until` IS NULL OR `locked_until` < ?) AND `retry_after` <= ? THEN `retry_after` END), COUNT(CASE WHEN `processed_at` IS NULL AND `dead_at` IS NULL AND (`locked_until` IS NULL OR `locked_until` < ?) AND `retry_after` IS NULL THEN 1 END) FROM `jobs` GROUP BY `queue` ORDER BY `queue`

-- dead
SELECT `id`, `queue`, COALESCE(`attempt`, 0), `dead_at`, COALESCE(`last_error`, '') FROM `jobs` WHERE `dead_at` IS NOT NULL ORDER BY `dead_at` DESC, `id` DESC LIMIT ?

-- dead(after)
SELECT `id`, `queue`, COALESCE(`attempt`, 0), `dead_at`, COALESCE(`last_error`, '') FROM `jobs` WHERE `dead_at` IS NOT NULL AND (`dead_at` < ? OR `dead_at` = ? AND `id` < ?) ORDER BY `dead_at` DESC, `id` DESC LIMIT ?

-- dead(queue, after)
SELECT `id`, `queue`, COALESCE(`attempt`, 0), `dead_at`, COALESCE(`last_error`, '') FROM `jobs` WHERE `dead_at` IS NOT NULL AND `queue` = ? AND (`dead_at` < ? OR `dead_at` = ? AND `id` < ?) ORDER BY `dead_at` DESC, `id` DESC LIMIT ?

-- pickDead
SELECT `id` FROM `jobs` WHERE `dead_at` IS NOT NULL AND `id` > ? ORDER BY `id` LIMIT ?

-- pickDead(queue)
SELECT `id` FROM `jobs` WHERE `dead_at` IS NOT NULL AND `queue` = ? AND `id` > ? ORDER BY `id` LIMIT ?

-- requeue(3)
UPDATE `jobs` SET `dead_at` = NULL, `retry_after` = NULL, `attempt` = 0 WHERE `id` IN (?, ?, ?) AND `dead_at` IS NOT NULL

-- purgeDead(3)
DELETE FROM `jobs` WHERE `id` IN (?, ?, ?) AND `dead_at` IS NOT NULL

-- pickProcessed
SELECT `id` FROM `jobs` WHERE `processed_at` < ? AND `id` > ? ORDER BY `id` LIMIT ?

-- pickProcessed(queue)
SELECT `id` FROM `jobs` WHERE `processed_at` < ? AND `queue` = ? AND `id` > ? ORDER BY `id` LIMIT ?

-- purgeProcessed(3)
DELETE FROM `jobs` WHERE `id` IN (?, ?, ?) AND `processed_at` < ?
