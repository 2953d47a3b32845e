"""Questions and approvals answered in Slack: the bot's messages and its interactions."""
