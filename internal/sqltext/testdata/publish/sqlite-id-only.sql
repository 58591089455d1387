-- insert(1)
INSERT INTO `jobs` (`id`) VALUES (NULL)

-- insert(3)
INSERT INTO `jobs` (`id`) VALUES (NULL), (NULL), (NULL)

-- insertID
INSERT INTO `jobs` (`id`) VALUES (NULL) RETURNING `id`
