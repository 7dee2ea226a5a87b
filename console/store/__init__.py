"""The product's SQL statements, in modules named by what they store.

Callers (the worker, views, jobs, commands) never write SQL themselves; they call
these functions by name. Outside this package and the send path's engines
(``console.engine``, with the PostgreSQL LISTEN connection) SQL runs only where it
belongs to no aggregate: the demo's seeding (``demo/seed``, ``demo/seeded_history``),
``demo/casework``, which stands for an application querying its own tables, and
``console drill``, which reads back its own scratch database. The send loop's
statements on SQLite are built here (``claims``: T1 and the lease sweep; ``records``:
T2's values; ``statements``); PostgreSQL's are plain SQL in ``console.engine``. The
workers' heartbeats are in ``heartbeats``.

The transaction rule:

- a function that takes a ``Session`` works inside the caller's transaction and
  never commits — the caller (the worker's tick, a view, a command) commits or
  rolls back the unit of work as a whole;
- the send path's marks and records are the engine's (``console.engine``): each
  is one unit of work and commits it;
- a function that takes a session factory runs its own short transactions and
  commits each (batched jobs such as retention);
- ``intents.insert_intent_once`` (what ``enqueue`` runs) adds to the
  application's transaction and never commits.
"""
