"""Question tools and approvals, the Question row, inbox, deadlines, drafts."""
