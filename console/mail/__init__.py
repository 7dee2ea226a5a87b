"""Mail as bytes: the template catalog, rendering and serialization."""
