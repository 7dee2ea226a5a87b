"""The send path's statements on PostgreSQL that run on psycopg itself, as plain SQL with
named parameters: the claim, the per-message mark and record, the sweep, the give-back, the
heartbeat and the writes an outcome calls for (the breaker, a domain's deferral, the shared
rate, a refused mailbox's suppression, an alert, a refused session's hold).

psycopg prepares each on a connection once it has run a few times (``prepare_threshold``)
and adapts the values; the casts name each parameter's type for that plan. Every lease
check is a compare-and-set: a worker that lost its lease changes nothing.
"""

from __future__ import annotations

from console.store.statements import DUE_COLUMNS
from console.vocabulary import CRITICAL, LANES

# An intent leaving `sending`, or closed at the claim: its new status and reason, the
# lease dropped, due at the time given (else when it was).
_LEASE_RELEASED = """status = %(b_status)s::varchar,
    status_reason = %(b_reason)s::varchar,
    lease_token = NULL,
    lease_expires_at = NULL,
    updated_at = %(b_now)s::timestamptz,
    next_attempt_at = coalesce(%(b_next_attempt_at)s::timestamptz, next_attempt_at)"""

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
RECORD_IF_MOVED = f"""
WITH moved AS (
  UPDATE email_intent SET
    {_LEASE_RELEASED},
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

# The sweep: intents still `sending` after their lease ran out, each with its open attempt
# (the intent's columns as ``DueIntent`` reads them, then the lease token and the attempt
# id); locked, skipping those another worker's sweep holds.
EXPIRED_LEASES = f"""
SELECT {", ".join(f"i.{column.name}" for column in DUE_COLUMNS)}, i.lease_token, a.id
FROM email_intent i
LEFT JOIN email_attempt a ON a.intent_id = i.id AND a.lease_token = i.lease_token
WHERE i.status = 'sending' AND i.lease_expires_at < %(b_now)s::timestamptz
LIMIT %(b_limit)s::integer
FOR UPDATE OF i SKIP LOCKED
"""

# From now on the silent worker can no longer mark this attempt: the stage it reached.
FINISH_SILENT_ATTEMPT = """
UPDATE email_attempt SET finished_at = %(b_now)s::timestamptz
WHERE id = %(b_id)s::bigint AND finished_at IS NULL
RETURNING stage
"""

# The intent of a lease taken back moves as decided, only while that lease holds it; its
# attempt (if it had one) then gets the verdict. One row when the intent moved.
SETTLE_EXPIRED_LEASE = f"""
WITH moved AS (
  UPDATE email_intent SET
    {_LEASE_RELEASED}
  WHERE id = %(b_id)s::bigint
    AND status IS NOT DISTINCT FROM 'sending'
    AND lease_token IS NOT DISTINCT FROM %(b_token)s::varchar
  RETURNING id),
judged AS (
  UPDATE email_attempt SET outcome = %(b_outcome)s::varchar, error = %(b_error)s::varchar
  WHERE id = %(b_attempt_id)s::bigint AND EXISTS (SELECT 1 FROM moved))
SELECT id FROM moved
"""

# A claim that never reached the transport, or whose session the relay refused, goes back,
# only while its lease holds it: pending, due at the time given, saying why if a reason is
# given, the attempt deleted and not counted.
GIVE_BACK = """
WITH released AS (
  UPDATE email_intent SET
    status = 'pending',
    status_reason = coalesce(%(b_reason)s::varchar, status_reason),
    lease_token = NULL,
    lease_expires_at = NULL,
    attempt_count = attempt_count - 1,
    next_attempt_at = %(b_due_at)s::timestamptz,
    updated_at = %(b_now)s::timestamptz
  WHERE id = %(b_id)s::bigint
    AND status IS NOT DISTINCT FROM 'sending'
    AND lease_token IS NOT DISTINCT FROM %(b_token)s::varchar
  RETURNING id)
DELETE FROM email_attempt
WHERE id = %(b_attempt_id)s::bigint AND EXISTS (SELECT 1 FROM released)
RETURNING id
"""

# A worker that ticks runs: its row inserted or refreshed, no longer stopped.
BEAT = """
INSERT INTO worker_heartbeat (worker_id, host, pid, started_at, last_tick_at, version)
VALUES (%(worker_id)s::varchar, %(host)s::varchar, %(pid)s::integer,
        %(started_at)s::timestamptz, %(last_tick_at)s::timestamptz, %(version)s::varchar)
ON CONFLICT (worker_id) DO UPDATE
SET last_tick_at = excluded.last_tick_at, version = excluded.version, stopped_at = NULL
"""

READ_BREAKERS = "SELECT lane, state, trips, failure_rate, opened_at, resume_at FROM lane_breaker"

_BREAKER_VALUES = """%(state)s::varchar, %(trips)s::integer, %(failure_rate)s::float8,
  %(opened_at)s::timestamptz, %(resume_at)s::timestamptz, %(probe_owner)s::varchar,
  %(updated_at)s::timestamptz"""

# A lane's first breaker row, unless another worker wrote it first.
INSERT_BREAKER_IF_ABSENT = f"""
INSERT INTO lane_breaker
  (lane, state, trips, failure_rate, opened_at, resume_at, probe_owner, updated_at)
