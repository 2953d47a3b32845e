"""Live updates: the events that leave after a commit, the websockets that turn them into the
page's partials, and the sessions whose end closes them."""
