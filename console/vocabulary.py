"""The product's words, stored as these lowercase strings (docs/schema.md), in one place.

Statuses and lanes are table values that applications in other languages write;
stages, outcomes, breaker states and ambiguity policies are what the worker
records and decides with.
"""

# Intent statuses.
PENDING = "pending"
SENDING = "sending"
SUBMITTED = "submitted"
AMBIGUOUS = "ambiguous"  # also the outcome of that name: the two are the same word
FAILED = "failed"
DEAD = "dead"
EXPIRED = "expired"
SUPPRESSED = "suppressed"
CANCELLED = "cancelled"
STATUSES = (PENDING, SENDING, SUBMITTED, AMBIGUOUS, FAILED, DEAD, EXPIRED, SUPPRESSED, CANCELLED)
TERMINAL_STATUSES = (SUBMITTED, FAILED, DEAD, EXPIRED, SUPPRESSED, CANCELLED)
REQUEUEABLE_STATUSES = (FAILED, DEAD, AMBIGUOUS, EXPIRED, CANCELLED)

# Lanes, in claim order: critical first.
CRITICAL = "critical"
BULK = "bulk"
LANES = (CRITICAL, BULK)

# Operator roles, least to most.
VIEWER = "viewer"
OPERATOR = "operator"
ADMIN = "admin"
ROLES = (VIEWER, OPERATOR, ADMIN)

# How far one attempt got, in order. Before DATA_SENT nothing was handed over.
CLAIMED = "claimed"
CONNECTING = "connecting"
ENVELOPE = "envelope"
DATA_SENT = "data_sent"  # the body (or HTTP request) may have reached the other side
REPLY_READ = "reply_read"
STAGES = (CLAIMED, CONNECTING, ENVELOPE, DATA_SENT, REPLY_READ)

# Outcomes of an attempt.
ACCEPTED = "accepted"
TRANSIENT = "transient"
PERMANENT = "permanent"
OUTCOMES = (ACCEPTED, TRANSIENT, PERMANENT, AMBIGUOUS)

# Per-lane circuit breaker states.
CLOSED = "closed"
OPEN = "open"
HALF_OPEN = "half_open"
BREAKER_STATES = (CLOSED, OPEN, HALF_OPEN)

# Ambiguity policies of a template.
HOLD = "hold"  # wait for an operator or a provider event
RESEND = "resend"  # a duplicate is harmless: retry
AMBIGUITY_POLICIES = (HOLD, RESEND)
