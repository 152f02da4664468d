"""Claude Code's workflows (2.1.3xx): the `Workflow` tool starts a run of agents in the background.

As recorded from 2.1.332, below `projects/<encoded cwd>/<session id>/`:

- `subagents/workflows/<run id>/agent-<agent id>.jsonl` (+ `.meta.json`, `agentType`
  `workflow-subagent` unless the script names one, `description` = the agent's label,
  `inWorkflowRun: true`): each agent's journal, read as a sub-agent's.
- `subagents/workflows/<run id>/journal.jsonl`: the run's own log (`launched`, `started`,
  `result`, `failed`), without times: not read.
- `workflows/<run id>.json`: the run file, written when the run ends: `workflowName`, `status`
  (`completed`, `killed` after `TaskStop`, ...) and `workflowProgress`, one `workflow_agent` per
  agent with its `agentId`, `label`, `agentType` (only when the script names one), `state`
  (`done`, `error`, or the state it was in when the run stopped), `startedAt` and
  `durationMs`. Read by `RunReader`: each agent's outcome.
- `workflows/scripts/<name>-<run id>.js`: the script: not read.

The lead's `Workflow` tool result (`toolUseResult.runId`, `workflowName`) names the run
(`run_launched`): its agents are linked to that call.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...events import Event, RunLaunched, SubagentEnded, SubagentOutcome, SubagentStarted
from ..fields import timestamp

DEFAULT_TYPE = "workflow-subagent"
"""The `agentType` of a workflow's agent whose script names none (its meta file's)."""
_DONE: dict[str, SubagentOutcome] = {"done": "completed", "error": "failed", "failed": "failed"}
_GOING = frozenset({"running", "pending", "queued", "start"})
"""Run statuses of a run that has not ended."""


def run_launched(
    session_id: str, at: float, call_id: str, result: Mapping[str, Any]
) -> RunLaunched | None:
    """The run a `Workflow` tool result says it launched, if it names one."""
    run_id, name = result.get("runId"), result.get("workflowName")
    if not isinstance(run_id, str) or not run_id:
        return None
    return RunLaunched(
        session_id=session_id,
        at=at,
        call_id=call_id,
        run_id=run_id,
        name=name if isinstance(name, str) and name else None,
    )


class RunReader:
    """`workflows/<run id>.json`: its agents, and how each ended once the run did."""

    __slots__ = ("run_id", "session_id")

    def __init__(self, session_id: str, run_id: str) -> None:
        self.session_id = session_id
        self.run_id = run_id

    def __reduce__(self) -> tuple[Any, ...]:
        """Made by `__init__`: a class compiled by mypyc (`setup.py`) is not made without it."""
        return RunReader, (self.session_id, self.run_id)

    def feed(self, record: object) -> list[Event]:
        if not isinstance(record, dict):
            return []
        progress = record.get("workflowProgress")
        status = record.get("status")
        ended = isinstance(status, str) and status not in _GOING
        end = timestamp(record.get("timestamp"))
        events: list[Event] = []
        for agent in progress if isinstance(progress, list) else []:
            if isinstance(agent, dict) and isinstance(agent.get("agentId"), str):
                events += self._agent(agent, end if ended else None)
        return events

    def _agent(self, agent: Mapping[str, Any], run_end: float | None) -> list[Event]:
        agent_id, label, kind = agent["agentId"], agent.get("label"), agent.get("agentType")
        started = timestamp(agent.get("startedAt"))
        events: list[Event] = [
            SubagentStarted(
                session_id=self.session_id,
                at=started,
                subagent_id=agent_id,
                subagent_type=kind if isinstance(kind, str) and kind else DEFAULT_TYPE,
                title=label if isinstance(label, str) and label else None,
                background=True,
                run_id=self.run_id,
            )
        ]
        state = agent.get("state")
        outcome = _DONE.get(state) if isinstance(state, str) else None
        if outcome is None and run_end is None:
            return events  # still going
        at = _ended_at(started, agent.get("durationMs")) if outcome else None
        at = at or run_end or started
        if at is not None:
            events.append(
                SubagentEnded(
                    session_id=self.session_id,
                    at=at,
                    subagent_id=agent_id,
                    outcome=outcome or "cancelled",
                )
            )
        return events


def _ended_at(started: float | None, duration: object) -> float | None:
    if started is None or not isinstance(duration, int | float) or isinstance(duration, bool):
        return None
    return started + max(0.0, float(duration)) / 1000
