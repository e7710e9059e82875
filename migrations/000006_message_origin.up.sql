-- Broker properties the message documents list that had no column:
--   via_partition_key: ViaPartitionKey as the sender gave it (returned as sent; it selects a
--                      transfer queue partition on the service, which has no meaning here).
--   enqueued_seq:      EnqueuedSequenceNumber: on an auto-forwarded message, the sequence number
--                      the message was first given where it was sent; NULL when not forwarded.
-- Both are NULL for existing rows, which is what they would have been: adding nullable columns
-- without a default does not rewrite the table.
ALTER TABLE messages ADD COLUMN via_partition_key text, ADD COLUMN enqueued_seq bigint;
