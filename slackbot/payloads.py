"""Slack's interaction payloads (block_actions, view_submission), as far as Parley reads them:
parsed before anything acts on them. Slack adds fields over time, so unknown ones are
ignored rather than refused."""

from typing import Literal

from pydantic import BaseModel, ConfigDict


class _Slack(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class SlackUser(_Slack):
    id: str
    team_id: str = ""


class Team(_Slack):
    id: str = ""


class Channel(_Slack):
    id: str = ""


class Container(_Slack):
    channel_id: str = ""
    message_ts: str = ""


class Action(_Slack):
    action_id: str
    block_id: str = ""
    value: str = ""


class Option(_Slack):
    value: str


class StateValue(_Slack):
    type: str = ""
    value: str | None = None
    selected_option: Option | None = None
    selected_options: list[Option] = []

    def chosen_values(self) -> list[str]:
        if self.selected_option is not None:
            return [self.selected_option.value]
        return [option.value for option in self.selected_options]


class ViewState(_Slack):
    values: dict[str, dict[str, StateValue]] = {}


class View(_Slack):
    id: str = ""
    callback_id: str = ""
    private_metadata: str = ""
    state: ViewState = ViewState()


class Interaction(_Slack):
    type: Literal["block_actions", "view_submission", "view_closed", "shortcut", "message_action"]
    user: SlackUser
    team: Team | None = None
    channel: Channel | None = None
    container: Container = Container()
    trigger_id: str = ""
    actions: list[Action] = []
    view: View | None = None

    @property
    def team_id(self) -> str:
        return self.user.team_id or (self.team.id if self.team else "")

    @property
    def channel_id(self) -> str:
        return self.container.channel_id or (self.channel.id if self.channel else "")
