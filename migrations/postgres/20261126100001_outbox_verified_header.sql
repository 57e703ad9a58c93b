-- Which header value verified a delivery's signature. `headers` keeps every header as
-- received, in order, as a JSON array of [name, value] (rows stored before this migration
-- hold a JSON object: one value per name, the last of a repeated one); this is the place
-- in that array (from 0) of the signature header's value that verified, so that a sender
-- repeating the header leaves evidence that can be checked again. NULL for rows stored
-- before, and when that header is not kept (a credential header).
ALTER TABLE outbox ADD COLUMN verified_header INTEGER;
