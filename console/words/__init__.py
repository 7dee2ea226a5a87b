"""The sentences people read, made from the facts the layers above hand over: no IO, no Flask."""
