"""GET /conversations/{id}/members, PUT and DELETE /conversations/{id}/members/{username}:
whom a conversation is shared with (chat.sharing)."""

from ninja import Router

from api import results, services
from api.schemas import ERRORS, MEMBER_ERRORS, MemberIn, MemberOut
from chat import sharing
from chat.selectors import conversation_for_user

router = Router()


@router.get(
    "/conversations/{conversation_id}/members",
    response={200: list[MemberOut], **ERRORS},
    by_alias=True,
)
def list_members(request, conversation_id: int):
    """The conversation's owner, then the people it is shared with, first added first. Anyone
    who may read the conversation may read this."""
    conversation = conversation_for_user(user=request.user, conversation_id=conversation_id)
    return results.members_data(conversation)


@router.put(
    "/conversations/{conversation_id}/members/{username}",
    response={200: list[MemberOut], **MEMBER_ERRORS},
    by_alias=True,
)
def put_member(request, conversation_id: int, username: str, body: MemberIn):
    """Share the conversation with `username` in `role`, or change their role: what the Share
    panel's Add does. Only the owner may. The members as they are now."""
    membership = sharing.share_conversation(
        user=request.user, conversation_id=conversation_id, username=username, role=body.role
    )
    return results.members_data(membership.conversation)


@router.delete(
    "/conversations/{conversation_id}/members/{username}",
    response={200: list[MemberOut], **MEMBER_ERRORS},
    by_alias=True,
)
def delete_member(request, conversation_id: int, username: str):
    """Stop sharing the conversation with `username`: their open pages and streams of it
    close. Only the owner may. The members as they are now."""
    conversation = services.remove_member_named(
        user=request.user, conversation_id=conversation_id, username=username
    )
    return results.members_data(conversation)
