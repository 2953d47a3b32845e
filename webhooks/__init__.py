"""The outbox: webhooks, and the channels others register."""
