"""Questions e-mailed to the users who asked for them (Settings, "Email me questions"):
a plain-text and an HTML part, in the recipient's language, with the question, the agent's
words before it, the link to the conversation and, for a one-question choice, a link per
option (reach.links). Sent through Django's mail settings, from the outbox (reach.outbox)."""

from django.conf import settings
from django.core.mail import EmailMultiAlternatives
from django.template.loader import render_to_string
from django.utils import translation
from django.utils.translation import gettext as _

from accounts.selectors import preferences_for
from questions.models import Question
from questions.selectors import context_line, question_url
from reach import links, outbox
from webhooks.channels import Send, Skip
from webhooks.models import Delivery


def attempt_seconds() -> float:
    """How long one mail may take to send: an SMTP exchange has several steps, each bounded
    by the mailer's timeout (EMAIL_TIMEOUT)."""
    options = settings.MAILERS.get("default", {}).get("OPTIONS", {})
    return 3 * float(options.get("timeout") or settings.WEBHOOK_TIMEOUT)


def prepare(delivery: Delivery) -> Send:
    """The e-mail of a queued delivery, ready to send; Skip if what it is about (a question,
    an agent's notification) no longer waits, or its recipient turned e-mail off or has no
    address any more."""
    recipient = delivery.recipient
    notice = outbox.waiting_notice(delivery) if outbox.is_notice(delivery) else None
    question = None if notice else outbox.waiting_question(delivery)
    preferences = preferences_for(recipient)
    if not (recipient.is_active and recipient.email and preferences.email_questions):
        raise Skip
    if notice is not None:
        message = compose_notice(notice=notice, recipient=recipient, language=preferences.language)
    else:
        message = compose(question=question, recipient=recipient, language=preferences.language)

    def send() -> None:
        message.send()

    return send


def compose(*, question: Question, recipient, language: str = "") -> EmailMultiAlternatives:
    """The e-mail for one recipient (creates its option links, or reuses them)."""
    with translation.override(language or settings.LANGUAGE_CODE):
        context = {
            "question": question,
            "asked": [] if question.is_tool_request else question.request.questions,
            "summary": question.summary,
            "conversation_title": str(question.conversation),
            "context_line": context_line(question.message),
            "conversation_url": question_url(question),
            "options": links.option_links(question=question, recipient=recipient),
            "recipient": recipient,
            "language": translation.get_language(),
        }
        subject = _("Parley asks: %(summary)s") % {"summary": question.summary}
        text = render_to_string("reach/question_email.txt", context)
        html = render_to_string("reach/question_email.html", context)
    return _message(subject=subject, text=text, html=html, recipient=recipient)


def compose_notice(
    *, notice: outbox.Notice, recipient, language: str = ""
) -> EmailMultiAlternatives:
    """The e-mail of an agent's notification ("Claude is waiting for your input")."""
    with translation.override(language or settings.LANGUAGE_CODE):
        context = {
            "notice": notice,
            "conversation_title": str(notice.conversation),
            "conversation_url": notice.url,
            "recipient": recipient,
            "language": translation.get_language(),
        }
        subject = _("%(conversation)s: %(notice)s") % {
            "conversation": notice.conversation,
            "notice": notice.text,
        }
        text = render_to_string("reach/notice_email.txt", context)
        html = render_to_string("reach/notice_email.html", context)
    return _message(subject=subject, text=text, html=html, recipient=recipient)


def _message(*, subject: str, text: str, html: str, recipient) -> EmailMultiAlternatives:
    message = EmailMultiAlternatives(
        subject=" ".join(subject.split())[:200],
        body=text,
        to=[recipient.email],
        headers={"Auto-Submitted": "auto-generated"},
    )
    message.attach_alternative(html, "text/html")
    return message
