-- null-queue
SELECT `id` FROM `jobs` WHERE `processed_at` IS NULL AND `queue` IS NULL LIMIT 1001

-- far-ahead
SELECT `id` FROM `jobs` WHERE `processed_at` IS NULL AND `queue` = ? AND `retry_after` > ? LIMIT 1001
