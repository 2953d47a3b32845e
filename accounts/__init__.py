"""Preferences, signing out everywhere, new accounts."""
