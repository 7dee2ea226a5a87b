"""``console demo``: its SMTP capture server and the casework example."""
