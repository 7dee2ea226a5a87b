"""The send loop (claim, send, record) and what drives it.

Guard, eligibility, wake-ups and the scheduler bridge live beside the loop.
"""
