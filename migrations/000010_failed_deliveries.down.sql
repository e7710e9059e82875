-- Back to counting every delivery made: a locked message's current delivery counts again.
UPDATE messages SET delivery_count = delivery_count + 1
WHERE lock_token IS NOT NULL;
