"""The pure core of the send loop: classification, backoff and lifecycle decisions.

Nothing here imports Flask, SQLAlchemy or any part of the application but
``console.vocabulary``, and nothing does IO (one exception: a directory setting is
checked with ``Path.is_dir`` in ``setting_values``); every function takes the facts it
needs and returns a value, so each rule is tested with a table.
"""
