"""Role aliases: roles that select the same policy are one agent to `multi_agent_consensus`.

A policy's `match.agent_roles` lists several names for one kind of agent (the shipped
`coder` policy: coder, code_gen, code_generator, ...). Contexts are recorded under the role
the caller asked as, so the consensus lookup of agent `coder` also reads the contexts of
every role that selects the coder's policy, and an asker (`test_gen`) acts as the listed
agent (`tester`) whose policy it selects.

A role the consensus lists itself is always its own agent: seed 000's policy matches
`agent_roles: [code_gen, test_gen]` and merges `agents: [code_gen, test_gen]`, two agents
that select one policy, and merging either with the other would compare one agent's
context with itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from .policy import PolicySelection

__all__ = ["PolicySelector", "acting_agent", "agent_aliases"]


class PolicySelector(Protocol):
    def select(
        self, project_id: str, agent_role: str, intent: str, *, has_error: bool = False
    ) -> PolicySelection: ...


def acting_agent(
    policies: PolicySelector, project_id: str, intent: str, policy: str, agents: Sequence[str]
) -> str | None:
    """The first of `agents` that selects `policy` (the asker's): the agent the asker acts as."""
    for agent in agents:
        if policies.select(project_id, agent, intent).policy.name == policy:
            return agent
    return None


def agent_aliases(
    policies: PolicySelector, project_id: str, intent: str, agents: Sequence[str]
) -> dict[str, tuple[str, ...]]:
    """Each agent -> the role names whose contexts count as its own: itself and every role
    its policy's match lists that selects that same policy (for this project and intent),
    but for the other agents `agents` lists: each of those is an agent of its own."""
    listed = {a.casefold() for a in agents}  # roles match case-folded
    out: dict[str, tuple[str, ...]] = {}
    for agent in agents:
        policy = policies.select(project_id, agent, intent).policy
        names = [agent]
        for role in policy.match.agent_roles:
            if role.casefold() in listed or role in names:
                continue
            if policies.select(project_id, role, intent).policy.name == policy.name:
                names.append(role)
        out[agent] = tuple(names)
    return out
