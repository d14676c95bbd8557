"""The job runner: specs, GPU inventory and placement, the scheduler and its backends.

Kept import-free on purpose: `python -m amid.server.jobs.wrapper` imports this package first, and the
wrapper must start fast and record its pid before anything else.
"""
