"""What an endpoint that moves the agent's turn answers: the agent's result, after waiting up
to `wait` seconds for the turn to settle (api.waiting)."""

from asgiref.sync import sync_to_async
from ninja.errors import AuthenticationError

from api import results
from api.auth import credential_check
from api.waiting import wait_until_settled
from chat.selectors import conversation_for_user


async def agent_reply(request, conversation_id: int, wait: float, **options) -> dict:
    """results.agent_result of the conversation (`options`: since_order, interrupted), once
    the turn settled or `wait` seconds passed; AuthenticationError (a 401) if the caller's
    credential ended while it waited."""
    if wait > 0:
        await wait_until_settled(conversation_id, wait)
        # The credential may have ended while the call waited (chat.sessions).
        if not await sync_to_async(credential_check(request).still_valid)():
            raise AuthenticationError
    return await sync_to_async(_agent_result)(request.user, conversation_id, **options)


def _agent_result(user, conversation_id: int, **options) -> dict:
    conversation = conversation_for_user(user=user, conversation_id=conversation_id)
    return results.agent_result(conversation, **options)
