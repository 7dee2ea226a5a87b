"""Small example applications that show how to use the outbox."""
