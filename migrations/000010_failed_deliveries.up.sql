-- delivery_count now counts the deliveries that failed (a lock that expired, an abandon), as the
-- service's DeliveryCount does, instead of every delivery made; the count shown is one more.
-- A message locked at this moment had its current delivery counted when it was claimed, which
-- has not failed (yet): take it back. A lock that has already run out is counted when the message
-- is next claimed, as every lapsed lock now is. Only locked rows change.
UPDATE messages SET delivery_count = delivery_count - 1
WHERE lock_token IS NOT NULL AND delivery_count > 0;
