-- next-due
SELECT MIN(`retry_after`) FROM `jobs` WHERE `processed_at` IS NULL AND `dead_at` IS NULL AND `retry_after` > ? AND `queue` = ?
