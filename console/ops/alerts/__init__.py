"""Alert conditions: each check (``checks``, ``relay``, ``endpoints``, ``lookups``) returns a
``Condition``; ``cycle`` fires and clears them, ``firing`` and ``webhook`` tell the targets."""