VALUES (%(lane)s::varchar, {_BREAKER_VALUES})
ON CONFLICT (lane) DO NOTHING
RETURNING lane
"""

# The breaker moves only from the state this worker saw (compare-and-set).
MOVE_BREAKER = f"""
UPDATE lane_breaker
SET (state, trips, failure_rate, opened_at, resume_at, probe_owner, updated_at) =
  ({_BREAKER_VALUES})
WHERE lane = %(lane)s::varchar
  AND state = %(seen_state)s::varchar AND trips = %(seen_trips)s::integer
"""

DELETE_EXPIRED_DEFERRALS = """
DELETE FROM domain_deferral WHERE deferred_until <= %(now)s::timestamptz
"""

# A domain's deferral for every worker; one stored already that ends later keeps its end.
STORE_DEFERRAL = """
INSERT INTO domain_deferral (domain, deferred_until, reply_code, updated_at)
VALUES (%(domain)s::varchar, %(until)s::timestamptz, %(code)s::integer, %(now)s::timestamptz)
ON CONFLICT (domain) DO UPDATE SET
  deferred_until = GREATEST(excluded.deferred_until, domain_deferral.deferred_until),
  reply_code = excluded.reply_code,
  updated_at = excluded.updated_at
"""

# The domain's pending intents due before the deferral ends wait until it ends.
DEFER_DOMAINS_INTENTS = """
UPDATE email_intent SET next_attempt_at = %(until)s::timestamptz
WHERE status = 'pending' AND next_attempt_at < %(until)s::timestamptz
  AND recipient LIKE %(pattern)s::varchar ESCAPE '\\'
"""

# The send budget's rate factor recovered to `now` (``console.core.token_bucket``'s
# arithmetic): back by a step fraction each step after the hold.
_FACTOR_NOW = """LEAST(1.0, factor + %(step_fraction)s::float8
    * GREATEST(0, FLOOR((%(now)s::float8 - slowed_at - %(hold)s::float8) / %(step)s::float8)
               + 1))"""

# The provider throttled a send: the shared rate halves (the factor first recovered to
# now), at most once every `every` seconds.
HALVE_RATE = f"""
UPDATE send_budget SET
  factor = GREATEST(%(min_factor)s::float8, {_FACTOR_NOW} / 2),
  slowed_at = %(now)s::float8, tokens = 0, refilled_at = %(now)s::float8
WHERE name = %(name)s::varchar AND %(now)s::float8 - slowed_at >= %(every)s::float8
"""

# A mailbox the relay called unknown goes on the list, unless it is there already.
SUPPRESS_REFUSED_MAILBOX = """
INSERT INTO suppression (recipient, reason, note, source_attempt_id, created_by, created_at)
VALUES (%(recipient)s::varchar, %(reason)s::varchar, %(note)s::varchar,
        %(source_attempt_id)s::bigint, %(created_by)s::varchar, %(created_at)s::timestamptz)
ON CONFLICT (recipient) DO NOTHING
RETURNING id
"""

# A condition fires unless it fires already: one row when this call fired it.
FIRE_ALERT = """
INSERT INTO alert_state
  (condition, active, summary, details, fired_at, cleared_at, webhook_due, webhook_claimed_at)
VALUES (%(condition)s::varchar, true, %(summary)s::text, %(details)s::json,
        %(fired_at)s::timestamptz, NULL, %(webhook_due)s::varchar, NULL)
ON CONFLICT (condition) DO UPDATE SET
  active = true, summary = excluded.summary, details = excluded.details,
  fired_at = excluded.fired_at, cleared_at = NULL, webhook_due = excluded.webhook_due,
  webhook_claimed_at = NULL
WHERE NOT alert_state.active
RETURNING condition
"""

# --- The claim (T1), in one transaction ---

_DUE_COLUMNS = ", ".join(f"i.{column.name}" for column in DUE_COLUMNS)
_IN_FORCE = "h.released_at IS NULL AND (h.until IS NULL OR h.until > %(b_now)s::timestamptz)"


def _due_in_lane(lane: str) -> str:
    """The conditions of a due intent `i` of `lane`: pending and due, its recipient's domain
    not deferred, neither its lane nor its template (or version) nor its domain held."""
    return f"""i.status = 'pending' AND i.lane = '{lane}'
  AND i.next_attempt_at <= %(b_now)s::timestamptz
  AND NOT EXISTS (
    SELECT 1 FROM domain_deferral d
    WHERE d.deferred_until > %(b_now)s::timestamptz
      AND lower(i.recipient) LIKE '%%@' || d.domain)
  AND NOT EXISTS (
    SELECT 1 FROM intent_hold h WHERE {_IN_FORCE} AND h.kind = 'lane' AND h.value = '{lane}')
  AND NOT EXISTS (
    SELECT 1 FROM intent_hold h WHERE {_IN_FORCE} AND (
      (h.kind = 'template' AND h.value = i.template
       AND (h.template_version IS NULL OR h.template_version = i.template_version))
      OR (h.kind = 'domain' AND lower(i.recipient) LIKE '%%@' || h.value)))"""


def _lock_due(lane: str, retries: bool) -> str:
    """Lock `lane`'s due retries (or first attempts), oldest first, skipping those another
    worker holds. Each kind is read through its own index (the retries' partial index
    ``ix_email_intent_retry_due`` names its condition in constants, as written here)."""
    kind = "i.attempt_count > 0" if retries else "i.attempt_count = 0"
    return f"""
