"""Provider payloads of the event tests, one module per provider, each naming its sources."""
