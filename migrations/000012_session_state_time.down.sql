UPDATE sessions SET state_updated_at = coalesce(state_updated_at, now());
ALTER TABLE sessions ALTER COLUMN state_updated_at SET NOT NULL;
ALTER TABLE sessions RENAME COLUMN state_updated_at TO updated_at;
