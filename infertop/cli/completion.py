"""`infertop completion bash|zsh|fish`: a shell completion script, made from the parser.

    eval "$(infertop completion bash)"     # in ~/.bashrc
    eval "$(infertop completion zsh)"      # in ~/.zshrc (through bashcompinit)
    infertop completion fish > ~/.config/fish/completions/infertop.fish

The script lists what the parser accepts (subcommands, their flags, choices); flags
that take a file complete file names. Only the parser's own names go into the script.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from infertop.cli.common import EXIT_OK

NAME = "completion"
HELP = "print a shell completion script (bash, zsh or fish)"
# flags whose value is a path: the shell completes file names there
_FILE_FLAGS = ("--layout", "--record", "--out", "--dir", "--layout-out")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("shell", choices=("bash", "zsh", "fish"))


class _Flags(argparse.ArgumentParser):
    """A parser that remembers what was declared on it: long flags and positional choices
    (argparse has no public way to list a built parser's arguments)."""

    def __init__(self) -> None:
        super().__init__(add_help=False)
        self.flags: list[str] = ["--help"]
        self.choices: list[str] = []

    def add_argument(self, *names: str, **kwargs: Any) -> argparse.Action:  # type: ignore[override]
        self.flags += [n for n in names if n.startswith("--")]
        if not any(n.startswith("-") for n in names) and kwargs.get("choices"):
            self.choices += [str(c) for c in kwargs["choices"]]
        return super().add_argument(*names, **kwargs)


def _declared(add: Callable[[argparse.ArgumentParser], None]) -> _Flags:
    parser = _Flags()
    add(parser)
    parser.flags.sort()
    return parser


def _commands() -> tuple[_Flags, dict[str, tuple[str, _Flags]]]:
    """The global flags, and each subcommand's help and flags."""
    from infertop.cli.main import SUBCOMMANDS, add_global_arguments  # assembled there

    subs = {c.NAME: (str(c.HELP), _declared(c.add_arguments)) for c in SUBCOMMANDS}
    return _declared(add_global_arguments), subs


def bash_script() -> str:
    top_flags, subs = _commands()
    cases = "\n".join(
        f'        {name}) opts="{" ".join(sub.flags + sub.choices)}" ;;' for name, (_, sub) in subs.items()
    )
    top = " ".join(top_flags.flags + list(subs))
    return f"""# infertop completion for bash (eval "$(infertop completion bash)")
_infertop() {{
    local cur prev cmd="" opts w i
    cur="${{COMP_WORDS[COMP_CWORD]}}"
    prev="${{COMP_WORDS[COMP_CWORD-1]}}"
    for ((i = 1; i < COMP_CWORD; i++)); do
        w="${{COMP_WORDS[i]}}"
        case " {" ".join(subs)} " in *" $w "*) cmd="$w"; break ;; esac
    done
    case "$prev" in
        {"|".join(_FILE_FLAGS)}) COMPREPLY=($(compgen -f -- "$cur")); return ;;
    esac
    case "$cmd" in
{cases}
        *) opts="{top}" ;;
    esac
    COMPREPLY=($(compgen -W "$opts" -- "$cur"))
}}
complete -o default -F _infertop infertop
"""


def zsh_script() -> str:
    return ("# infertop completion for zsh (eval \"$(infertop completion zsh)\")\n"
            "autoload -U +X bashcompinit && bashcompinit\n" + bash_script())


def fish_script() -> str:
    top_flags, subs = _commands()
    lines = ["# infertop completion for fish", "complete -c infertop -f"]
    names = " ".join(subs)
    for name, (help_text, sub) in subs.items():
        lines.append(f"complete -c infertop -n '__fish_use_subcommand' -a {name} -d '{_quote(help_text)}'")
        for flag in sub.flags:
            extra = " -r -F" if flag in _FILE_FLAGS else ""
            lines.append(f"complete -c infertop -n '__fish_seen_subcommand_from {name}' -l {flag[2:]}{extra}")
        for choice in sub.choices:
            lines.append(f"complete -c infertop -n '__fish_seen_subcommand_from {name}' -a {choice}")
    before_command = f"not __fish_seen_subcommand_from {names}"
    for flag in top_flags.flags:
        extra = " -r -F" if flag in _FILE_FLAGS else ""
        lines.append(f"complete -c infertop -n '{before_command}' -l {flag[2:]}{extra}")
    return "\n".join(lines) + "\n"


def _quote(text: str | None) -> str:
    return (text or "").replace("\\", "").replace("'", "")


def run(args: argparse.Namespace) -> int:
    script = {"bash": bash_script, "zsh": zsh_script, "fish": fish_script}[args.shell]()
    sys.stdout.write(script)
    return EXIT_OK
