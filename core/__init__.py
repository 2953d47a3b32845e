"""Errors, limits, text, presence, events, background jobs.

What every app uses: core imports no app (the layers contract in pyproject.toml), and holds
nothing app-specific.
"""
