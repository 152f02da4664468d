"""`UsageTotalsRead.scope`: totals an agent keeps side by side for one model (Hermes Agent's
own calls per task in `session_model_usage`, beside the conversation's `sessions` row). Each
replaces only its own last totals; all count for the session. (The fold of totals itself:
`tests/test_state.py`.)"""

from __future__ import annotations

from coding_agent_exporter.events import Usage, UsageTotalsRead
from coding_agent_exporter.state.state import State

A, S = "hermes", "s1"


def totals(state: State, input: int, scope: str = "", model: str = "m") -> None:
    event = UsageTotalsRead(
        session_id=S, at=100.0, model=model, usage=Usage(input=input), scope=scope
    )
    state.apply(A, event)


def counted(state: State) -> int:
    return sum(v for k, v in state.totals.tokens.items() if k[3] == "input")


def test_totals_kept_side_by_side_for_one_model_all_count() -> None:
    state = State()
    totals(state, 100)
    totals(state, 30, scope="title_generation")
    totals(state, 40, scope="title_generation")  # replaces its own 30, not the 100
    totals(state, 100)  # the conversation's again: unchanged
    totals(state, 9, scope="approval")
    assert counted(state) == 149
    assert state.session(A, S).tokens.input == 149
