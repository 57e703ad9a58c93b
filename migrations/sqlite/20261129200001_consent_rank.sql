-- The rank a state is compared at, when it is not its own time: an opt-out the service
-- announced in whole seconds ranks at the last millisecond of its second (at the precision
-- it shares with a pass's or a local change's milliseconds, opt-out wins the tie), while
-- changed_at keeps the event's own time. NULL: the rank is changed_at.
ALTER TABLE consent_state ADD COLUMN rank_at TEXT;
