-- far-ahead
SELECT `id` FROM `jobs` WHERE `processed_at` IS NULL AND `retry_after` > ? AND `retry_after` GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9] [0-9][0-9]:[0-9][0-9]:[0-9][0-9].[0-9][0-9][0-9][0-9][0-9][0-9]' LIMIT 1001

-- bad-layout
SELECT `id` FROM `jobs` WHERE `processed_at` IS NULL AND `retry_after` IS NOT NULL AND (typeof(`retry_after`) <> 'text' OR `retry_after` NOT GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9] [0-9][0-9]:[0-9][0-9]:[0-9][0-9].[0-9][0-9][0-9][0-9][0-9][0-9]') LIMIT 1001
