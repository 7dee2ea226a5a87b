"""Transports hand a rendered email to a mail server or provider and report what happened.

They import ``console.core`` and ``console.vocabulary``; the HTTP providers' modules also
import ``console.events`` (our reference in a send's metadata, and the provider's event
parsers to read a lookup's answer), and ``factory`` reads ``console.config``'s settings.
Nothing here imports the store, the tables, the worker or Flask.
"""
