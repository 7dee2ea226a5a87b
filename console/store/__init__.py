"""The product's SQL statements, in modules named by what they store.

Callers (the worker, views, jobs, commands) never write SQL themselves; they call
these functions by name. Outside this package and the send path's engines
(``console.engine``, with the PostgreSQL LISTEN connection) SQL runs only where it
belongs to no aggregate: the demo's seeding (``demo/seed``, ``demo/seeded_history``)
and ``demo/casework``, which stands for an application
querying its own tables. The send loop's queries shared by both databases are
``claims`` (T1: the claim and the lease sweep) and ``records`` (T2's values), built
from ``statements``; what differs by database is in ``console.engine``; the workers'
heartbeats are in ``heartbeats``.

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
