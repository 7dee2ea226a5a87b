"""The send loop's per-message statements on PostgreSQL, as plain SQL with named parameters.

psycopg prepares each on a connection once it has run a few times (``prepare_threshold``)
and adapts the values; the casts name each parameter's type for that plan. Every lease
check is a compare-and-set: a worker that lost its lease changes nothing.
"""

from __future__ import annotations

# Commit that the body is about to leave, unless the recipient (either form: the address,
# its keyed hash) is on the suppression list or the sweep finished the attempt.
MARK_DATA_SENT_UNLESS_SUPPRESSED = """
UPDATE email_attempt SET stage = 'data_sent'
WHERE id = %(b_id)s::bigint AND finished_at IS NULL
  AND NOT EXISTS (
    SELECT 1 FROM suppression
    WHERE recipient IN (%(b_address)s::varchar, %(b_address_hash)s::varchar))
"""

# Why a mark changed nothing: the recipient is on the list (else the sweep took it).
SUPPRESSED_NOW = """
SELECT 1 FROM suppression WHERE recipient = ANY(%(b_forms)s::varchar[]) LIMIT 1
"""

# T2: the intent moves only while this lease holds it, and only then is its attempt
# finished; one statement, so atomic on an autocommit connection. The row is found by
# its key (`IS NOT DISTINCT FROM` is not indexable: the status indexes stay unused).
RECORD_IF_MOVED = """
WITH moved AS (
  UPDATE email_intent SET
    status = %(b_status)s::varchar,
    status_reason = %(b_reason)s::varchar,
    lease_token = NULL,
    lease_expires_at = NULL,
    updated_at = %(b_now)s::timestamptz,
    next_attempt_at = coalesce(%(b_next_attempt_at)s::timestamptz, next_attempt_at),
    submitted_at = coalesce(%(b_submitted_at)s::timestamptz, submitted_at),
    provider_message_id = coalesce(%(b_submitted_provider_id)s::varchar, provider_message_id)
  WHERE id = %(b_id)s::bigint
    AND status IS NOT DISTINCT FROM 'sending'
    AND lease_token IS NOT DISTINCT FROM %(b_token)s::varchar
  RETURNING id)
UPDATE email_attempt SET
  stage = %(b_stage)s::varchar,
  finished_at = %(b_now)s::timestamptz,
  outcome = %(b_outcome)s::varchar,
  reply_code = %(b_reply_code)s::integer,
  enhanced_status = %(b_enhanced_status)s::varchar,
  reply_text = %(b_reply_text)s::varchar,
  error = %(b_error)s::varchar,
  provider_message_id = %(b_provider_message_id)s::varchar,
  duration_ms = %(b_duration_ms)s::integer
WHERE id = %(b_attempt_id)s::bigint AND EXISTS (SELECT 1 FROM moved)
RETURNING id
"""
