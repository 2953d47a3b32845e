"""Bearer tokens at /mcp/ as the MCP SDK's bearer authentication sees them (its
TokenVerifier): personal API tokens (the same check as the JSON API's,
api.tokens.token_record), and OAuth access tokens Parley issued for this /mcp/
(mcp_server.oauth)."""

from channels.db import database_sync_to_async
from mcp.server.auth.provider import AccessToken

from api.tokens import PREFIX, token_record, token_still_valid
from mcp_server.oauth import access_for, grant_still_valid

# AccessToken.claims: the credential's record, which a waiting call re-checks (a revoked
# token, or a revoked client, ends the wait): an API token's id, or an OAuth client's.
TOKEN_ID_CLAIM = "parley_token_id"  # noqa: S105 (a claim's name, not a secret)
CLIENT_ID_CLAIM = "parley_oauth_application_id"


def _principal(user_id: int) -> str:
    # The SDK lets a session be used only with the principal that opened it: a user, whichever
    # credential they present.
    return f"parley-user-{user_id}"


class McpTokens:
    """mcp.server.auth.provider.TokenVerifier over Parley's personal API tokens and the OAuth
    access tokens bound to `resource` (this request's /mcp/)."""

    def __init__(self, resource: str) -> None:
        self.resource = resource

    async def verify_token(self, token: str) -> AccessToken | None:
        if token.startswith(PREFIX):
            record = await database_sync_to_async(token_record)(token)
            if record is None:
                return None
            user_id, claims = record.user_id, {TOKEN_ID_CLAIM: record.pk}
        else:
            access = await database_sync_to_async(access_for)(token, self.resource)
            if access is None:
                return None
            user_id, claims = access.user_id, {CLIENT_ID_CLAIM: access.application_id}
        return AccessToken(
            # Not kept: the claims identify the credential.
            token="",
            client_id=_principal(user_id),
            subject=str(user_id),
            scopes=[],
            claims=claims,
        )


def credential_still_valid(*, user_id: int, claims: dict) -> bool:
    """Whether the credential a call was made with still stands (synchronous: database)."""
    if TOKEN_ID_CLAIM in claims:
        return token_still_valid(int(claims[TOKEN_ID_CLAIM]))
    return grant_still_valid(user_id=user_id, application_id=int(claims[CLIENT_ID_CLAIM]))
