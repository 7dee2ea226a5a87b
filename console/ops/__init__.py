"""Running it: alerts, metrics, retention, background jobs and logs."""
