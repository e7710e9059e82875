-- What an AMQP sender puts in a message beyond what the other columns model, kept so that every
-- AMQP receiver gets it back (README, "The whole message, exactly").
--
-- amqp_sections is the AMQP encoding of those sections, which sbamqp writes and reads and no
-- SQL ever parses: the header's durable, priority and first-acquirer, the delivery annotations,
-- the message annotations that are not the broker's own, the properties' user-id,
-- content-encoding, absolute-expiry-time, creation-time and group-sequence, and the footer. NULL
-- when there are none (every message sent over REST, and every existing row). Its length counts
-- in the message's size.
--
-- ttl_from_sender says whether ttl is the sender's (capped by the entity's default) rather than
-- the entity's default, which AMQP receivers are not told of as a header ttl. Existing rows take
-- false: the flag was never recorded. Constant defaults make this a change of the catalogue
-- only: no row is rewritten.
ALTER TABLE messages
    ADD COLUMN amqp_sections bytea,
    ADD COLUMN ttl_from_sender boolean NOT NULL DEFAULT false;
