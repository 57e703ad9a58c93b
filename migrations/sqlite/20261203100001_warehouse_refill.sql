-- A warehouse table found missing, made again or behind what was sent (renamed, its schema
-- dropped, truncated) is filled again from the destination's first entry: its cursor went
-- back, and until it passes refill_until again the destination shows as refilling, with
-- why (refill_reason).
ALTER TABLE subscribers ADD COLUMN refill_until INTEGER;
ALTER TABLE subscribers ADD COLUMN refill_reason TEXT;
