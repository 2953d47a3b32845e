"""A session in one conversation: its history, then the `> ` prompt; each message sent is
followed over the event stream until the turn ends, fails, or asks something, which is asked
at once.
"""

from terminal.api import APPROVAL, ELICITATION, TOOL_REQUESTS, Event, InvalidToken
from terminal.approvals import decide_all
from terminal.conversation import Attend, Conversation, Next, Position
from terminal.elicitations import elicit
from terminal.prompts import Prompts
from terminal.questions import answer
from terminal.render import Printer, show_history
from terminal.text import shown_line

# The states of a turn that is still under way: the session keeps following it.
RUNNING = ("llm_requesting", "tool_executing")


class Session:
    def __init__(self, conversation: Conversation) -> None:
        self.conversation = conversation
        self.screen = conversation.screen
        self.prompts = Prompts(self.screen)
        # The elicitations already asked here (each is asked once).
        self.handled: set[str] = set()

    def run(self, detail: dict) -> None:
        """Open the conversation (`detail`, as the API returns it), then read messages until
        Ctrl+D or Ctrl+C."""
        title = shown_line(detail["title"])
        self.screen.out.write(f"Conversation {self.conversation.id}: {title}. Ctrl+D to leave.")
        show_history(self.screen, detail)
        self.carry_on(Attend(detail))
        while True:
            try:
                text = input("> ")
            except (EOFError, KeyboardInterrupt):
                self.screen.out.write("")
                return
            if text.strip():
                path = self.conversation.path("messages")
                self.carry_on(self.conversation.send(path, {"content": text}))

    def carry_on(self, step: Next) -> None:
        """Follow the turn and ask what it waits for, until it is back at the prompt."""
        while step is not None:
            step = self.follow(step) if isinstance(step, Position) else self.attend(step.result)

    def attend(self, result: dict) -> Next:
        """Ask what waits for the user (a conversation, an agent result or a state change):
        a running tool's elicitation, the paused turn's approvals, or its question."""
        pending = result.get("pendingQuestions")
        if pending is None:  # a server from before approvals
            pending = [result["pendingQuestion"]] if result.get("pendingQuestion") else []
        elicitations = [p for p in pending if p.get("tool") == ELICITATION]
        elicitations = [p for p in elicitations if p["toolCallId"] not in self.handled]
        approvals = [p for p in pending if p.get("tool") == APPROVAL]
        questions = [p for p in pending if p.get("tool") not in TOOL_REQUESTS]
        if elicitations:
            self.handled.add(elicitations[0]["toolCallId"])  # each is asked once
            return elicit(self.conversation, self.prompts, elicitations[0])
        if approvals:
            return decide_all(self.conversation, self.prompts, approvals)
        if questions:
            return answer(self.conversation, self.prompts, questions[0])
        return None

    def follow(self, position: Position) -> Next:
        """Show the agent's text as it streams and its tool use, until its turn ends or asks
        something."""
        printer = Printer(self.screen, dict(position.texts), position.seen)
        asked = False
        with self.conversation.events(after=position.seq) as events:
            for event in events:
                if event.name == "state_change" and event.data["state"] not in RUNNING:
                    printer.end()
                    return self.stopped(event.data)
                if event.name == "revoked":
                    printer.end()
                    raise InvalidToken
                if self.show(printer, event):
                    asked = True
                    break
        printer.end()
        # A running tool waits for values: ask them, then follow on.
        return Attend(self.conversation.detail()) if asked else None

    def show(self, printer: Printer, event: Event) -> bool:
        """Print a text or message event; True when the message asks for values."""
        if event.name == "text":
            printer.text(event.data["messageId"], event.data["text"])
        elif event.name == "message":
            printer.message(event.data)
            return self.asks(event.data)
        return False

    def stopped(self, state: dict) -> Next:
        """The turn stopped: it failed, waits for the user, or is over."""
        if state["state"] == "error":
            self.screen.err.write("The agent failed; send a message to go on.")
        elif state.get("pendingQuestions") or state.get("pendingQuestion"):
            return Attend(state)
        return None

    def asks(self, message: dict) -> bool:
        """Whether the message shows an elicitation that waits and was not asked here yet."""
        return any(
            block.get("type") == "action"
            and block.get("action_type") == ELICITATION
            and (block.get("extra") or {}).get("questionResolution") == "asked"
            and (block.get("extra") or {}).get("toolCallId") not in self.handled
            for block in message.get("blocks", [])
        )
