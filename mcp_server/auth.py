"""Personal API tokens as the MCP SDK's bearer authentication sees them (its TokenVerifier):
the same check as the JSON API's (api.tokens.token_record)."""

from channels.db import database_sync_to_async
from mcp.server.auth.provider import AccessToken

from api.tokens import token_record

# AccessToken.claims: the token's record, which a waiting call re-checks (a revoked token ends
# the wait).
TOKEN_ID_CLAIM = "parley_token_id"  # noqa: S105 (a claim's name, not a secret)


class ApiTokens:
    """mcp.server.auth.provider.TokenVerifier over Parley's personal API tokens."""

    async def verify_token(self, token: str) -> AccessToken | None:
        record = await database_sync_to_async(token_record)(token)
        if record is None:
            return None
        return AccessToken(
            # Not kept: the record identifies the token.
            token="",
            # The SDK lets a session be used only with the principal that opened it: a user.
            client_id=f"parley-user-{record.user_id}",
            subject=str(record.user_id),
            scopes=[],
            claims={TOKEN_ID_CLAIM: record.pk},
        )
