"""The turn engine: the persisted state machine of an agent's turn (turns), the tools it may
call (tools, subagents), the model providers (providers), the loop that advances one turn
(runtime) and the processes' runners that run turns and find lost ones again (runner).

Layers point down: runner -> runtime -> tools -> turns -> chat.transcript. A transition of
the state machine returns what should happen next (turns.Next); its caller hands that to
dispatch after commit, which gets the turn a runner without knowing which."""
