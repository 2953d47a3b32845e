"""Sharing a conversation: its owner adds people as participants (they chat and answer) or
viewers (they read), changes their role and removes them. Every read and write of a
conversation checks the role through chat.selectors.conversation_for_user; these are the
only writes to memberships.

A change of someone's access reaches their open pages and streams after commit, through
their user group, the way a logout does (chat.live.sessions): `chat.access_changed` makes
each socket and event stream re-read its access at once, so a removed member's close within
moments, and their sidebar and question count follow.
"""

from django.contrib.auth import get_user_model
from django.db import transaction
from django.dispatch import Signal
from django.utils.translation import gettext_lazy as _

from chat.models import Conversation, MemberRole, Membership
from chat.selectors import Need, conversation_for_user
from core import events
from core.errors import ParleyError

NO_SUCH_USER = _("There is no user called “%(name)s”.")
NOT_THE_OWNER = _("You own this conversation already.")
NO_USERNAME = _("Type the username of the person to share with.")
NO_SUCH_ROLE = _("Choose Participant or Viewer.")
NO_SUCH_MEMBER = _("That person is no longer a member of this conversation.")


class SharingRefused(ParleyError):
    status = 400


# Sent inside the transaction of a change, holding the conversation's lock, as
# `receiver(sender=Conversation, conversation=..., user_id=..., role=...)`: the member's new
# role, None once removed. The apps above chat connect from AppConfig.ready() (the questions
# a participant was assigned go back to everyone when they can no longer answer).
access_changed = Signal()


@transaction.atomic
def share_conversation(*, user, conversation_id: int, username: str, role: str) -> Membership:
    """Share the conversation with the user called `username` in `role` (a MemberRole), or
    change their role if it is shared with them already. Only the owner may; raises
    NotAllowed, ConversationNotFound or SharingRefused."""
    conversation = conversation_for_user(
        user=user, conversation_id=conversation_id, lock=True, need=Need.MANAGE
    )
    username = username.strip()
    if not username:
        raise SharingRefused(NO_USERNAME)
    if role not in MemberRole.values:
        raise SharingRefused(NO_SUCH_ROLE)
    if "\x00" in username:  # no user's name holds one, and PostgreSQL text cannot
        raise SharingRefused(NO_SUCH_USER % {"name": username.replace("\x00", "\ufffd")})
    member = (
        get_user_model()
        .objects.filter(is_active=True, **{get_user_model().USERNAME_FIELD: username})
        .first()
    )
    if member is None:
        raise SharingRefused(NO_SUCH_USER % {"name": username})
    if member.pk == conversation.owner_id:
        raise SharingRefused(NOT_THE_OWNER)
    membership, created = Membership.objects.get_or_create(
        conversation=conversation, user=member, defaults={"role": role}
    )
    if not created and membership.role != role:
        membership.role = role
        membership.save(update_fields=["role"])
    _changed(conversation, member.pk, role)
    return membership


@transaction.atomic
def remove_member(*, user, conversation_id: int, member_id: int) -> None:
    """Stop sharing the conversation with the member `member_id` (a user id): their open
    pages and streams of it close. Only the owner may."""
    conversation = conversation_for_user(
        user=user, conversation_id=conversation_id, lock=True, need=Need.MANAGE
    )
    deleted, _rows = Membership.objects.filter(
        conversation=conversation, user_id=member_id
    ).delete()
    if not deleted:
        raise SharingRefused(NO_SUCH_MEMBER)
    _changed(conversation, member_id, None)


def _changed(conversation: Conversation, user_id: int, role: str | None) -> None:
    access_changed.send(sender=Conversation, conversation=conversation, user_id=user_id, role=role)
    events.send_on_commit(
        events.user_group(user_id), events.access_changed(user_id, conversation.pk)
    )
