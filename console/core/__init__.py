"""The pure core of the send loop: classification, backoff and lifecycle decisions.

Nothing here does IO or imports Flask or the database layer; every function takes
the facts it needs and returns a value, so each rule is tested with a table.
"""
