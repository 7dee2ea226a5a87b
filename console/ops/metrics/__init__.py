"""Figures: ``prometheus`` (the queue's state, the /metrics server); the delivery latency,
the send budget and holds (their collectors, the dashboard's figures, the alert checks on them)."""
