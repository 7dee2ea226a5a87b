"""Background jobs: ``schedule`` runs the alert cycle, retention (``console prune`` by hand)
and the provider asking (``ask_now``: an operator's one question) on a scheduler of their own."""
