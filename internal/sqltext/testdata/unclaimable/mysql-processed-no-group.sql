-- far-ahead
SELECT `id` FROM `jobs` WHERE `processed_at` IS NULL AND `retry_after` > ? LIMIT 1001
