-- stats
SELECT '', COUNT(CASE WHEN `dead_at` IS NULL THEN 1 END), 0, 0, 0, COUNT(CASE WHEN `dead_at` IS NOT NULL THEN 1 END), 0, NULL, COUNT(CASE WHEN `dead_at` IS NULL THEN 1 END) FROM `jobs`

-- dead
SELECT `id`, '', 0, `dead_at`, '' FROM `jobs` WHERE `dead_at` IS NOT NULL ORDER BY `dead_at` DESC, `id` DESC LIMIT ?

-- dead(after)
SELECT `id`, '', 0, `dead_at`, '' FROM `jobs` WHERE `dead_at` IS NOT NULL AND (`dead_at` < ? OR `dead_at` = ? AND `id` < ?) ORDER BY `dead_at` DESC, `id` DESC LIMIT ?

-- pickDead
SELECT `id` FROM `jobs` WHERE `dead_at` IS NOT NULL AND `id` > ? ORDER BY `id` LIMIT ?

-- requeue(3)
UPDATE `jobs` SET `dead_at` = NULL WHERE `id` IN (?, ?, ?) AND `dead_at` IS NOT NULL

-- purgeDead(3)
DELETE FROM `jobs` WHERE `id` IN (?, ?, ?) AND `dead_at` IS NOT NULL
