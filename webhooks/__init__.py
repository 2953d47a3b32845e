"""The outbox of every channel: webhooks, e-mail, Web Push and Slack.

Whatever a question event sends away from Parley's pages, to a person or a program, is written
as a `Delivery` row in the transaction that made the event, and delivered after commit by
every process's sweep (webhooks.delivery): claimed by a conditional update, retried with
backoff, recorded. Three channels share it (webhooks.models.DeliveryChannel):

- webhooks: signed POSTs to the URLs people register (Standard Webhooks), which this app
  writes (webhooks.services) and sends (webhooks.sending);
- e-mail and Web Push: `reach` writes their rows and registers their senders as channels
  (webhooks.channels), so a mail server or a push service is never waited for in a request.

The app is named for its first channel; its label, tables and migrations keep that name.
"""
