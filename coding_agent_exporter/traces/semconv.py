"""The OpenTelemetry semantic conventions used for spans, pinned in one place.

Names follow the GenAI conventions of semantic conventions 1.44.0 (the schema below). They are
spelled out here rather than imported from the `_incubating` modules of
opentelemetry-semantic-conventions, whose names may move between releases.
"""

from __future__ import annotations

SCHEMA_URL = "https://opentelemetry.io/schemas/1.44.0"

OPERATION_NAME = "gen_ai.operation.name"
AGENT_NAME = "gen_ai.agent.name"
AGENT_ID = "gen_ai.agent.id"
AGENT_DESCRIPTION = "gen_ai.agent.description"
PROVIDER_NAME = "gen_ai.provider.name"
CONVERSATION_ID = "gen_ai.conversation.id"
REQUEST_MODEL = "gen_ai.request.model"
RESPONSE_MODEL = "gen_ai.response.model"
RESPONSE_ID = "gen_ai.response.id"
RESPONSE_FINISH_REASONS = "gen_ai.response.finish_reasons"
USAGE_INPUT_TOKENS = "gen_ai.usage.input_tokens"
USAGE_OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
USAGE_CACHE_READ_INPUT_TOKENS = "gen_ai.usage.cache_read.input_tokens"
USAGE_CACHE_CREATION_INPUT_TOKENS = "gen_ai.usage.cache_creation.input_tokens"
USAGE_REASONING_OUTPUT_TOKENS = "gen_ai.usage.reasoning.output_tokens"
TOOL_NAME = "gen_ai.tool.name"
TOOL_CALL_ID = "gen_ai.tool.call.id"
TOOL_CALL_ARGUMENTS = "gen_ai.tool.call.arguments"  # content: only with capture-content
TOOL_CALL_RESULT = "gen_ai.tool.call.result"
INPUT_MESSAGES = "gen_ai.input.messages"
OUTPUT_MESSAGES = "gen_ai.output.messages"
ERROR_TYPE = "error.type"

OP_INVOKE_AGENT = "invoke_agent"
OP_CHAT = "chat"
OP_EXECUTE_TOOL = "execute_tool"

# Our own additions, outside the gen_ai namespace.
PROJECT = "coding_agent.project"
TURN_OUTCOME = "coding_agent.turn.outcome"
TURN_TRIGGER = "coding_agent.turn.trigger"  # "prompt", or "continuation": no prompt began it
SESSION_KIND = "coding_agent.session.kind"
TOOL_OUTCOME = "coding_agent.tool.outcome"
SUBAGENT_BACKGROUND = "coding_agent.subagent.background"
SUBAGENT_OUTCOME = "coding_agent.subagent.outcome"
WAIT_REASON = "coding_agent.wait.reason"

PROVIDERS = {
    "claude-code": "anthropic",
    "codex": "openai",
    "gemini-cli": "gcp.gemini",
    "vibe": "mistral_ai",
}
