"""`myriad completion bash`: a completion script made from the argument parser itself, so
every command and option it knows is completed and none it does not."""

from __future__ import annotations

import argparse
from collections.abc import Iterator


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _options(parser: argparse.ArgumentParser) -> list[str]:
    return sorted(o for a in parser._actions for o in a.option_strings if o.startswith("--"))


def _words(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[str, str]]:
    """(command path, words completed there) for the parser and every command below it."""
    children = _subparsers(parser)
    yield " ".join(path), " ".join([*children, *_options(parser)])
    for name, child in children.items():
        yield from _words(child, (*path, name))


def bash_script(parser: argparse.ArgumentParser) -> str:
    cases = "\n".join(f'    "{path}") words="{words}" ;;' for path, words in _words(parser))
    prog = parser.prog
    return f"""# bash completion for {prog}; load with: source <({prog} completion bash)
_{prog}_complete() {{
  local path="" word i words
  for ((i = 1; i < COMP_CWORD; i++)); do
    word="${{COMP_WORDS[i]}}"
    [[ "$word" == -* ]] && continue
    case "$path${{path:+ }}$word" in
{_known_paths(parser)}
    esac
  done
  case "$path" in
{cases}
    *) words="" ;;
  esac
  local current="${{COMP_WORDS[COMP_CWORD]}}"
  if [[ "$current" == -* ]]; then
    COMPREPLY=($(compgen -W "$words" -- "$current"))
  else
    COMPREPLY=($(compgen -W "$words" -- "$current") $(compgen -f -- "$current"))
  fi
}}
complete -o filenames -F _{prog}_complete {prog}
"""


def _known_paths(parser: argparse.ArgumentParser) -> str:
    paths = [path for path, _ in _words(parser) if path]
    return "\n".join(f'      "{path}") path="{path}" ;;' for path in paths)
