"""Every SQL statement of the product, in modules named by what they store.

Callers (the worker, views, jobs, commands) never write SQL themselves; they call
these functions by name. The send loop's queries are ``claims`` (T1: the claim and
the lease sweep) and ``records`` (T2), built from ``statements``; the workers'
heartbeats are in ``heartbeats``.

The transaction rule:

- a function that takes a ``Session`` works inside the caller's transaction and
  never commits — the caller (the worker's tick, a view, a command) commits or
  rolls back the unit of work as a whole;
- a function that takes a ``Connection`` from ``records.writer`` is one
  unit of work on its own and commits it (``mark_data_sent``,
  ``record_outcome``): each is a single statement on PostgreSQL;
- a function that takes a session factory runs its own short transactions and
  commits each (batched jobs such as retention);
- ``intents.insert_intent_once`` (what ``enqueue`` runs) adds to the
  application's transaction and never commits.
"""
