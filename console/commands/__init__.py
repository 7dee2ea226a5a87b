"""The bodies of the ``console`` commands that ``console.cli`` names: ``db``, ``user``,
``hold``/``release``/``holds`` and ``worker`` (the send loop's process, started without Flask)."""
