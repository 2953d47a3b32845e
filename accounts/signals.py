"""Signals of the accounts app, for the apps above it."""

from django.dispatch import Signal

# Sent with `user` inside the transaction of accounts.services.sign_out_everywhere, after the
# user's sessions are deleted: receivers end what else signs the user in (API tokens) and
# what is still open (websockets, event streams).
signed_out_everywhere = Signal()
