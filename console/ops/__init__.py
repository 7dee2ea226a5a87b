"""Running the console, above the worker and the store; no Flask here.

- ``alerts/``: the conditions an operator must act on, and the cycle that fires and clears them;
- ``metrics/``: the figures Prometheus scrapes and the dashboard shows;
- ``jobs/``: the background jobs (alerts, retention, asking the provider) and their scheduler;
- ``hold_targets``: what a hold may name, for the holds page and ``console hold``.
"""
