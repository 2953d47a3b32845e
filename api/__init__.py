"""The JSON API, event streams and tokens, the terminal client."""
