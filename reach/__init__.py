"""Questions by e-mail (answer links) and Web Push."""
