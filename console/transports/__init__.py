"""Transports hand a rendered email to a mail server or provider and report what happened."""
