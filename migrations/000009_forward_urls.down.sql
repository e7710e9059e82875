-- Descriptions go back to writing every target as sb://{host}/{path}.
ALTER TABLE entities DROP COLUMN IF EXISTS forward_to_url, DROP COLUMN IF EXISTS forward_dead_lettered_to_url;
