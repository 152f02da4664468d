"""How flags and their environment variables are read and checked, the same way for all.

A flag's variable is checked only when the command uses the setting (`Setting.commands`): the
same type and allowed values as the flag, and a bad value stops with one line naming the
variable, the value and what is allowed (`Parser.error`: exit 2, no usage block, no traceback).
A flag typed on the command line is checked by argparse and named as the flag. The command may
come anywhere among the flags (`command_first`); a word that is no command gets a "did you mean".
"""

from __future__ import annotations

import argparse
import difflib
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

TRUE, FALSE = frozenset({"1", "true", "yes", "on"}), frozenset({"0", "false", "no", "off"})


class Parser(argparse.ArgumentParser):
    """Errors as the one line that matters, then where to read more."""

    def error(self, message: str) -> NoReturn:
        hint = f"see '{self.prog} --help' for every flag and its environment variable"
        self.exit(2, f"{self.prog}: error: {message}\n({hint})\n")


@dataclass(frozen=True, slots=True)
class Setting:
    """A flag that takes a value, with its variable and built-in default."""

    flag: str
    env: str
    default: str
    convert: Callable[[str], Any] | None
    choices: Sequence[str] | None
    commands: frozenset[str] | None  # None: every command uses it

    @property
    def dest(self) -> str:
        return self.flag.lstrip("-").replace("-", "_")

    def value(self, raw: str) -> Any:
        """`raw` as the setting's value; `ValueError` with what is allowed."""
        if self.choices is not None:
            raw = raw.strip().lower()
            if raw not in self.choices:
                raise ValueError(f"use one of {', '.join(self.choices)}")
        try:
            return self.convert(raw) if self.convert is not None else raw
        except argparse.ArgumentTypeError as error:
            raise ValueError(str(error)) from None


@dataclass(frozen=True, slots=True)
class Switch:
    """A flag that is on or off (`--x` / `--no-x`), with its variable."""

    flag: str
    env: str
    default: bool
    commands: frozenset[str] | None = None

    @property
    def dest(self) -> str:
        return self.flag.lstrip("-").replace("-", "_")

    def value(self, raw: str) -> bool:
        text = raw.strip().lower()
        if text not in TRUE | FALSE:
            raise ValueError(f"use true or false (or {', '.join(sorted(TRUE | FALSE))})")
        return text in TRUE


def fill(
    values: dict[str, Any],
    known: Sequence[Setting | Switch],
    environ: Mapping[str, str],
    command: str,
    fail: Callable[[str], NoReturn],
) -> None:
    """Every setting not typed as a flag: from its variable if the command uses it (checked),
    else its default."""
    for setting in known:
        if values.get(setting.dest, argparse.SUPPRESS) is not argparse.SUPPRESS:
            continue  # typed on the command line: argparse checked it
        raw = environ.get(setting.env)
        used = setting.commands is None or command in setting.commands
        if raw is not None and used:
            try:
                values[setting.dest] = setting.value(raw)
            except ValueError as error:
                fail(f"{setting.env}={raw!r}: {error}")
        elif isinstance(setting, Switch):
            values[setting.dest] = setting.default
        else:
            values[setting.dest] = setting.value(setting.default)


def command_first(argv: list[str], commands: Sequence[str], takes_value: set[str]) -> list[str]:
    """`--flag value sessions` works like `sessions --flag value`; no command means serve. The
    value of a flag is never taken for a command (`--web.telemetry-path metrics`)."""
    if argv and argv[0] in ("-h", "--help", "--version"):
        return argv
    skip = False
    for i, arg in enumerate(argv):
        if skip:
            skip = False
            continue
        if arg.startswith("-"):
            skip = arg in takes_value  # `--flag=value` holds its own value
            continue
        if arg in commands:
            return [arg, *argv[:i], *argv[i + 1 :]]
        close = difflib.get_close_matches(arg, commands, n=1)
        guess = f" (did you mean '{close[0]}'?)" if close else ""
        sys.stderr.write(
            f"coding-agent-exporter: error: no command {arg!r}{guess}; "
            f"the commands are {', '.join(commands)}\n"
        )
        raise SystemExit(2)
    return ["serve", *argv]


def value_flags(parser: argparse.ArgumentParser) -> set[str]:
    """The option strings of `parser` and its commands that take a value."""
    found: set[str] = set()
    parsers = [parser]
    while parsers:
        current = parsers.pop()
        for action in current._actions:
            if isinstance(action, argparse._SubParsersAction):
                parsers.extend(action.choices.values())
            elif action.option_strings and action.nargs is None:
                found.update(action.option_strings)
    return found