SELECT {_DUE_COLUMNS} FROM email_intent i
WHERE {_due_in_lane(lane)}
  AND {kind}
ORDER BY i.next_attempt_at, i.id
LIMIT %(b_limit)s::integer
FOR UPDATE OF i SKIP LOCKED
"""


# (lane, True for its retries) -> the statement locking them
LOCK_DUE = {
    (lane, retries): _lock_due(lane, retries) for lane in LANES for retries in (True, False)
}

CRITICAL_DUE = f"SELECT EXISTS (SELECT 1 FROM email_intent i WHERE {_due_in_lane(CRITICAL)})"

SUPPRESSED_AMONG = "SELECT recipient FROM suppression WHERE recipient = ANY(%(b_forms)s::varchar[])"

# An intent not to send now moves to its decided status, without an attempt.
CLOSE_UNSENT = f"""
UPDATE email_intent SET
  {_LEASE_RELEASED}
WHERE id = %(b_id)s::bigint
"""

# The batch leased in one statement, its values as arrays: each intent `sending` under
# its fresh token, one `claimed` attempt added for each; each token with its attempt's id.
LEASE_BATCH = """
WITH leased AS (
  UPDATE email_intent i SET
    status = 'sending',
    lease_token = b.lease_token,
    lease_expires_at = %(b_lease_expires_at)s::timestamptz,
    attempt_count = b.attempt_number,
    updated_at = %(b_now)s::timestamptz
  FROM unnest(%(b_ids)s::bigint[], %(b_tokens)s::varchar[], %(b_numbers)s::integer[])
    AS b (intent_id, lease_token, attempt_number)
  WHERE i.id = b.intent_id
  RETURNING i.id, i.attempt_count, i.lease_token)
INSERT INTO email_attempt (intent_id, attempt_number, lease_token, worker_id, stage, started_at)
SELECT id, attempt_count, lease_token, %(b_worker_id)s::varchar, 'claimed',
  %(b_now)s::timestamptz
FROM leased
RETURNING lease_token, id
"""

# The send budget (``console.store.send_budget``; the arithmetic ``console.core.token_bucket``'s).
# The bucket's row lock makes concurrent claims take turns until this one commits.
LOCK_BUDGET = "UPDATE send_budget SET name = name WHERE name = %(name)s::varchar"

# The first claim ever: an empty bucket; a concurrent first claim made it already.
CREATE_BUCKET = """
INSERT INTO send_budget (name, tokens, refilled_at)
VALUES (%(name)s::varchar, %(tokens)s::float8, %(refilled_at)s::float8)
ON CONFLICT DO NOTHING
"""

_AVAILABLE = f"""LEAST(%(burst)s::float8, tokens
    + GREATEST(0.0, %(now)s::float8 - refilled_at) * %(rate)s::float8 * {_FACTOR_NOW})"""

# Refill the bucket to now, take up to the wanted tokens: how many, and how many are left
# (every expression reads the row as it was before this update: after a concurrent claim's).
_TAKEN = f"LEAST(%(want)s::integer, FLOOR({_AVAILABLE}))"
TAKE_TOKENS = f"""
UPDATE send_budget SET
  tokens = {_AVAILABLE} - {_TAKEN},
  refilled_at = GREATEST(refilled_at, %(now)s::float8),
  taken = {_TAKEN}
WHERE name = %(name)s::varchar
RETURNING taken, tokens
"""

# Tokens taken and not leased go back (the bucket holds at most its burst).
REFUND_TOKENS = """
UPDATE send_budget SET tokens = LEAST(%(burst)s::float8, tokens + %(tokens)s::integer)
WHERE name = %(name)s::varchar
"""

SENT_SINCE = """
SELECT coalesce(sum(sent), 0) FROM send_count WHERE hour_start >= %(first_hour)s::integer
"""

# What a claim leased counts towards its hour; hours older than two days are forgotten.
COUNT_SENT = """
INSERT INTO send_count (hour_start, sent) VALUES (%(hour)s::integer, %(sent)s::integer)
ON CONFLICT (hour_start) DO UPDATE SET sent = send_count.sent + excluded.sent
"""
FORGET_OLD_COUNTS = "DELETE FROM send_count WHERE hour_start < %(oldest)s::integer"
