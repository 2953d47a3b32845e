"""GET /questions: the user's questions, approvals and elicitations in every conversation,
with one status."""

from ninja import Router

from api import results
from api.schemas import ERRORS, AnyQuestionOut
from questions.models import QuestionStatus
from questions.selectors import questions_for_user

# At most this many questions in a listing: the most recent.
QUESTIONS_LISTED = 100

router = Router()


@router.get("/questions", response={200: list[AnyQuestionOut], **ERRORS}, by_alias=True)
def list_questions(request, status: QuestionStatus = QuestionStatus.PENDING):
    """The user's questions, approvals and elicitations in every conversation with one
    status: `pending` (waiting for an answer, the most recently asked first), or `answered`,
    `auto_resolved`, `rejected`, `expired`, `cancelled` (the most recently resolved first); at
    most 100. `tool` tells them apart."""
    found = questions_for_user(user=request.user, status=status)[:QUESTIONS_LISTED]
    return [results.question_data(q) for q in found]
