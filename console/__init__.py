"""Outbox console: an operator console and worker for transactional email.

Nothing heavy here: ``import console.outbox`` loads no web framework. The Flask
application is built by ``console.app.create_app``.
"""
