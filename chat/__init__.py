"""Conversations, the turn engine, live updates."""
